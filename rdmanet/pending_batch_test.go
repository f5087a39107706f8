//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A WriteBatch that returns an earlier send's failure (pending, reaped
// before it) sent none of its messages, and says 0.
func TestPendingFailsWriteBatchSendingNone(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	const depth = 4 // every send signaled
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.SendDepth = rdmanet.BackendFirstSendFails, depth
	})
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(10*time.Second)))
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, depth)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: []byte{byte(i)}, Addr: ga}
	}
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err, "the batch filling the send queue")
	require.Equal(t, depth, n)
	// The queue is full: this write reaps the batch's completions (the
	// first failed) to free a slot, then posts.
	_, err = tx.WriteTo([]byte("reaps"), g)
	require.NoError(t, err, "the write that reaped the failure")
	posted := tx.SendsPosted()
	n, err = tx.WriteBatch(ms[:2])
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed, "the batch after the write that reaped a failure")
	require.Zero(t, n, "messages of the failing batch sent")
	require.Equal(t, posted, tx.SendsPosted(), "the failing batch posted nothing")
	n, err = tx.WriteBatch(ms[:2])
	require.NoError(t, err, "the pending failure is returned once")
	require.Equal(t, 2, n)
}
