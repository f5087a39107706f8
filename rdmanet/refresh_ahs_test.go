//go:build linux

package rdmanet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A QP reset makes every group's address handle anew and destroys the
// old one: as many AHs are open after the reset as before, and the
// group's was made again.
func TestResetReplacesGroupAHs(t *testing.T) {
	t.Parallel()
	if testDevice != "" {
		t.Skip("a wrapped software QP")
	}
	g := newGroup()
	c := listen(t, g, func(lc *rdmanet.ListenConfig) { lc.Backend = rdmanet.BackendCountingAHs })
	made, open := rdmanet.AHCounts(c)
	require.Positive(t, open, "the group's AH is open")

	require.NoError(t, rdmanet.InjectQPError(c))
	require.Eventually(t, func() bool { return c.Stats().Recoveries == 1 }, 5*time.Second, time.Millisecond,
		"waiting for the QP reset after QP_FATAL")
	made2, open2 := rdmanet.AHCounts(c)
	require.Equal(t, made+open, made2, "every open AH was made again")
	require.Equal(t, open, open2, "AHs open after the reset: each old one destroyed")

	_, err := c.WriteTo([]byte("after the reset"), g)
	require.NoError(t, err, "a write through the new group AH")
}
