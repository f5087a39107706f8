package ipoib

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/fabric is a fake sysfs shaped like real ones: mlx5_0 an
// InfiniBand HCA (port 1 active with ib0 and the child ib0.8001, port 2
// down), mlx5_1 a RoCE NIC on eth2, siw0 a Soft-iWARP device (no
// multicast), rxe0 Soft-RoCE on veth0 as measured in the rxe VM.
func fabric(t *testing.T) *System {
	t.Helper()
	s, err := Discover("testdata/fabric")
	require.NoError(t, err)
	return s
}

func TestDiscoverDevices(t *testing.T) {
	t.Parallel()
	s := fabric(t)
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"mlx5_0", "mlx5_1", "rxe0", "siw0"}, names)

	d := s.Device("mlx5_0")
	require.NotNil(t, d)
	assert.Equal(t, NodeCA, d.NodeType)
	assert.Equal(t, uint64(0x0002c90300a1b2c0), d.NodeGUID)
	assert.True(t, d.Multicast)
	require.Len(t, d.Ports, 2)

	p1 := d.Ports[0]
	assert.Equal(t, 1, p1.Port)
	assert.Equal(t, PortActive, p1.State)
	assert.Equal(t, "LinkUp", p1.PhysState)
	assert.Equal(t, LinkLayerInfiniBand, p1.LinkLayer)
	assert.Equal(t, 2048, p1.ActiveMTU, "IPoIB datagram MTU 2044 + 4 is the 2048 IB MTU")
	assert.Equal(t, "ib0", p1.MTUFrom)
	require.Len(t, p1.GIDs, 1, "zero GID entries are skipped")
	assert.Equal(t, GIDEntry{Index: 0, GID: mustGID(t, "fe80::2:c903:a1:b2c1"), Type: GIDTypeIB}, p1.GIDs[0])
	assert.Equal(t, []uint16{0xffff, 0x8001}, p1.PKeys)
	assert.Equal(t, []string{"ib0", "ib0.8001"}, p1.Netdevs)

	p2 := d.Ports[1]
	assert.Equal(t, PortDown, p2.State)
	assert.Equal(t, "Disabled", p2.PhysState)
	assert.Zero(t, p2.ActiveMTU, "a down port with no IPoIB interface has no MTU to derive")
	assert.Empty(t, p2.Netdevs)

	roce := s.Port("mlx5_1", 1)
	require.NotNil(t, roce)
	assert.Equal(t, LinkLayerEthernet, roce.LinkLayer)
	assert.Equal(t, 4096, roce.ActiveMTU, "iboe_get_mtu(9000)")
	want := []GIDEntry{
		{Index: 0, GID: mustGID(t, "fe80::9a03:9bff:fe12:3456"), Type: GIDTypeRoCEv1, Netdev: "eth2"},
		{Index: 1, GID: mustGID(t, "fe80::9a03:9bff:fe12:3456"), Type: GIDTypeRoCEv2, Netdev: "eth2"},
		{Index: 2, GID: mustGID(t, "::ffff:192.168.10.5"), Type: GIDTypeRoCEv1, Netdev: "eth2"},
		{Index: 3, GID: mustGID(t, "::ffff:192.168.10.5"), Type: GIDTypeRoCEv2, Netdev: "eth2"},
	}
	assert.Equal(t, want, roce.GIDs)

	siw := s.Device("siw0")
	require.NotNil(t, siw)
	assert.Equal(t, NodeRNIC, siw.NodeType)
	assert.False(t, siw.Multicast, "iWARP cannot multicast")
	require.Len(t, siw.Ports[0].GIDs, 1)
	assert.Equal(t, GIDTypeUnknown, siw.Ports[0].GIDs[0].Type)
}

// The rxe0 entry reproduces what the rxe VM measured: GID[1] =
// ::ffff:10.99.0.1 (RoCE v2), active_mtu 1024 with netdev MTU 1500.
func TestDiscoverRXEAsMeasured(t *testing.T) {
	t.Parallel()
	s := fabric(t)
	p := s.Port("rxe0", 1)
	require.NotNil(t, p)
	assert.Equal(t, PortActive, p.State)
	assert.Equal(t, LinkLayerEthernet, p.LinkLayer)
	assert.Equal(t, 1024, p.ActiveMTU)
	require.Len(t, p.GIDs, 2)
	assert.Equal(t, GIDEntry{Index: 1, GID: mustGID(t, "::ffff:10.99.0.1"), Type: GIDTypeRoCEv2, Netdev: "veth0"}, p.GIDs[1])
	assert.Equal(t, []string{"veth0"}, p.Netdevs)
}

