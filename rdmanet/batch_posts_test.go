//go:build linux

package rdmanet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// WriteBatch posts up to 64 messages at once: 64 are one post, 130 are
// three (64, 64, 2); each arrives.
func TestWriteBatchPostsBy64(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("the post count comes from a wrapped software QP")
	}
	g := newGroup()
	rx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.RecvDepth = 256 })
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendCountingPosts })
	require.NoError(t, rx.SetReadBuffer(4<<20))
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	for _, tc := range []struct {
		n     int
		posts []int
	}{{64, []int{64}}, {130, []int{64, 64, 2}}} {
		rdmanet.SendPosts(tx)
		ms := make([]rdmanet.Message, tc.n)
		for i := range ms {
			ms[i] = rdmanet.Message{Buffer: []byte(fmt.Sprint("b", tc.n, "-", i)), Addr: ga}
		}
		n, err := tx.WriteBatch(ms)
		require.NoError(t, err)
		require.Equal(t, tc.n, n)
		require.Equal(t, tc.posts, rdmanet.SendPosts(tx), "the posts of a batch of %d", tc.n)
		for i := range ms {
			b, _ := mustRead(t, rx)
			require.Equal(t, string(ms[i].Buffer), string(b), "batch of %d, message %d", tc.n, i)
		}
	}
}
