//go:build linux

package rdmanet_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// A read polls up to 64 receive completions at once (the package doc's
// Performance): with a burst of 100 datagrams waiting, one poll takes
// 64, never more. Bursts are sent and read until a poll has taken 64,
// for 5 s at most.
func TestReadPollsUpTo64Completions(t *testing.T) {
	softOnly(t)
	t.Parallel()
	var most atomic.Int64 // the most receive completions one poll returned
	f := rdmanet.Faults{RecvWCs: func(wcs []verbs.WC) {
		for n := int64(len(wcs)); ; {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				return
			}
		}
	}}
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = faults(t, &f); lc.RecvDepth = 256 })
	tx := listen(t, g)
	require.NoError(t, rx.SetReadBuffer(4<<20))
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	const burst = 100
	ms := make([]rdmanet.Message, burst)
	for i := range ms {
		ms[i] = rdmanet.Message{Buffer: []byte(fmt.Sprint("p", i)), Addr: ga}
	}
	end := time.Now().Add(5 * time.Second)
	for round := 0; most.Load() < 64 && time.Now().Before(end); round++ {
		n, err := tx.WriteBatch(ms)
		require.NoError(t, err)
		require.Equal(t, burst, n, "round %d: the burst sent", round)
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		for i := 0; i < burst; i++ {
			mustRead(t, rx)
		}
	}
	require.Equal(t, int64(64), most.Load(), "the most receive completions one poll took, bursts of %d datagrams waiting", burst)
}