func TestDiscoverNetdevs(t *testing.T) {
	t.Parallel()
	s := fabric(t)
	ib0 := s.Netdev("ib0")
	require.NotNil(t, ib0)
	assert.Equal(t, NetdevIPoIB, ib0.Kind)
	assert.Equal(t, 32, ib0.ARPHRD)
	assert.Equal(t, 4, ib0.Index)
	assert.Equal(t, 2044, ib0.MTU)
	assert.Equal(t, "mlx5_0", ib0.Device)
	assert.Equal(t, 1, ib0.Port)
	assert.Equal(t, uint16(0xffff), ib0.PKey)
	assert.Equal(t, "datagram", ib0.Mode)
	assert.Equal(t, uint32(0x48), ib0.LinkAddr.QPN())
	assert.True(t, ib0.LinkAddr.Connected())
	bc, err := BroadcastAddr(DefaultPKey, DefaultScope)
	require.NoError(t, err)
	assert.Equal(t, bc, ib0.Broadcast)

	child := s.Netdev("ib0.8001")
	require.NotNil(t, child)
	assert.Equal(t, uint16(0x8001), child.PKey)
	assert.Equal(t, "ib0", child.Parent)
	assert.Equal(t, "mlx5_0", child.Device)
	// The child's MGIDs come from its broadcast address, as the kernel's.
	m, err := IPoIBMGID(netip.MustParseAddr("239.1.2.3"), child.Broadcast.MGID().PKey(), child.Broadcast.MGID().Scope())
	require.NoError(t, err)
	assert.Equal(t, "ff12:401b:8001::f01:203", m.String())

	eth2 := s.Netdev("eth2")
	require.NotNil(t, eth2)
	assert.Equal(t, NetdevEthernet, eth2.Kind)
	assert.Equal(t, "mlx5_1", eth2.Device)
	assert.Equal(t, 1, eth2.Port)
	assert.Zero(t, eth2.PKey)

	lo := s.Netdev("lo")
	require.NotNil(t, lo)
	assert.Equal(t, NetdevLoopback, lo.Kind)
	assert.Empty(t, lo.Device)

	assert.Empty(t, s.Netdev("eth3").Device, "siw0 has no GID netdev attribute and eth3 no device/infiniband")
	assert.Nil(t, s.Netdev("nope"))
	assert.Nil(t, s.Netdev("bonding_masters"), "a plain file in /sys/class/net is not an interface")
	assert.Len(t, s.Netdevs, 6)
	assert.Nil(t, s.Port("mlx5_0", 3))
	assert.Nil(t, s.Port("nope", 1))
}

func TestInterfaceFor(t *testing.T) {
	t.Parallel()
	s := fabric(t)
	b, err := s.InterfaceFor("ib0.8001")
	require.NoError(t, err)
	assert.Equal(t, Binding{Device: "mlx5_0", Port: 1, GIDIndex: 0, GID: mustGID(t, "fe80::2:c903:a1:b2c1"), GIDType: GIDTypeIB, Netdev: "ib0.8001"}, b)

	b, err = s.InterfaceFor("eth2")
	require.NoError(t, err)
	assert.Equal(t, Binding{Device: "mlx5_1", Port: 1, GIDIndex: 3, GID: mustGID(t, "::ffff:192.168.10.5"), GIDType: GIDTypeRoCEv2, Netdev: "eth2"}, b)

	b, err = s.InterfaceFor("veth0")
	require.NoError(t, err)
	assert.Equal(t, 1, b.GIDIndex)

	_, err = s.InterfaceFor("lo")
	assert.ErrorIs(t, err, ErrNoRDMA)
	_, err = s.InterfaceFor("nope")
	assert.ErrorContains(t, err, `no network interface "nope"`)
}

func TestPortForIP(t *testing.T) {
	t.Parallel()
	s := fabric(t)
	s.InterfaceAddrs = func(name string) ([]netip.Addr, error) {
		switch name {
		case "ib0":
			return []netip.Addr{netip.MustParseAddr("10.10.0.7"), netip.MustParseAddr("fe80::2:c903:a1:b2c1")}, nil
		case "ib0.8001":
			return []netip.Addr{netip.MustParseAddr("10.80.1.7")}, nil
		}
		return nil, errors.New("no such interface")
	}
	b, err := s.PortForIP(netip.MustParseAddr("192.168.10.5"))
	require.NoError(t, err)
	assert.Equal(t, Binding{Device: "mlx5_1", Port: 1, GIDIndex: 3, GID: mustGID(t, "::ffff:192.168.10.5"), GIDType: GIDTypeRoCEv2, Netdev: "eth2"}, b, "the RoCE v2 entry wins over v1")

	b, err = s.PortForIP(netip.MustParseAddr("10.99.0.1"))
	require.NoError(t, err)
	assert.Equal(t, "rxe0", b.Device)
	assert.Equal(t, 1, b.GIDIndex)

	b, err = s.PortForIP(netip.MustParseAddr("10.80.1.7"))
	require.NoError(t, err)
	assert.Equal(t, Binding{Device: "mlx5_0", Port: 1, GIDIndex: 0, GID: mustGID(t, "fe80::2:c903:a1:b2c1"), GIDType: GIDTypeIB, Netdev: "ib0.8001"}, b)

	_, err = s.PortForIP(netip.MustParseAddr("127.0.0.1"))
	assert.ErrorIs(t, err, ErrNoRDMA)
}

