//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Copying reads repost consumed buffers in batches of a quarter of the
// ring, at least 1 and at most 32: however many reads, at most batch-1
// buffers wait unposted, and that many do wait (the reads batch).
func TestCopyReadsRepostByQuarterRing(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the receive count comes from a wrapped software QP")
	}
	for _, tc := range []struct{ depth, batch int }{{4, 1}, {64, 16}, {200, 32}} {
		t.Run(fmt.Sprint("RecvDepth=", tc.depth), func(t *testing.T) {
			g := newGroup()
			rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
				lc.Backend, lc.RecvDepth = rdmanet.BackendCountingRecvs, tc.depth
			})
			tx := listen(t, g)
			most := 0
			for i := range 3 * tc.batch {
				want := fmt.Sprint("r", i)
				_, err := tx.WriteTo([]byte(want), g)
				require.NoError(t, err)
				require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
				b, _ := mustRead(t, rx)
				require.Equal(t, want, string(b))
				most = max(most, tc.depth-rdmanet.PostedRecvs(rx))
			}
			require.Equal(t, tc.batch-1, most, "the most consumed buffers left unposted after a read, RecvDepth %d", tc.depth)
		})
	}
}

// With buffers lent, copying reads still wait for a batch (a quarter of
// the ring, 16 of 64) until the ring runs low: then a read posts what
// was consumed at once, but only when fewer than a batch would stay
// posted. So the fewest receives posted after a read is batch-1, never
// fewer (the ring low) and, when a read leaves exactly a batch posted,
// not more (a post made before the ring is low is one crossing more).
func TestCopyReadsWithBuffersLentRepostWhenRingLow(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the receive count comes from a wrapped software QP")
	}
	const depth, batch = 64, 16
	for _, lent := range []int{40, depth - batch - 1} {
		t.Run(fmt.Sprint("lent=", lent), func(t *testing.T) {
			g := newGroup()
			rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
				lc.Backend, lc.RecvDepth = rdmanet.BackendCountingRecvs, depth
			})
			tx := listen(t, g)
			seq := 0
			// send writes one datagram; each is read before the next is
			// sent, so every poll takes one completion and the QP's
			// count is exact.
			send := func() string {
				t.Helper()
				want := fmt.Sprint("m", seq)
				seq++
				_, err := tx.WriteTo([]byte(want), g)
				require.NoError(t, err)
				require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
				return want
			}
			ds := make([]rdmanet.Datagram, lent)
			for i := range ds {
				want := send()
				d, err := rx.ReadLend()
				require.NoError(t, err)
				require.Equal(t, want, string(d.Payload))
				ds[i] = d
			}
			require.Equal(t, depth-lent, rdmanet.PostedRecvs(rx), "posted with %d lent", lent)
			fewest := depth
			for i := range 2 * batch {
				want := send()
				b, _ := mustRead(t, rx)
				require.Equal(t, want, string(b))
				fewest = min(fewest, rdmanet.PostedRecvs(rx))
				require.GreaterOrEqual(t, rdmanet.PostedRecvs(rx), batch-1, "posted after copying read %d with %d lent", i+1, lent)
			}
			require.Equal(t, batch-1, fewest, "the fewest receives posted after a copying read, %d lent", lent)
			for i := range ds {
				ds[i].Release()
			}
		})
	}
}
