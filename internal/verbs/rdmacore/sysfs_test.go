package rdmacore

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// fakePort writes a sysfs GID table: entries of gid, type, ndev.
func fakePort(t *testing.T, root, dev string, port int, ents map[int][3]string) {
	t.Helper()
	dir := filepath.Join(root, dev, "ports", "1")
	for _, d := range []string{"gids", "gid_attrs/types", "gid_attrs/ndevs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	for i := 0; i < 4; i++ {
		name := string(rune('0' + i))
		e, ok := ents[i]
		if !ok {
			e = [3]string{"0000:0000:0000:0000:0000:0000:0000:0000", "", ""}
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "gids", name), []byte(e[0]+"\n"), 0o644))
		if e[1] != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "gid_attrs/types", name), []byte(e[1]+"\n"), 0o644))
		}
		if e[2] != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "gid_attrs/ndevs", name), []byte(e[2]+"\n"), 0o644))
		}
	}
}

func TestReadGIDTable(t *testing.T) {
	root := t.TempDir()
	old := sysfsRoot
	sysfsRoot = root
	t.Cleanup(func() { sysfsRoot = old })
	// As rxe on veth0 with 10.99.0.1 shows it.
	fakePort(t, root, "rxe0", 1, map[int][3]string{
		0: {"fe80:0000:0000:0000:d8b3:9aff:fe01:0203", "IB/RoCE v1", "veth0"},
		1: {"fe80:0000:0000:0000:d8b3:9aff:fe01:0203", "RoCE v2", "veth0"},
		2: {"0000:0000:0000:0000:0000:ffff:0a63:0001", "IB/RoCE v1", "veth0"},
		3: {"0000:0000:0000:0000:0000:ffff:0a63:0001", "RoCE v2", "veth0"},
	})
	tab, err := readGIDTable("rxe0", 1, verbs.LinkLayerEthernet)
	require.NoError(t, err)
	require.Len(t, tab, 4)
	assert.Equal(t, verbs.GIDTypeRoCEv1, tab[0].Type)
	assert.Equal(t, verbs.GIDTypeRoCEv2, tab[1].Type)
	assert.Equal(t, "veth0", portNetdev(tab))

	v4 := verbs.GIDFromIP(net.IPv4(10, 99, 0, 1))
	e, ok, err := findGID("rxe0", 1, verbs.LinkLayerEthernet, v4)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, e.Index, "findGID prefers the RoCE v2 entry")
	assert.Equal(t, verbs.GIDTypeRoCEv2, e.Type)
	assert.Equal(t, "veth0", e.Netdev)
	_, ok, err = findGID("rxe0", 1, verbs.LinkLayerEthernet, verbs.GIDFromIP(net.IPv4(10, 99, 0, 2)))
	require.NoError(t, err)
	assert.False(t, ok)

	// Zero GIDs are skipped; on InfiniBand every entry is of type IB.
	fakePort(t, root, "mlx5_0", 1, map[int][3]string{
		0: {"fe80:0000:0000:0000:0002:c903:0031:7a41", "", "ib0"},
	})
	tab, err = readGIDTable("mlx5_0", 1, verbs.LinkLayerInfiniBand)
	require.NoError(t, err)
	require.Len(t, tab, 1)
	assert.Equal(t, verbs.GIDTypeIB, tab[0].Type)
	assert.Equal(t, 0, tab[0].Index)

	_, err = readGIDTable("nodev", 1, verbs.LinkLayerEthernet)
	assert.Error(t, err)
}

func TestLocalAddrNeverDefaultRoute(t *testing.T) {
	ip, zone, err := localAddr(verbs.BindConfig{})
	require.NoError(t, err)
	assert.True(t, ip.Equal(net.IPv4(127, 0, 0, 1)), "got %v, want 127.0.0.1", ip)
	assert.Zero(t, zone)

	ip, _, err = localAddr(verbs.BindConfig{IPv6: true})
	require.NoError(t, err)
	assert.True(t, ip.Equal(net.IPv6loopback), "got %v, want ::1", ip)

	want := net.IPv4(10, 99, 0, 1)
	ip, _, err = localAddr(verbs.BindConfig{Addr: want})
	require.NoError(t, err)
	assert.True(t, ip.Equal(want))

	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo interface")
	}
	ip, _, err = localAddr(verbs.BindConfig{Interface: lo})
	require.NoError(t, err)
	assert.True(t, ip.IsLoopback(), "got %v, want lo's address", ip)
}

func TestSockaddrs(t *testing.T) {
	sa := sockaddrIP(net.IPv4(239, 1, 2, 3), 0)
	assert.Equal(t, uint16(afInet), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, []byte{239, 1, 2, 3}, sa.b[4:8])

	g6 := net.ParseIP("ff0e::1234")
	sa = sockaddrIP(g6, 7)
	assert.Equal(t, uint16(afInet6), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, []byte(g6.To16()), sa.b[8:24])
	assert.Equal(t, uint32(7), binary.NativeEndian.Uint32(sa.b[24:]))

	// A raw MGID: IPv4-mapped ones become sockaddr_in (RoCE v2), others
	// sockaddr_ib on InfiniBand (as mckey -M) and sockaddr_in6 on RoCE.
	mapped := verbs.GIDFromIP(net.IPv4(239, 9, 9, 9))
	sa, err := groupSockaddr(verbs.Group{MGID: mapped}, verbs.LinkLayerEthernet)
	require.NoError(t, err)
	assert.Equal(t, uint16(afInet), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, []byte{239, 9, 9, 9}, sa.b[4:8])

	ib, _ := verbs.ParseGID("ff12:401b:ffff::1")
	sa, err = groupSockaddr(verbs.Group{MGID: ib}, verbs.LinkLayerInfiniBand)
	require.NoError(t, err)
	assert.Equal(t, uint16(afIB), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, ib[:], sa.b[8:24])
	sa, err = groupSockaddr(verbs.Group{MGID: ib}, verbs.LinkLayerEthernet)
	require.NoError(t, err)
	assert.Equal(t, uint16(afInet6), binary.NativeEndian.Uint16(sa.b[0:]))

	_, err = groupSockaddr(verbs.Group{IP: net.IPv4(10, 0, 0, 1)}, verbs.LinkLayerEthernet)
	assert.Error(t, err, "a unicast address is not a group")

	assert.True(t, groupIsIPv6(verbs.Group{IP: g6}))
	assert.False(t, groupIsIPv6(verbs.Group{IP: net.IPv4(239, 1, 1, 1)}))
	assert.False(t, groupIsIPv6(verbs.Group{MGID: mapped}))
	assert.True(t, groupIsIPv6(verbs.Group{MGID: ib}))
}

func TestLocalAddrInterfaceWithoutFamily(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo interface")
	}
	addrs, _ := lo.Addrs()
	has6 := false
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil {
			has6 = true
		}
	}
	_, _, err = localAddr(verbs.BindConfig{Interface: lo, IPv6: true})
	if has6 {
		assert.NoError(t, err)
	} else {
		assert.True(t, errors.Is(err, verbs.ErrNoDevice), "got %v, want ErrNoDevice", err)
	}
}
