//go:build linux

package rdmanet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// Where rdma-core is built in but unavailable (no device, no library),
// the auto backend's fallback reason is rdma-core's own: "rdma-core was
// unavailable: " and what its Available said.
func TestAutoFallbackNamesUnavailability(t *testing.T) {
	t.Parallel()
	rc, err := verbs.Lookup(rdmanet.BackendRDMACore)
	if err != nil {
		t.Skip("rdma-core is not built in")
	}
	why := rc.Available()
	if why == nil {
		t.Skip("rdma-core is available here")
	}
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendAuto, Device: "mlx5_nonesuch"}
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, newGroup())
	if c != nil {
		c.Close()
	}
	require.ErrorContains(t, err, "(rdma-core was unavailable: "+why.Error()+")")
}
