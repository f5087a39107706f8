//go:build linux

package rdmanet_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// The auto backend's reason for not taking rdma-core ("no active port
// that serves ...") names what the config asked for: device, port, then
// the address or else the interface; loopback when it asked for none.
func TestBindTargetNamesWhatWasAsked(t *testing.T) {
	lo := &net.Interface{Name: "lo"}
	for _, tc := range []struct {
		bc   verbs.BindConfig
		want string
	}{
		{verbs.BindConfig{}, "loopback"},
		{verbs.BindConfig{Port: 1}, "port 1"},
		{verbs.BindConfig{Device: "rxe0"}, `device "rxe0"`},
		{verbs.BindConfig{Device: "mlx5_0", Port: 2, Addr: net.ParseIP("10.0.0.1")}, `device "mlx5_0", port 2, address 10.0.0.1`},
		{verbs.BindConfig{Interface: lo}, "interface lo"},
		{verbs.BindConfig{Interface: lo, Addr: net.ParseIP("127.0.0.1")}, "address 127.0.0.1"},
	} {
		require.Equal(t, tc.want, rdmanet.BindTarget(tc.bc), "%+v", tc.bc)
	}
}
