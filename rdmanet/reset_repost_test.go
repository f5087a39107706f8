//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A QP reset posts the whole receive ring again (but the slots lent or
// holding a completion not yet read), so the buffers released before it
// and not yet reposted are posted by the reset and must not be posted a
// second time after it: a buffer posted twice is one that two datagrams
// can fill, the second overwriting the first before it is read.
// BackendCountingRecvs counts the receives posted with the WRID (the
// slot) of one the QP holds already. Buffers are lent and released
// before the reset, fewer than a repost batch (32), so that Release
// leaves them in the list of returned buffers, which the next read (or
// the reset) takes.
func TestResetPostsEachReceiveOnce(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the receive count comes from a wrapped software QP")
	}
	const depth = 64
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.RecvDepth = rdmanet.BackendCountingRecvs, depth
	})
	tx := listen(t, g)
	require.Equal(t, depth, rdmanet.PostedRecvs(rx), "every receive posted at Listen")

	for i := range 5 {
		d := lendOne(t, rx, tx, g, fmt.Sprint("before ", i))
		require.Equal(t, fmt.Sprint("before ", i), string(d.Payload))
		d.Release()
	}
	require.Zero(t, rdmanet.RepostedWhilePosted(rx), "before the reset")

	require.NoError(t, rdmanet.InjectQPError(rx))
	require.Eventually(t, func() bool { return rx.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the QP reset after QP_FATAL")
	require.Equal(t, depth, rdmanet.PostedRecvs(rx), "the reset posts the ring again")

	// One datagram at a time, read before the next is sent: each slot's
	// repost comes after its completion.
	for i := range 2 * depth {
		_, err := tx.WriteTo([]byte(fmt.Sprint("after ", i)), g)
		require.NoError(t, err)
		b, _ := mustRead(t, rx)
		require.Equal(t, fmt.Sprint("after ", i), string(b))
		require.Zero(t, rdmanet.RepostedWhilePosted(rx), "receives posted twice after read %d following the reset", i+1)
		require.LessOrEqual(t, rdmanet.PostedRecvs(rx), depth, "after read %d", i+1)
	}
	require.Zero(t, rx.Stats().Dropped["overflow"], "stats %+v", rx.Stats())
}
