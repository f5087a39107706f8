//go:build linux

package soft_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Devices lists one device per netdev (IPoIB ones left out), each named:
// no entry more than the namespace's netdevs, none empty.
func TestDevicesOnePerNetdev(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	devs, err := p.Devices()
	require.NoError(t, err)
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.NotEmpty(t, devs, "lo at least")
	require.LessOrEqual(t, len(devs), len(ifs))
	for i, d := range devs {
		require.NotEmpty(t, d.Name, "device %d of %d: %+v", i, len(devs), d)
	}
}
