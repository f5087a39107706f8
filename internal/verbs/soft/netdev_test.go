//go:build linux

package soft

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// fakeNetdev writes /sys/class/net/<name> under root with the given files.
func fakeNetdev(t *testing.T, root, name string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(root, "sys/class/net", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for f, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644))
	}
}

// loopbackInterface is the loopback netdev: lo, else the first with
// the loopback flag (the netlink view's loopback, from net's calls).
func loopbackInterface() (*net.Interface, error) {
	if ifi, err := net.InterfaceByName("lo"); err == nil {
		return ifi, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback != 0 {
			return &ifs[i], nil
		}
	}
	return nil, fmt.Errorf("no loopback interface")
}

func loopback(t *testing.T) *net.Interface {
	t.Helper()
	lo, err := loopbackInterface()
	require.NoError(t, err)
	return lo
}

// The netdev's kind, MTU and state come from the kernel (rtnetlink) for
// the live system, and from a sysfs tree (internal/infiniband) for the fake ones the
// tests give the real lo, so that they run anywhere.
func TestResolveThroughSysfs(t *testing.T) {
	lo := loopback(t)

	// The live system: lo is loopback, operstate "unknown", usable, with
	// the MTU the interface list (netlink too) says.
	r, err := resolveAt(liveNetdevs, verbs.BindConfig{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.sock, 0, "resolve made a socket")
	r.release()
	// It holds no fd after: a second release closes nothing.
	require.Negative(t, r.sock)
	assert.Equal(t, lo.Name, r.ifi.Name, "nil interface and address: loopback")
	assert.True(t, r.ip.Equal(net.IPv4(127, 0, 0, 1)))
	assert.True(t, r.loopbak)
	assert.Equal(t, infiniband.RoCEMTU(lo.MTU), r.mtu)
	info := lookupNetdev(liveNetdevs, lo)
	assert.Equal(t, netdevInfo{kind: infiniband.NetdevLoopback, mtu: lo.MTU, operState: "unknown"}, info)

	// The MTU is the fake sysfs's.
	root := t.TempDir()
	fakeNetdev(t, root, lo.Name, map[string]string{"type": "772", "mtu": "1500", "operstate": "unknown"})
	r, err = resolveAt(root, verbs.BindConfig{})
	require.NoError(t, err)
	r.release()
	assert.Equal(t, 1024, r.mtu, "netdev MTU 1500 from sysfs")

	// An IPoIB netdev is refused, however it is named.
	root = t.TempDir()
	fakeNetdev(t, root, lo.Name, map[string]string{"type": "32", "mtu": "2044", "operstate": "up"})
	for _, cfg := range []verbs.BindConfig{{}, {Interface: lo}, {Addr: net.IPv4(127, 0, 0, 1)}, {Device: devicePrefix + lo.Name}} {
		_, err = resolveAt(root, cfg)
		require.Error(t, err, "%+v", cfg)
		assert.True(t, errors.Is(err, verbs.ErrNoDevice), "%v", err)
		assert.ErrorContains(t, err, "is IPoIB")
		assert.ErrorContains(t, err, "rdma-core")
	}
	assert.Equal(t, infiniband.NetdevIPoIB, lookupNetdev(root, lo).kind)

	// Up but without carrier: refused.
	for _, st := range []string{"down", "lowerlayerdown", "notpresent"} {
		root = t.TempDir()
		fakeNetdev(t, root, lo.Name, map[string]string{"type": "772", "mtu": "65536", "operstate": st})
		_, err = resolveAt(root, verbs.BindConfig{})
		assert.ErrorContains(t, err, "operstate "+st)
		assert.True(t, errors.Is(err, verbs.ErrNoDevice))
	}

	// A tiny MTU: no RoCE path MTU fits.
	root = t.TempDir()
	fakeNetdev(t, root, lo.Name, map[string]string{"type": "772", "mtu": "300", "operstate": "unknown"})
	_, err = resolveAt(root, verbs.BindConfig{})
	assert.ErrorContains(t, err, "MTU 300 is too small")

	// No sysfs at all (some containers): the interface list's MTU and
	// flags.
	info = lookupNetdev(filepath.Join(t.TempDir(), "nosys"), lo)
	assert.Equal(t, infiniband.NetdevLoopback, info.kind)
	assert.Equal(t, lo.MTU, info.mtu)
	assert.Empty(t, info.unusable())
}

// The one netlink read Bind makes sees what package net and
// netlinkNetdev see, link by link: name, index, flags, MTU, hardware
// address, kind and state, and the same GIDs in the same order.
func TestNetlinkViewMatchesNet(t *testing.T) {
	v, err := readNetlinkView()
	require.NoError(t, err)
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.Len(t, v.links, len(ifs))
	for i := range ifs {
		l := v.byIndex(ifs[i].Index)
		require.NotNil(t, l, ifs[i].Name)
		assert.Equal(t, ifs[i].Name, l.ifi.Name)
		assert.Equal(t, ifs[i].Flags, l.ifi.Flags, ifs[i].Name)
		assert.Equal(t, ifs[i].MTU, l.ifi.MTU, ifs[i].Name)
		assert.Equal(t, ifs[i].HardwareAddr.String(), l.ifi.HardwareAddr.String(), ifs[i].Name)
		info, err := netlinkNetdev(ifs[i].Index)
		require.NoError(t, err)
		assert.Equal(t, info, l.info, ifs[i].Name)
		assert.Equal(t, gidTable(&ifs[i]), v.gids(l), ifs[i].Name)
	}
	assert.Equal(t, v.byName("lo"), v.loopback())
	assert.Equal(t, v.loopback(), v.owning(net.IPv4(127, 0, 0, 1)))
}

// In a namespace whose loopback netdev is not named lo (here lo0), the
// loopback is found by its flag: by loopbackInterface, and by Bind with
// nothing named, which binds 127.0.0.1 on sw-lo0.
func TestLoopbackNotNamedLo(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip link set lo down", "ip link set lo name lo0", "ip link set lo0 up") {
		return
	}
	lo, err := loopbackInterface()
	require.NoError(t, err)
	require.NotNil(t, lo, "loopbackInterface: no interface and no error")
	assert.Equal(t, "lo0", lo.Name)
	assert.NotZero(t, lo.Flags&net.FlagLoopback)

	id, err := Provider{}.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	defer id.Close()
	assert.Equal(t, devicePrefix+"lo0", id.Local().Device)
	assert.Equal(t, "lo0", id.Local().Netdev)
	assert.True(t, id.Local().IP.Equal(net.IPv4(127, 0, 0, 1)), "bound to %v", id.Local().IP)
}

// An address with a peer (a point-to-point link's: IFA_LOCAL is the
// address, IFA_ADDRESS the peer's) is the link's own address in the
// netlink view, as in net.Interface.Addrs: the address owns the link, the
// peer does not, and the GID table is net's.
func TestNetlinkViewPointToPoint(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip link add dp0 type veth peer name dp1", "ip addr add 10.9.8.1 peer 10.9.8.2 dev dp0") {
		return
	}
	v, err := readNetlinkView()
	require.NoError(t, err)
	l := v.byName("dp0")
	require.NotNil(t, l, "dp0 in the view")
	assert.Equal(t, l, v.owning(net.IPv4(10, 9, 8, 1)), "the address's link")
	assert.Nil(t, v.owning(net.IPv4(10, 9, 8, 2)), "the peer's link")
	ifi, err := net.InterfaceByName("dp0")
	require.NoError(t, err)
	assert.Equal(t, gidTable(ifi), v.gids(l))
}
