//go:build linux

package rdmanet_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Where the QP has no sockets (rdma-core; here the software QP made to
// say so), the buffers are the rings: ReadBuffer is RecvDepth slots of
// MTU+40 rounded up to 64, WriteBuffer SendDepth slots of MTU rounded up
// to 64. A size the ring holds succeeds and changes nothing; one byte
// more fails with errors.ErrUnsupported, naming the depth that would hold
// it; the datapath is unchanged.
func TestRingBuffersWithoutSockets(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	const recvDepth, sendDepth = 48, 40
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.RecvDepth, lc.SendDepth = rdmanet.BackendNoSockets, recvDepth, sendDepth
	})
	mtu := c.MTU()
	rslot, wslot := (40+mtu+63)&^63, (mtu+63)&^63
	r, w := c.ReadBuffer(), c.WriteBuffer()
	require.Equal(t, recvDepth*rslot, r, "ReadBuffer at MTU %d", mtu)
	require.Equal(t, sendDepth*wslot, w, "WriteBuffer at MTU %d", mtu)

	for _, n := range []int{0, 1, rslot, r - 1, r} {
		require.NoError(t, c.SetReadBuffer(n), "SetReadBuffer(%d), the ring holds %d", n, r)
	}
	for _, n := range []int{0, w} {
		require.NoError(t, c.SetWriteBuffer(n), "SetWriteBuffer(%d), the ring holds %d", n, w)
	}
	var op *net.OpError
	err := c.SetReadBuffer(r + 1)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorAs(t, err, &op)
	require.ErrorContains(t, err, fmt.Sprintf("ListenConfig.RecvDepth = %d", recvDepth+1))
	err = c.SetReadBuffer(r + rslot + 1)
	require.ErrorContains(t, err, fmt.Sprintf("ListenConfig.RecvDepth = %d", recvDepth+2))
	err = c.SetWriteBuffer(w + 1)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorContains(t, err, fmt.Sprintf("ListenConfig.SendDepth = %d", sendDepth+1))
	require.Error(t, c.SetReadBuffer(-1), "a negative size")
	require.Equal(t, r, c.ReadBuffer(), "ReadBuffer after the calls")
	require.Equal(t, w, c.WriteBuffer(), "WriteBuffer after the calls")

	tx := listen(t, g)
	_, err = tx.WriteTo([]byte("through the rings"), g)
	require.NoError(t, err)
	b, _ := mustRead(t, c)
	require.Equal(t, "through the rings", string(b))
}
