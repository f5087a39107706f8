//go:build linux

package rdmanet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A failed send completion that put the QP in the error state, found by
// the poll a write makes first, fails that write with both: ErrQPError
// (the QP's state) and ErrEarlierSendFailed (the completion's error).
func TestFatalCompletionReportsBoth(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	tx := listen(t, g, func(lc *rdmanet.ListenConfig) {
		lc.Backend, lc.SendDepth = rdmanet.BackendFatalCompletions, 4 // every send signaled
	})
	ga, err := tx.GroupAddr(g)
	require.NoError(t, err)
	_, err = tx.WriteTo([]byte("fails later"), g)
	require.NoError(t, err, "the first write: its completion is not polled yet")
	_, err = tx.WriteBatch([]rdmanet.Message{{Buffer: []byte("next"), Addr: ga}})
	require.ErrorIs(t, err, rdmanet.ErrQPError)
	require.ErrorIs(t, err, rdmanet.ErrEarlierSendFailed)
}
