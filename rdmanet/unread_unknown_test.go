//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Where the receive CQ cannot tell without polling whether completions
// wait (rdma-core), unread polls it while no read is in progress: a
// datagram waiting is known to wait, and the completion stays for the
// next read.
func TestUnreadPollsWhereCQCannotTell(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendUnknownUnread })
	tx := listen(t, g)
	pending, known := rdmanet.Unread(rx)
	require.True(t, known, "no read in progress: it polls")
	require.False(t, pending, "nothing sent yet")

	_, err := tx.WriteTo([]byte("waiting"), g)
	require.NoError(t, err)
	// The datagram reaches rx's socket after the send returns: look
	// until it is there (bounded).
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending, known = rdmanet.Unread(rx)
		require.True(t, known)
		if pending || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	require.True(t, pending, "a datagram sent 5 s ago not seen waiting")
	pending, known = rdmanet.Unread(rx)
	require.True(t, pending && known, "the polled completion still waits")
	b, _ := mustRead(t, rx)
	require.Equal(t, "waiting", string(b))
	pending, known = rdmanet.Unread(rx)
	require.True(t, known)
	require.False(t, pending, "read")
}
