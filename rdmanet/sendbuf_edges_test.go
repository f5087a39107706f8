//go:build linux

package rdmanet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A datagram that ends exactly at a SendBuffer's end is sent from the
// buffer's registered memory, like any other inside it.
func TestSendBufferDatagramAtItsEnd(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	sb, err := tx.NewSendBuffer(4096)
	require.NoError(t, err)
	buf := sb.Bytes()
	for _, n := range []int{1, 100, tx.MTU()} {
		p := buf[len(buf)-n:]
		for i := range p {
			p[i] = byte(n + i)
		}
		before := tx.Stats().SentRegistered
		_, err := tx.WriteTo(p, g)
		require.NoError(t, err, "the last %d bytes of the SendBuffer", n)
		got, _ := mustRead(t, rx)
		require.Equal(t, p, got, "the last %d bytes", n)
		require.Equal(t, before+1, tx.Stats().SentRegistered, "the last %d bytes went from the registered memory", n)
	}
	require.NoError(t, sb.Free())
}

// A conn recognizes the last MaxFreedSpans SendBuffers freed (64, as
// SendBuffer.Free's doc says), and forgets the oldest beyond that: the
// list stays bounded however many are freed. (All are made first: a new buffer mapped where a freed one
// was takes its span off the list.)
func TestFreedSendBuffersBounded(t *testing.T) {
	t.Parallel()
	require.Equal(t, 64, rdmanet.MaxFreedSpans, "the bound SendBuffer.Free's doc gives")
	if testDevice != "" {
		// rdma-core: a QP holds at most 16 memory regions, fewer than
		// the MaxFreedSpans+5 buffers alive at once here; the list's
		// bound is the conn's, the same on both backends.
		t.Skip("needs MaxFreedSpans+5 SendBuffers at once: rdma-core allows 16 a QP")
	}
	tx := listen(t, newGroup())
	sbs := make([]*rdmanet.SendBuffer, rdmanet.MaxFreedSpans+5)
	for i := range sbs {
		var err error
		sbs[i], err = tx.NewSendBuffer(4096)
		require.NoError(t, err)
	}
	for i, sb := range sbs {
		require.NoError(t, sb.Free())
		require.Equal(t, min(i+1, rdmanet.MaxFreedSpans), rdmanet.FreedSpans(tx), "after freeing %d", i+1)
	}
}
