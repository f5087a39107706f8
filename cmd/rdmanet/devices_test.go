package main

import (
	"bytes"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// The live view, with the providers' answers fixed: rdma-core's verbs
// clear multicast on a device with max_mcast_grp 0 and give the MTU of a
// port sysfs cannot derive; the software backend's devices print in the
// same style as the RDMA devices.
func TestDevicesLiveViewGolden(t *testing.T) {
	sys, err := ipoib.Discover(fabricRoot)
	require.NoError(t, err)
	backends := []backend{
		{name: rdmanet.BackendRDMACore, available: true, detail: "libibverbs + librdmacm; 2 device(s): mlx5_0 rxe0",
			devices: []rdmanet.Device{
				{Name: "mlx5_0", MaxMcastGroups: 131072, Ports: []rdmanet.Port{{Port: 1, ActiveMTU: 2048}, {Port: 2, ActiveMTU: 4096}}},
				{Name: "rxe0", MaxMcastGroups: 0, Ports: []rdmanet.Port{{Port: 1, ActiveMTU: 1024}}},
			}},
		{name: rdmanet.BackendSoftware, available: true, detail: softDetail,
			devices: []rdmanet.Device{{
				Name: "sw-lo", Backend: rdmanet.BackendSoftware, NodeGUID: 0x08ad3907b553f8ec, MaxMcastGroups: 20,
				Ports: []rdmanet.Port{{Port: 1, State: ipoib.PortActive, ActiveMTU: 4096, LinkLayer: ipoib.LinkLayerEthernet, Netdev: "lo",
					GIDs: []ipoib.GIDEntry{{Index: 0, GID: ipoib.GIDFromIP(netip.MustParseAddr("127.0.0.1")), Type: ipoib.GIDTypeRoCEv2, Netdev: "lo"}}}},
			}, {
				Name: "sw-veth9", Backend: rdmanet.BackendSoftware, NodeGUID: 1, MaxMcastGroups: 20,
				Ports: []rdmanet.Port{{Port: 1, State: ipoib.PortDown, ActiveMTU: 1024, LinkLayer: ipoib.LinkLayerEthernet, Netdev: "veth9"}},
			}}},
	}
	var out bytes.Buffer
	require.NoError(t, printDevices(&out, sys, backends))
	golden(t, "devices_live_view", out.String())
	s := out.String()
	assert.Contains(t, s, "rxe0  node_type CA  node_guid 0000:0aff:fe63:0001  multicast no (max_mcast_grp 0)")
	assert.Contains(t, s, "port 2  DOWN (Disabled)  link_layer InfiniBand  active_mtu 4096 (ibv_query_port)")
	assert.Regexp(t, `(?m)^sw-lo  backend software  node_guid 08ad:3907:b553:f8ec  multicast yes \(max 20 groups\)$`, s)
	assert.Regexp(t, `(?m)^    GID\[0\]  ::ffff:127\.0\.0\.1  RoCE v2  lo$`, s)
	for i, l := range strings.Split(s, "\n") {
		assert.False(t, strings.HasSuffix(l, " "), "line %d has trailing spaces: %q", i+1, l)
	}
}

// On the live system the backends are the library's: rdma-core's status is
// its Available(), and the software backend lists sw-lo with 127.0.0.1.
func TestDevicesLive(t *testing.T) {
	out, errOut, code := runCmd(t, "/", "devices")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	var rc *rdmanet.BackendInfo
	for _, b := range rdmanet.Backends() {
		if b.Name == rdmanet.BackendRDMACore {
			rc = &b
		}
	}
	require.NotNil(t, rc, "rdma-core is not among rdmanet.Backends()")
	if err := rc.Unavailable; err != nil {
		assert.Regexp(t, `(?m)^rdma-core\s+unavailable\s+`+regexp.QuoteMeta(err.Error())+`$`, out)
	} else {
		assert.Regexp(t, `(?m)^rdma-core\s+available\s+libibverbs \+ librdmacm; \d+ device\(s\)`, out)
	}
	assert.Regexp(t, `(?m)^software\s+available\s`, out)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo")
	}
	if lo.Flags&net.FlagUp == 0 {
		t.Skip("lo is down")
	}
	assert.Regexp(t, `(?m)^sw-lo  backend software  `, out)
	assert.Regexp(t, `(?m)^    GID\[\d+\]\s+::ffff:127\.0\.0\.1\s+RoCE v2\s+lo$`, out)
	if dev := testenv.Device(); dev != "" {
		// In the rxe VM: rdma-core is available and the device is listed
		// with its GID.
		assert.Regexp(t, `(?m)^rdma-core\s+available\s+libibverbs \+ librdmacm; \d+ device\(s\): .*\b`+dev+`\b`, out)
		assert.Regexp(t, `(?m)^`+dev+`  node_type CA  .*multicast yes$`, out)
	}
}

// In a network namespace of its own (a plain `unshare -n`: /sys still
// shows the host's interfaces) with lo and a veth pair made there,
// "devices" lists exactly those: not the host's eth0, and the veth that
// sysfs does not show.
func TestDevicesInNamespace(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip link add rn0 type veth peer name rn1") {
		return
	}
	out, errOut, code := runCmd(t, "/", "devices")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	i := strings.Index(out, "\nNETDEV ")
	require.GreaterOrEqual(t, i, 0, "no NETDEV table in:\n%s", out)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out[i+1:]), "\n")[1:] {
		names = append(names, strings.Fields(l)[0])
	}
	// The namespace's own list: busybox's ip (in the rxe VM) names the
	// veth's peer veth0, not rn1.
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	var want []string
	for _, ifi := range ifs {
		want = append(want, ifi.Name)
	}
	sort.Strings(want)
	require.Len(t, want, 3, "the namespace has lo and the veth pair: %v", want)
	require.Contains(t, want, "rn0")
	assert.Equal(t, want, names, "netdevs listed, want this namespace's")
	assert.Regexp(t, `(?m)^rn0\s+Ethernet\s+1500\s+down\s`, out)
}
