//go:build linux

package rdmanet_test

import (
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A batch of SendBuffer sends posted part way leaves its posted sends
// unsignaled, so the next post must signal its last one. A next batch
// whose first message is refused before anything is staged posts
// nothing, and must not try to signal a request it does not have.
func TestPartialPostThenEmptyBatch(t *testing.T) {
	t.Parallel()
	tx, g, ga, sb := partialPost(t)
	buf := sb.Bytes()
	require.ErrorContains(t, tx.WaitSends(1), "not signaled", "the posted send is unsignaled")

	big := make([]byte, tx.MTU()+1)
	n, err := tx.WriteBatch([]rdmanet.Message{{Buffer: big, Addr: ga}})
	require.Error(t, err, "a datagram above the MTU")
	require.Equal(t, 0, n, "sends posted of a batch refused at its first message")

	// The next write signals the unsignaled send, and the wait ends.
	_, err = tx.WriteTo(buf[20:30], g)
	require.NoError(t, err)
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, tx.WaitSends(tx.SendsPosted()), "waiting for the sends after the signaled write")
	require.NoError(t, sb.Free())
}

// A batch that posted one SendBuffer send before it failed leaves that
// send unsignaled; the next write signals its own send even when that
// write's memory is not a SendBuffer's, so waiting for every send
// posted ends without a WaitSends having asked for the signal first.
func TestPartialPostOneBufferSendSignaledByNextWrite(t *testing.T) {
	t.Parallel()
	tx, g, _, sb := partialPost(t)

	// Not a SendBuffer's memory: signaled only because the partial
	// post left a SendBuffer send unsignaled.
	_, err := tx.WriteTo(make([]byte, 10), g)
	require.NoError(t, err)
	require.Equal(t, uint64(2), tx.SendsPosted())
	require.NoError(t, tx.SetWriteDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, tx.WaitSends(tx.SendsPosted()), "the write after the partial post signaled its send")
	require.Equal(t, uint64(2), tx.SendsDone())
	require.NoError(t, sb.Free())
}

// partialPost listens on the backend whose QP posts batches part way
// and writes a batch of two SendBuffer sends to the group, of which one
// is posted: it returns the conn, the group, its address and the
// buffer.
func partialPost(t *testing.T) (*rdmanet.Conn, *net.UDPAddr, rdmanet.Addr, *rdmanet.SendBuffer) {
	t.Helper()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.SendDepth = rdmanet.BackendPartialPosts, 64 // signal every 16th
	})
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	sb, err := tx.NewSendBuffer(4096)
	require.NoError(t, err)
	buf := sb.Bytes()
	n, err := tx.WriteBatch([]rdmanet.Message{
		{Buffer: buf[:10], Addr: ga},
		{Buffer: buf[10:20], Addr: ga},
	})
	require.ErrorIs(t, err, syscall.ENOBUFS, "the batch posted part way")
	require.Equal(t, 1, n, "sends posted of the partial batch")
	return tx, g, ga, sb
}

// signalRecorder is a FaultBackend's PostSend hook that records whether
// each send posted is signaled, by WRID, and posts only the first of
// the next batch whose refusal is asked for, failing the rest with
// ENOBUFS (the first is taken, as a kernel that took part of a batch
// would, but not handed to the provider: nothing waits for it).
type signalRecorder struct {
	mu       sync.Mutex
	signaled map[uint64]bool
	partial  bool
}

func (r *signalRecorder) post(wrs []verbs.SendWR) (bool, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	posted := wrs
	if r.partial && len(wrs) > 1 {
		posted = wrs[:1]
	}
	for _, wr := range posted {
		r.signaled[wr.WRID] = wr.Flags&verbs.SendSignaled != 0
	}
	if len(posted) < len(wrs) {
		r.partial = false
		return true, 1, syscall.ENOBUFS
	}
	return false, 0, nil
}

// postPartWay writes a batch of a and b to ga on c with the next batch
// refused after its first send: WriteBatch posts a alone and fails with
// ENOBUFS.
func (r *signalRecorder) postPartWay(t *testing.T, c *rdmanet.Conn, ga rdmanet.Addr, a, b []byte) {
	t.Helper()
	r.refuseNextBatch()
	n, err := c.WriteBatch([]rdmanet.Message{{Buffer: a, Addr: ga}, {Buffer: b, Addr: ga}})
	require.ErrorIs(t, err, syscall.ENOBUFS, "the batch posted part way")
	require.Equal(t, 1, n, "sends posted of the partial batch")
}

func (r *signalRecorder) refuseNextBatch() {
	r.mu.Lock()
	r.partial = true
	r.mu.Unlock()
}

func (r *signalRecorder) wasSignaled(t *testing.T, wrid uint64) bool {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.signaled[wrid]
	require.True(t, ok, "send %d posted", wrid)
	return s
}

