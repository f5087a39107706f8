//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/stretchr/testify/require"
)

// Release posts given-back buffers in batches: fewer than a batch (32)
// wait for the next read while the ring is not low, a full batch is
// posted by the Release that completes it, and once so much is lent that
// the ring runs low (RecvDepth-32 lent or more) each Release posts at
// once. The count of lent buffers behind that choice goes back to zero
// when all are released: a second round behaves as the first.
func TestReleaseBatchesReposts(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the receive count comes from a wrapped software QP")
	}
	const depth, batch = 64, 32
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.RecvDepth = rdmanet.BackendCountingRecvs, depth
	})
	tx := listen(t, g)
	unposted := func(held int) int { return depth - held - rdmanet.PostedRecvs(rx) }
	seq := 0
	// lend reads k datagrams one at a time (each sent after the last was
	// read, so the QP's count is exact) and keeps them lent.
	lend := func(k int) []rdmanet.Datagram {
		t.Helper()
		ds := make([]rdmanet.Datagram, k)
		for i := range ds {
			want := fmt.Sprint("m", seq)
			seq++
			_, err := tx.WriteTo([]byte(want), g)
			require.NoError(t, err)
			require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
			d, err := rx.ReadLend()
			require.NoError(t, err)
			require.Equal(t, want, string(d.Payload))
			ds[i] = d
		}
		return ds
	}
	// flush is one copying read: it posts what Release left unposted.
	flush := func() {
		t.Helper()
		want := fmt.Sprint("m", seq)
		seq++
		_, err := tx.WriteTo([]byte(want), g)
		require.NoError(t, err)
		b, _ := mustRead(t, rx)
		require.Equal(t, want, string(b))
	}

	// A copying read leaves its own buffer to the next repost batch
	// (RecvDepth/4 buffers): base, counted before each step, is those.
	for round := 1; round <= 2; round++ {
		base := unposted(0)
		ds := lend(batch - 1)
		for i := range ds {
			ds[i].Release()
		}
		require.Equal(t, batch-1, unposted(0)-base, "round %d: %d released, fewer than a batch: Release posts none", round, batch-1)
		flush()
		require.LessOrEqual(t, unposted(0), 1, "round %d: the read after the releases posts them (its own buffer may wait)", round)

		base = unposted(0)
		ds = lend(batch)
		for i := range ds[:batch-1] {
			ds[i].Release()
		}
		require.Equal(t, batch-1, unposted(1)-base, "round %d: %d of %d released", round, batch-1, batch)
		ds[batch-1].Release()
		require.Equal(t, base, unposted(0), "round %d: the Release that completes a batch posts it", round)

		ds = lend(depth - batch + 8)
		ds[0].Release()
		require.Equal(t, base, unposted(len(ds)-1), "round %d: with %d lent (the ring low) a Release posts at once", round, len(ds))
		for i := range ds[1:] {
			ds[1+i].Release()
		}
		require.Equal(t, base, unposted(0), "round %d: all released: the low ring's posts, then a full batch", round)
		flush()
	}
}

// ReadBatch returns the datagrams that are there, without waiting for
// more to fill the batch: with no deadline set, one datagram sent is one
// returned, at once.
func TestReadBatchReturnsWhatIsThere(t *testing.T) {
	t.Parallel()
	g := newGroup()
	rx := listen(t, g)
	tx := listen(t, g)
	in := make([]rdmanet.Message, 8)
	for i := range in {
		in[i].Buffer = make([]byte, 64)
	}
	type result struct {
		n   int
		err error
	}
	for round := range 3 {
		want := fmt.Sprint("lone", round)
		_, err := tx.WriteTo([]byte(want), g)
		require.NoError(t, err)
		res := make(chan result, 1)
		go func() {
			n, err := rx.ReadBatch(in)
			res <- result{n, err}
		}()
		select {
		case r := <-res:
			require.NoError(t, r.err)
			require.Equal(t, 1, r.n, "round %d", round)
			require.Equal(t, want, string(in[0].Buffer[:in[0].N]))
		case <-time.After(10 * time.Second):
			rx.Close() // ends the read
			t.Fatalf("round %d: ReadBatch of 8 with one datagram there did not return within 10 s (it waits for more)", round)
		}
	}
}