func TestDiscoverNoRDMA(t *testing.T) {
	t.Parallel()
	s, err := Discover("testdata/nordma")
	require.NoError(t, err)
	assert.Empty(t, s.Devices)
	require.Len(t, s.Netdevs, 2)
	assert.Equal(t, "eth0", s.Netdevs[0].Name)
	assert.Equal(t, NetdevLoopback, s.Netdevs[1].Kind)
}

func TestDiscoverMalformed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, content, want string }{
		{"sys/class/infiniband/x0/ports/1/state", "ACTIVE", "state"},
		{"sys/class/infiniband/x0/ports/1/gids/0", "not-a-gid", "gids/0"},
		{"sys/class/infiniband/x0/ports/1/pkeys/0", "0xfffff", "pkeys/0"},
		{"sys/class/infiniband/x0/node_guid", "zz", "node_guid"},
		{"sys/class/net/ib9/mtu", "big", "mtu"},
	} {
		root := t.TempDir()
		path := filepath.Join(root, tc.file)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(tc.content+"\n"), 0o644))
		_, err := Discover(root)
		require.Error(t, err, tc.file)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestEnumStrings(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ACTIVE", PortActive.String())
	assert.Equal(t, "DOWN", PortDown.String())
	assert.Equal(t, "RoCE v2", GIDTypeRoCEv2.String())
	assert.Equal(t, "unknown", GIDTypeUnknown.String())
	assert.Equal(t, "InfiniBand", LinkLayerInfiniBand.String())
	assert.Equal(t, "RNIC", NodeRNIC.String())
	assert.Equal(t, "IPoIB", NetdevIPoIB.String())
}

func TestRoCEMTU(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{1500: 1024, 9000: 4096, 65536: 4096, 1100: 512, 4200: 4096, 4000: 2048, 352: 256, 351: 0, 300: 0} {
		assert.Equal(t, want, RoCEMTU(in), "netdev MTU %d", in)
	}
}

func mustGID(t *testing.T, s string) GID {
	t.Helper()
	g, err := ParseGID(s)
	require.NoError(t, err)
	return g
}

func TestLookupGID(t *testing.T) {
	t.Parallel()
	const root = "testdata/fabric"
	// RoCE: the RoCE v2 entry of the address wins over the v1 entry
	// before it.
	e, ok, err := LookupGID(root, "mlx5_1", 1, mustGID(t, "::ffff:192.168.10.5"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, GIDEntry{Index: 3, GID: mustGID(t, "::ffff:192.168.10.5"), Type: GIDTypeRoCEv2, Netdev: "eth2"}, e)
	e, ok, err = LookupGID(root, "rxe0", 1, mustGID(t, "::ffff:10.99.0.1"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, GIDEntry{Index: 1, GID: mustGID(t, "::ffff:10.99.0.1"), Type: GIDTypeRoCEv2, Netdev: "veth0"}, e)
	// InfiniBand: the first entry, type IB, no netdev.
	e, ok, err = LookupGID(root, "mlx5_0", 1, mustGID(t, "fe80::2:c903:a1:b2c1"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, GIDEntry{Index: 0, GID: mustGID(t, "fe80::2:c903:a1:b2c1"), Type: GIDTypeIB}, e)
	// It agrees with what Discover reads.
	s := fabric(t)
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			for _, want := range p.GIDs {
				got, ok, err := LookupGID(root, d.Name, p.Port, want.GID)
				require.NoError(t, err)
				require.True(t, ok)
				if want.Type == GIDTypeRoCEv2 || p.LinkLayer != LinkLayerEthernet {
					assert.Equal(t, want.GID, got.GID)
				}
				assert.Equal(t, want.Netdev, got.Netdev)
			}
		}
	}

	_, ok, err = LookupGID(root, "rxe0", 1, mustGID(t, "::ffff:10.99.0.2"))
	require.NoError(t, err)
	assert.False(t, ok, "not in the table")
	_, _, err = LookupGID(root, "nodev", 1, mustGID(t, "::ffff:10.99.0.1"))
	assert.Error(t, err)
	_, _, err = LookupGID(root, "rxe0", 2, mustGID(t, "::ffff:10.99.0.1"))
	assert.Error(t, err, "no port 2")
}

func TestLookupNetdev(t *testing.T) {
	t.Parallel()
	n, err := LookupNetdev("testdata/fabric", "veth0")
	require.NoError(t, err)
	assert.Equal(t, "veth0", n.Name)
	assert.Equal(t, NetdevEthernet, n.Kind)
	assert.Equal(t, 1500, n.MTU)
	assert.Empty(t, n.Device, "LookupNetdev does not link the RDMA side")
	ib, err := LookupNetdev("testdata/fabric", "ib0")
	require.NoError(t, err)
	assert.Equal(t, NetdevIPoIB, ib.Kind)
	assert.Equal(t, "datagram", ib.Mode)
	for _, bad := range []string{"", "nope", "..", "../net", "bonding_masters"} {
		_, err := LookupNetdev("testdata/fabric", bad)
		assert.Error(t, err, "%q", bad)
	}
}