// signalListen listens on a FaultBackend recording the sends' signals,
// SendDepth 64 (every 16th send, 15, 31, ..., signaled).
func signalListen(t *testing.T) (*rdmanet.Conn, *net.UDPAddr, rdmanet.Addr, *signalRecorder) {
	t.Helper()
	softOnly(t)
	r := &signalRecorder{signaled: map[uint64]bool{}}
	f := rdmanet.Faults{PostSend: r.post}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.SendDepth = 64 })
	ga, err := c.GroupAddr(g)
	require.NoError(t, err)
	return c, g, ga, r
}

// A batch of plain memory posted part way leaves no SendBuffer send
// unsignaled: nothing waits for its completions (SendsDone counts them
// at once), so the next write is signaled only in its turn, not out of
// it (each signal is a completion the conn must poll).
func TestPartialPostOfPlainMemorySignalsNothingMore(t *testing.T) {
	t.Parallel()
	c, g, ga, r := signalListen(t)
	r.postPartWay(t, c, ga, []byte("a"), []byte("b"))
	require.False(t, r.wasSignaled(t, 0), "send 0, posted part way, got signaled, want unsignaled")

	_, err := c.WriteTo([]byte("c"), g)
	require.NoError(t, err)
	require.False(t, r.wasSignaled(t, 1), "send 1 after a partial post of plain memory: got signaled, want unsignaled")
	require.Equal(t, c.SendsPosted(), c.SendsDone(), "plain sends are done once posted")
}

// A batch posted part way whose last posted send is signaled in its turn
// (send 15 of a ring signaling every 16th) leaves nothing unsignaled,
// SendBuffer send though it is: the next write is not signaled again.
func TestPartialPostEndingSignaledSignalsNothingMore(t *testing.T) {
	t.Parallel()
	c, g, ga, r := signalListen(t)
	buf := sendBufferAfter15(t, c, g)
	r.postPartWay(t, c, ga, buf[:10], buf[10:20])
	require.True(t, r.wasSignaled(t, 15), "send 15, signaled in its turn: got unsignaled, want signaled")

	_, err := c.WriteTo([]byte("next"), g)
	require.NoError(t, err)
	require.False(t, r.wasSignaled(t, 16), "send 16 after a partial post ending signaled: got signaled, want unsignaled")
}

// WaitSends refuses only what no signaled send covers: after send 15
// (signaled in its turn) and send 16 (a SendBuffer's, unsignaled), each
// posted by a batch that failed part way and neither completed yet,
// waiting for 17 sends fails at once as not signaled, while waiting for
// 16 waits for send 15's completion (here, to the past write deadline).
func TestWaitSendsUpToTheLastSignaledSendWaits(t *testing.T) {
	t.Parallel()
	c, g, ga, r := signalListen(t)
	buf := sendBufferAfter15(t, c, g)
	for _, wrid := range []uint64{15, 16} {
		r.postPartWay(t, c, ga, buf[:10], buf[10:20])
		require.Equal(t, wrid == 15, r.wasSignaled(t, wrid), "send %d signaled", wrid)
	}
	require.Equal(t, uint64(17), c.SendsPosted())

	require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
	err := c.WaitSends(16)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "WaitSends(16), send 15 signaled and not completed")
	require.NotContains(t, err.Error(), "not signaled")
	err = c.WaitSends(17)
	require.ErrorContains(t, err, "the sends waited for are not signaled yet", "WaitSends(17), send 16 unsignaled")
}

// sendBufferAfter15 writes sends 0-14 on c (plain memory; send 15 is the
// next, signaled in its turn on a ring signaling every 16th) and returns
// the bytes of a new SendBuffer.
func sendBufferAfter15(t *testing.T, c *rdmanet.Conn, g net.Addr) []byte {
	t.Helper()
	for i := range 15 {
		_, err := c.WriteTo([]byte{byte(i)}, g)
		require.NoError(t, err)
	}
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	return sb.Bytes()
}

// The signal a partial post asks for (a SendBuffer send left
// unsignaled) is one signal: the next post, signaled for it, covers the
// unsignaled send, and the writes after it are signaled only in their
// turn again (sends 15, 31, ... of a ring signaling every 16th), not
// each one (each signal is a completion the conn must poll, which
// selective signaling exists to avoid).
func TestPartialPostSignalsTheNextPostOnly(t *testing.T) {
	t.Parallel()
	c, g, ga, r := signalListen(t)
	sb, err := c.NewSendBuffer(4096)
	require.NoError(t, err)
	buf := sb.Bytes()
	r.postPartWay(t, c, ga, buf[:10], buf[10:20])
	require.False(t, r.wasSignaled(t, 0), "send 0, posted part way, got signaled, want unsignaled")

	_, err = c.WriteTo([]byte("next"), g)
	require.NoError(t, err)
	require.True(t, r.wasSignaled(t, 1), "send 1, the next post after the partial one: got unsignaled, want signaled")
	for i := uint64(2); i < 15; i++ {
		_, err = c.WriteTo([]byte("later"), g)
		require.NoError(t, err)
		require.False(t, r.wasSignaled(t, i), "send %d, neither the next post nor in its turn: got signaled, want unsignaled", i)
	}
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, c.WaitSends(1), "send 0 covered by send 1's signal")
	require.NoError(t, sb.Free())
}
