package sysfs

import (
	"net"
	"testing"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sysfs mounted in the host's namespace, seen from a namespace with lo
// and a veth of its own: the host's eth0 goes, the veth comes from the
// interface list, and a netdev that shares a name with the host's but is
// another device (its index or address differ) is described from the
// interface list, not from the host's sysfs.
func TestInNamespace(t *testing.T) {
	mac := func(s string) net.HardwareAddr {
		hw, err := net.ParseMAC(s)
		require.NoError(t, err)
		return hw
	}
	sysfs := []Netdev{
		{Name: "eth0", Index: 2, Kind: infiniband.NetdevEthernet, ARPHRD: arphrdEther, MTU: 1400, OperState: "up"},
		{Name: "ib0", Index: 4, Kind: infiniband.NetdevIPoIB, ARPHRD: arphrdInfiniBand, MTU: 2044, OperState: "up", PKey: 0xffff, Device: "mlx5_0", Port: 1},
		{Name: "lo", Index: 1, Kind: infiniband.NetdevLoopback, ARPHRD: arphrdLoopback, MTU: 65536, OperState: "unknown"},
		{Name: "veth1", Index: 9, Kind: infiniband.NetdevEthernet, ARPHRD: arphrdEther, MTU: 1500, OperState: "up"},
	}
	addrs := map[string]string{
		"eth0":  "02:00:00:00:00:02",
		"ib0":   "00:00:10:87:fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:77",
		"lo":    "00:00:00:00:00:00",
		"veth1": "02:00:00:00:00:09",
	}
	ifis := []net.Interface{
		{Index: 1, MTU: 16384, Name: "lo", Flags: net.FlagUp | net.FlagLoopback | net.FlagRunning},
		{Index: 4, MTU: 2044, Name: "ib0", HardwareAddr: mac(addrs["ib0"]), Flags: net.FlagUp | net.FlagRunning},
		{Index: 3, MTU: 9000, Name: "veth1", HardwareAddr: mac("0a:00:00:00:00:03"), Flags: net.FlagUp | net.FlagRunning},
		{Index: 5, MTU: 1500, Name: "rn0", HardwareAddr: mac("0a:00:00:00:00:05")},
	}
	got, unseen := inNamespace(sysfs, addrs, ifis)
	want := []Netdev{
		// ib0 is the same device (name, index, address): sysfs's view.
		{Name: "ib0", Index: 4, Kind: infiniband.NetdevIPoIB, ARPHRD: arphrdInfiniBand, MTU: 2044, OperState: "up", PKey: 0xffff, Device: "mlx5_0", Port: 1},
		// lo: sysfs's, with the namespace's MTU.
		{Name: "lo", Index: 1, Kind: infiniband.NetdevLoopback, ARPHRD: arphrdLoopback, MTU: 16384, OperState: "unknown"},
		{Name: "rn0", Index: 5, Kind: infiniband.NetdevEthernet, ARPHRD: arphrdEther, MTU: 1500, OperState: "down"},
		// veth1 has the host's name but another index: the namespace's own.
		{Name: "veth1", Index: 3, Kind: infiniband.NetdevEthernet, ARPHRD: arphrdEther, MTU: 9000, OperState: "up"},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, map[string]bool{"rn0": true, "veth1": true}, unseen)
}

// On the running system Discover lists exactly the interfaces of the
// process's network namespace. In CI's `unshare -n` (sysfs still the
// host's) it failed before: the host's interfaces were listed, and an
// interface made in the namespace was not.
func TestDiscoverLiveIsThisNamespace(t *testing.T) {
	s, err := Discover("/")
	require.NoError(t, err)
	ifis, err := net.Interfaces()
	require.NoError(t, err)
	want := map[string]int{}
	for _, ifi := range ifis {
		want[ifi.Name] = ifi.Index
	}
	got := map[string]int{}
	for _, n := range s.Netdevs {
		got[n.Name] = n.Index
	}
	assert.Equal(t, want, got, "Discover's netdevs (name: index), want net.Interfaces'")
}
