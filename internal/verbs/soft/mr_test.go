//go:build linux

package soft_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// RegisterMemory refuses an arena with no memory (none, the zero Arena,
// one already freed), as rdma-core's does, and registers the smallest one
// NewArena makes (a page).
func TestRegisterMemoryRefusesEmptyArena(t *testing.T) {
	a := newEndpoint(t, verbs.QPConfig{})
	freed, err := verbs.NewArena(1)
	require.NoError(t, err)
	require.NoError(t, freed.Free())
	for _, c := range []struct {
		name  string
		arena *verbs.Arena
	}{{"nil", nil}, {"zero", &verbs.Arena{}}, {"freed", freed}} {
		m, err := a.qp.RegisterMemory(c.arena)
		require.Error(t, err, "%s arena registered, want it refused", c.name)
		require.Nil(t, m, "%s arena: got an MR with the error", c.name)
	}
	small, err := verbs.NewArena(1)
	require.NoError(t, err)
	t.Cleanup(func() { small.Free() })
	m, err := a.qp.RegisterMemory(small)
	require.NoError(t, err, "a %d-byte arena", small.Len())
	require.NoError(t, m.Close())
}
