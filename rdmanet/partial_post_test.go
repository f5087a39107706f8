//go:build linux

package rdmanet_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
