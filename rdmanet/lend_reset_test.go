//go:build linux

package rdmanet_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Buffers lent by ReadLend across a QP reset stay the caller's: the
// reset posts every other slot of the ring again, not the lent ones, so
// twice the ring's depth of datagrams after it leaves every lent
// Payload as it was. The lent slots are spread over the ring's words of
// lent bits (each datagram i of a fresh ring landing in slot i): slots 0
// to 255 of a 256-deep ring, with slots past 63 among them. A 65-deep
// ring lends slots 0 to 63 and keeps slot 64 posted: the reset's scan of
// the lent bits reaches its bit, alone in the ring's second word.
func TestLentBuffersKeptAcrossReset(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	for _, tc := range []struct {
		depth, lend int // the ring's depth; datagrams lent before the reset
		keep        []int
	}{
		{256, 256, []int{1, 63, 64, 65, 127, 128, 129, 191, 200, 255}},
		{65, 64, []int{1, 62, 63}},
	} {
		t.Run(fmt.Sprint("RecvDepth ", tc.depth), func(t *testing.T) {
			t.Parallel()
			g := newGroup()
			rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
				lc.Backend = rdmanet.BackendCountingAHs
				lc.RecvDepth = tc.depth
			})
			tx := listen(t, g)
			held := map[int]rdmanet.Datagram{}
			for i := range tc.lend {
				d := lendOne(t, rx, tx, g, fmt.Sprint("lent ", i))
				require.Equal(t, fmt.Sprint("lent ", i), string(d.Payload))
				if slices.Contains(tc.keep, i) {
					held[i] = d
				} else {
					d.Release()
				}
			}

			require.NoError(t, rdmanet.InjectQPError(rx))
			require.Eventually(t, func() bool { return rx.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
				"waiting for the QP reset after QP_FATAL")

			for i := range 2 * tc.depth {
				d := lendOne(t, rx, tx, g, fmt.Sprint("after ", i))
				require.Equal(t, fmt.Sprint("after ", i), string(d.Payload))
				d.Release()
			}
			for i, d := range held {
				require.Equal(t, fmt.Sprint("lent ", i), string(d.Payload), "datagram %d, lent across the reset, was overwritten", i)
				d.Release()
			}
			require.Zero(t, rx.Stats().Dropped["overflow"], "stats %+v", rx.Stats())
		})
	}
}
