//go:build linux

package rdmanet_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A SendBuffer datagram within the QP's inline limit (the software QP's is
// 4096, at least the MTU) is posted inline, the provider copying it at the
// post, from the shortest to an MTU; with SetSendBufferInline off, by its
// SGE alone.
func TestSendBufferPostedInlineWithinTheLimit(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var mu sync.Mutex
	var inline []bool
	f := rdmanet.Faults{PostSend: func(wrs []verbs.SendWR) (bool, int, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, wr := range wrs {
			inline = append(inline, wr.Flags&verbs.SendInline != 0)
		}
		return false, 0, nil
	}}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f) })
	sb, err := c.NewSendBuffer(c.MTU()) // freed by Close
	require.NoError(t, err)
	b := sb.Bytes()
	posted := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), inline...)
	}
	for _, n := range []int{1, c.MTU()} {
		_, err := c.WriteTo(b[:n], g)
		require.NoError(t, err)
		got, _ := mustRead(t, c)
		require.Len(t, got, n)
	}
	require.Equal(t, []bool{true, true}, posted(), "1 B and an MTU (%d B) posted inline", c.MTU())
	rdmanet.SetSendBufferInline(c, false)
	_, err = c.WriteTo(b[:1], g)
	require.NoError(t, err)
	mustRead(t, c)
	require.Equal(t, []bool{true, true, false}, posted(), "inline off: by the SGE")
}
