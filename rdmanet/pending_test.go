//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet/internal/unread"
)

// The reliable layer's unread check (pending.go) sees datagrams that
// arrived and were not read yet, on either backend (software: its
// sockets' queues; rdma-core: one poll of the CQ, kept for the next
// read), until the reads have taken them all, and nothing once closed.
func TestUnread(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	check := func() (bool, bool) { return unread.Check(rx) }
	u, known := check()
	require.True(t, known, "nobody reads: the conn can tell")
	require.False(t, u, "nothing sent yet")
	const n = 3
	for range n {
		_, err := tx.WriteTo([]byte("unread"), g)
		require.NoError(t, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for u, _ := check(); !u; u, _ = check() {
		if time.Now().After(deadline) {
			t.Fatal("3 datagrams sent to the group: the receiver reports none unread after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		u, known := check()
		require.True(t, known)
		require.True(t, u, "datagram %d of %d not read yet", i, n)
		mustRead(t, rx)
	}
	u, known = check()
	require.True(t, known)
	require.False(t, u, "all read")
	require.NoError(t, rx.Close())
	u, known = check()
	require.True(t, known)
	require.False(t, u, "closed")
}
