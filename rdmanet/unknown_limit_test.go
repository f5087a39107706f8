//go:build linux

package rdmanet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A QP the device refuses, on a device that reports no max_qp_wr, fails
// Listen with the device's error as it is: no depth is blamed on a limit
// nobody knows.
func TestCreateQPRefusedWithoutKnownLimit(t *testing.T) {
	t.Parallel()
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendUnknownLimit, RecvDepth: 100, SendDepth: 100}
	c, err := lc.ListenMulticast(t.Context(), "rdma", nil, newGroup())
	if c != nil {
		c.Close()
	}
	require.ErrorIs(t, err, rdmanet.ErrCreateQPRefused)
	require.NotContains(t, err.Error(), "over the device's limit")
}
