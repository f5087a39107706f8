//go:build linux

package rdmanet_test

import (
	"errors"
	"net"
	"testing"

	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// A conn keeps at most 1024 unicast address handles (the package doc):
// writes to more peers than that evict one handle for each new peer.
func TestAHCacheBounded(t *testing.T) {
	const maxAHs = 1024 // the number the package doc states
	t.Parallel()
	if testDevice != "" {
		t.Skip("peers on 127.0.0.0/8")
	}
	c := listen(t, newGroup())
	peer := func(i int) *rdmanet.Addr {
		var g ipoib.GID
		copy(g[:], net.IPv4(127, 1, byte(i>>8), byte(i)).To16())
		return &rdmanet.Addr{GID: g, QPN: 0x100}
	}
	write := func(i int) {
		t.Helper()
		for try := 0; ; try++ {
			_, err := c.WriteTo([]byte("x"), peer(i))
			if err == nil {
				return
			}
			// Nobody listens there: a send the kernel refused later is
			// returned by the next write, which then sent nothing.
			require.True(t, errors.Is(err, rdmanet.ErrEarlierSendFailed) && try < 3, "write to peer %d: %v", i, err)
		}
	}
	for i := range maxAHs {
		write(i)
		require.Equal(t, i+1, rdmanet.AHCacheLen(c), "after writing to %d peers", i+1)
	}
	for i := maxAHs; i < maxAHs+10; i++ {
		write(i)
		require.Equal(t, maxAHs, rdmanet.AHCacheLen(c), "after writing to %d peers", i+1)
	}
}
