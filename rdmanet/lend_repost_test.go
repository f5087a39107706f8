//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Buffers given back by Release are posted to the receive queue again by
// Release itself (a batch) or, at the latest, by the next read: whatever
// was released, a read leaves at most one repost batch (32) of buffers
// that are neither lent nor posted. On rdma-core a buffer not posted is a
// datagram dropped under a burst; on the software backend it is invisible
// (datagrams wait in the socket buffer), so the test asks the QP how many
// receives it holds (BackendCountingRecvs).
//
// 31 buffers are lent and released: fewer than a batch, so Release does
// not post them, and with the ring 64 deep not so many that it runs low.
func TestReleasedBuffersRepostedByNextRead(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the receive count comes from a wrapped software QP")
	}
	const depth, lent, reads = 64, 31, 20
	const batch = 32 // rdmanet's repostBatch
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.RecvDepth = rdmanet.BackendCountingRecvs, depth
	})
	tx := listen(t, g)
	require.Equal(t, depth, rdmanet.PostedRecvs(rx), "every receive posted at Listen")
	unposted := func(held int) int { return depth - held - rdmanet.PostedRecvs(rx) }

	// One datagram at a time, read before the next is sent: every
	// completion polled is one read, so the QP's count is exact.
	send := func(i int) {
		t.Helper()
		_, err := tx.WriteTo([]byte(fmt.Sprint("m", i)), g)
		require.NoError(t, err)
	}
	ds := make([]rdmanet.Datagram, lent)
	for i := range ds {
		send(i)
		require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
		d, err := rx.ReadLend()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("m", i), string(d.Payload))
		ds[i] = d
		require.LessOrEqual(t, unposted(i+1), batch, "after lending %d", i+1)
	}
	for i := range ds {
		ds[i].Release()
	}
	require.LessOrEqual(t, unposted(0), batch, "after releasing %d", lent)
	for i := 0; i < reads; i++ {
		send(lent + i)
		b, _ := mustRead(t, rx)
		require.Equal(t, fmt.Sprint("m", lent+i), string(b))
		require.LessOrEqual(t, unposted(0), batch,
			"receives neither lent nor posted after read %d following %d releases (posted %d of %d)", i+1, lent, rdmanet.PostedRecvs(rx), depth)
	}
}
