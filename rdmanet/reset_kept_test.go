//go:build linux

package rdmanet_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// Completions the receive CQ still holds after a QP reset are from
// before it: the reset takes them all, however many batches of polls
// that is, counting each as a drop (DropQPReset), and none is delivered
// after it (their buffers are posted again).
func TestResetTakesEveryKeptCompletion(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend = rdmanet.BackendKeptCompletions
		lc.RecvDepth = 256
	})
	tx := listen(t, g)
	const sent = 150 // more than two polls of 64
	for i := range sent {
		_, err := tx.WriteTo([]byte{byte(i)}, g)
		require.NoError(t, err)
	}
	require.NoError(t, rdmanet.InjectQPError(rx))
	require.Eventually(t, func() bool { return rx.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the QP reset after QP_FATAL")
	kept, left := rdmanet.KeptCompletions(rx)
	require.Equal(t, sent, kept, "completions in the CQ at the reset: every datagram sent")
	require.Zero(t, left, "completions from before the reset not taken by it")
	require.Equal(t, uint64(kept), rx.Stats().Dropped[rdmanet.DropQPReset])

	_, err := tx.WriteTo([]byte("after"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, rx)
	require.Equal(t, "after", string(b), "the first datagram read after the reset")
}

// Completions the send CQ holds at a QP reset are those of the sends the
// reset discarded (a device flushes each with an error): the reset takes
// them all, however many batches of polls that is, and counts their
// failures, and none fails a write after it (reclaimSends: the QP error
// explains them). Here a WriteBatch of SendBuffer datagrams signals the
// last send of each post of 64, 128 posts, and nothing polls the send CQ
// between the batch and the reset; the test backend shows every
// completion of a send posted before the reset as flushed.
func TestResetTakesEveryFlushedSend(t *testing.T) {
	softOnly(t)
	t.Parallel()
	const posts = 128 // more than two polls of 64 completions
	var before, flushed atomic.Uint64
	f := rdmanet.Faults{SendWCs: func(wcs []verbs.WC) {
		for i := range wcs {
			if wcs[i].WRID < before.Load() {
				wcs[i].Status = verbs.WCWRFlushErr
				flushed.Add(1)
			}
		}
	}}
	g := newGroup()
	c := listen(t, g, sendOnly, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.SendDepth = faults(t, &f), posts*64
	})
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	ms := make([]rdmanet.Message, posts*64)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: sb.Bytes()[:8], Addr: ga}
	}
	n, err := c.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	before.Store(c.SendsPosted())

	require.NoError(t, rdmanet.InjectFaultEvent(c, verbs.Event{Type: verbs.EventQPError}))
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the QP reset after QP_FATAL")
	taken := flushed.Load()
	require.GreaterOrEqual(t, taken, uint64(posts), "flushed completions the reset took: one a post at least")
	require.Equal(t, taken, c.Stats().SendErrors, "the flushed sends counted")

	_, err = c.WriteTo([]byte("after"), g)
	require.NoError(t, err, "the write after the reset")
	require.NoError(t, c.WaitSends(c.SendsPosted()), "waiting for the write after the reset")
	require.Equal(t, taken, flushed.Load(), "flushed completions left in the CQ by the reset")
	require.Equal(t, taken, c.Stats().SendErrors)
}
