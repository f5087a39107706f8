//go:build linux

package rdmacore

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/infiniband/sysfs"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// fabricRoot is ipoib's fake sysfs: mlx5_0 an InfiniBand HCA with ib0
// (IPoIB, datagram, MTU 2044), mlx5_1 a RoCE NIC on eth2, rxe0 on veth0
// (MTU 1500) as the rxe VM shows it, siw0 an iWARP device.
const fabricRoot = "../../../ipoib/testdata/fabric"

func useFabric(t *testing.T) {
	old, oldDiscover := sysfsRoot, discover
	sysfsRoot = fabricRoot
	discover = func(root string) (*sysfs.System, error) {
		s, err := sysfs.Discover(root)
		if s != nil {
			s.InterfaceAddrs = func(netdev string) ([]netip.Addr, error) {
				if netdev == "ib0" {
					return []netip.Addr{netip.MustParseAddr("192.168.100.7")}, nil
				}
				return nil, nil
			}
		}
		return s, err
	}
	t.Cleanup(func() { sysfsRoot, discover = old, oldDiscover })
}

func TestBindingDetailsFromSysfs(t *testing.T) {
	useFabric(t)
	// rxe0: the RoCE v2 entry of the address, its netdev, and the MTU of
	// the netdev (1500 -> 1024) below what ibv_query_port said.
	b := verbs.Binding{Device: "rxe0", Port: 1, GID: infiniband.GIDFromNetIP(net.IPv4(10, 99, 0, 1)),
		IP: net.IPv4(10, 99, 0, 1), LinkLayer: infiniband.LinkLayerEthernet, MTU: 4096}
	bindingDetails(&b)
	assert.Equal(t, 1, b.GIDIndex)
	assert.Equal(t, infiniband.GIDTypeRoCEv2, b.GIDType)
	assert.Equal(t, "veth0", b.Netdev)
	assert.Equal(t, 1024, b.MTU)

	// mlx5_1: the v2 entry (3) wins over the v1 entry (2) of the same GID.
	b = verbs.Binding{Device: "mlx5_1", Port: 1, GID: infiniband.GIDFromNetIP(net.IPv4(192, 168, 10, 5)),
		IP: net.IPv4(192, 168, 10, 5), LinkLayer: infiniband.LinkLayerEthernet, MTU: 1024}
	bindingDetails(&b)
	assert.Equal(t, 3, b.GIDIndex)
	assert.Equal(t, infiniband.GIDTypeRoCEv2, b.GIDType)
	assert.Equal(t, "eth2", b.Netdev)
	assert.Equal(t, 1024, b.MTU)

	// InfiniBand: the port GID, type IB; the netdev is the IPoIB
	// interface with the address; the MTU is ibv_query_port's.
	gid, err := infiniband.ParseGID("fe80::2:c903:a1:b2c1")
	require.NoError(t, err)
	b = verbs.Binding{Device: "mlx5_0", Port: 1, GID: gid, IP: net.IPv4(192, 168, 100, 7),
		LinkLayer: infiniband.LinkLayerInfiniBand, MTU: 4096}
	bindingDetails(&b)
	assert.Equal(t, 0, b.GIDIndex)
	assert.Equal(t, infiniband.GIDTypeIB, b.GIDType)
	assert.Equal(t, "ib0", b.Netdev)
	assert.Equal(t, 4096, b.MTU)

	// A GID that is not in the table: RoCE v2 on Ethernet, no index.
	b = verbs.Binding{Device: "rxe0", Port: 1, GID: infiniband.GIDFromNetIP(net.IPv4(10, 99, 0, 9)),
		LinkLayer: infiniband.LinkLayerEthernet, MTU: 1024}
	bindingDetails(&b)
	assert.Equal(t, infiniband.GIDTypeRoCEv2, b.GIDType)
	assert.Zero(t, b.GIDIndex)
	assert.Empty(t, b.Netdev)
}

func TestRefinePort(t *testing.T) {
	sys, err := sysfs.Discover(fabricRoot)
	require.NoError(t, err)
	pa := refinePort(verbs.PortAttr{Port: 1, LinkLayer: infiniband.LinkLayerEthernet, ActiveMTU: 4096}, sys.Port("rxe0", 1))
	assert.Equal(t, "veth0", pa.Netdev)
	assert.Equal(t, 1024, pa.ActiveMTU, "the netdev's RoCE MTU is smaller")
	require.Len(t, pa.GIDs, 2, "zero GIDs are skipped")
	assert.Equal(t, infiniband.GIDEntry{Index: 1, GID: infiniband.GIDFromNetIP(net.IPv4(10, 99, 0, 1)), Type: infiniband.GIDTypeRoCEv2, Netdev: "veth0"}, pa.GIDs[1])

	pa = refinePort(verbs.PortAttr{Port: 1, LinkLayer: infiniband.LinkLayerEthernet, ActiveMTU: 1024}, sys.Port("mlx5_1", 1))
	require.Len(t, pa.GIDs, 4)
	assert.Equal(t, infiniband.GIDTypeRoCEv1, pa.GIDs[0].Type)
	assert.Equal(t, infiniband.GIDTypeRoCEv2, pa.GIDs[1].Type)
	assert.Equal(t, "eth2", pa.Netdev)

	// InfiniBand: ibv_query_port's MTU stands; the netdev is IPoIB's.
	pa = refinePort(verbs.PortAttr{Port: 1, LinkLayer: infiniband.LinkLayerInfiniBand, ActiveMTU: 4096}, sys.Port("mlx5_0", 1))
	assert.Equal(t, 4096, pa.ActiveMTU)
	assert.Equal(t, "ib0", pa.Netdev)
	require.Len(t, pa.GIDs, 1)
	assert.Equal(t, infiniband.GIDTypeIB, pa.GIDs[0].Type)

	// No sysfs: the verbs' answer as is.
	in := verbs.PortAttr{Port: 1, ActiveMTU: 1024}
	assert.Equal(t, in, refinePort(in, nil))

	assert.Equal(t, 1024, refineMTU(infiniband.LinkLayerEthernet, 0, 1024), "unknown active MTU")
	assert.Equal(t, 1024, refineMTU(infiniband.LinkLayerEthernet, 1024, 0), "unknown netdev MTU")
	assert.Equal(t, 2048, refineMTU(infiniband.LinkLayerInfiniBand, 2048, 1024), "IB: the verbs' MTU")
}
