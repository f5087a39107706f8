//go:build linux

package rdmanet_test

import (
	"testing"

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
	witness := listen(t, g) // reads what the group got, so rx holds it too
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
	// A send completes after WriteTo returns: once the witness has read
	// all n, each was queued to every member of the group, rx included.
	for range n {
		mustRead(t, witness)
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
