//go:build linux

package rdmacore

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

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
	mapped := infiniband.GIDFromNetIP(net.IPv4(239, 9, 9, 9))
	sa, err := groupSockaddr(verbs.Group{MGID: mapped}, infiniband.LinkLayerEthernet)
	require.NoError(t, err)
	assert.Equal(t, uint16(afInet), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, []byte{239, 9, 9, 9}, sa.b[4:8])

	ib, _ := infiniband.ParseGID("ff12:401b:ffff::1")
	sa, err = groupSockaddr(verbs.Group{MGID: ib}, infiniband.LinkLayerInfiniBand)
	require.NoError(t, err)
	assert.Equal(t, uint16(afIB), binary.NativeEndian.Uint16(sa.b[0:]))
	assert.Equal(t, ib[:], sa.b[8:24])
	sa, err = groupSockaddr(verbs.Group{MGID: ib}, infiniband.LinkLayerEthernet)
	require.NoError(t, err)
	assert.Equal(t, uint16(afInet6), binary.NativeEndian.Uint16(sa.b[0:]))

	_, err = groupSockaddr(verbs.Group{IP: net.IPv4(10, 0, 0, 1)}, infiniband.LinkLayerEthernet)
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
