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
