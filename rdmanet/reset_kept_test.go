//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
