//go:build linux

package rdmanet_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Stats after Close keeps the drop counts the QP had at Close (the QP,
// and the sockets a software QP reads them from, are gone): here a conn
// that dropped junk datagrams (bad headers) before it was closed.
func TestClosedConnKeepsDropCounts(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("software backend only: rdma-core counts UD drops per port, not per QP")
	}
	g := newGroup()
	c := listen(t, g)
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer u.Close()
	junk := [][]byte{{0x64}, make([]byte, 11), []byte("not an InfiniBand packet")}
	for _, j := range junk {
		_, err := u.WriteTo(j, &net.UDPAddr{IP: g.IP, Port: 4791})
		require.NoError(t, err)
	}
	// The junk is dropped as the conn reads its socket.
	expectNothing(t, c, 50*time.Millisecond)
	// Not-for-us left out: the group's multicast socket is bound to
	// *:4791, so a datagram another test in the namespace sends to a QP
	// that has closed may come to it (the junk is dropped for other
	// reasons).
	dropped := func() map[string]uint64 {
		m := c.Stats().Dropped
		delete(m, rdmanet.DropNotForUs)
		return m
	}
	var before map[string]uint64
	deadline := time.Now().Add(5 * time.Second)
	for {
		before = dropped()
		var n uint64
		for _, v := range before {
			n += v
		}
		if n == uint64(len(junk)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drops before Close: got %v (%d), want %d", before, n, len(junk))
		}
		expectNothing(t, c, 10*time.Millisecond)
	}
	require.NoError(t, c.Close())
	require.Equal(t, before, dropped(), "drop counts after Close")
}
