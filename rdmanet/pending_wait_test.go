//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A failed send completion reaped while a WriteTo waited for a free slot
// stays pending after that write succeeds, and the next WriteTo returns
// it (ErrEarlierSendFailed) and posts nothing, even though that write's
// own poll finds only successes.
func TestPendingFromAcquireFailsNextWriteTo(t *testing.T) {
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
	_, err = tx.WriteTo([]byte("next"), g)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed, "the write after the one that reaped a failure")
	require.Equal(t, posted, tx.SendsPosted(), "the failing write posted nothing")
	_, err = tx.WriteTo([]byte("after"), g)
	require.NoError(t, err, "the pending failure is returned once")
}

// A WriteTo whose own poll (the one before its post) finds a failed
// completion returns ErrEarlierSendFailed and posts nothing: its number
// is given back (SendsPosted as before) and Stats counts no datagram
// sent or copied for it. The next write takes that number.
func TestPendingFoundByWritesPollPostsNothing(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.SendDepth = rdmanet.BackendFirstSendFails, 4 // every send signaled
	})
	_, err := tx.WriteTo([]byte("first"), g)
	require.NoError(t, err, "the first write: its completion is not polled yet")
	posted, st := tx.SendsPosted(), tx.Stats()
	_, err = tx.WriteTo([]byte("second"), g)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed, "the write whose poll found the first send's failure")
	require.Equal(t, posted, tx.SendsPosted(), "the failing write posted nothing")
	after := tx.Stats()
	require.Equal(t, st.Sent, after.Sent, "Stats.Sent of the failing write")
	require.Equal(t, st.SentCopied, after.SentCopied, "Stats.SentCopied of the failing write")
	_, err = tx.WriteTo([]byte("third"), g)
	require.NoError(t, err, "the pending failure is returned once")
	require.Equal(t, posted+1, tx.SendsPosted(), "the next write's number")
	require.Equal(t, st.Sent+1, tx.Stats().Sent, "Stats.Sent after the next write")
}
