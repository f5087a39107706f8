package ipoib

import (
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// devinfoPort is one port as `ibv_devinfo -v` prints it.
type devinfoPort struct {
	state     int // the number in "PORT_ACTIVE (4)"
	activeMTU int // bytes: "1024 (3)"
	linkLayer string
	physState string // "LINK_UP"
	gids      map[int]devinfoGID
}

type devinfoGID struct {
	gid GID
	typ string // "RoCE v2", "RoCE v1", "IB" (as printed)
}

var (
	devinfoPortRe = regexp.MustCompile(`^port:\s+(\d+)$`)
	devinfoKVRe   = regexp.MustCompile(`^([a-z_]+):\s+(.*)$`)
	// GID[  1]:		::ffff:10.99.0.1, RoCE v2
	devinfoGIDRe = regexp.MustCompile(`^GID\[\s*(\d+)\]:\s+([0-9a-fA-F:.]+)(?:,\s*(.*))?$`)
	numInParens  = regexp.MustCompile(`^(\S+)\s+\((\d+)\)$`)
)

// parseDevinfo parses the ports of `ibv_devinfo -v -d DEV`.
func parseDevinfo(out string) (map[int]*devinfoPort, error) {
	ports := map[int]*devinfoPort{}
	var cur *devinfoPort
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if m := devinfoPortRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			cur = &devinfoPort{gids: map[int]devinfoGID{}}
			ports[n] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if m := devinfoGIDRe.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			g, err := ParseGID(m[2])
			if err != nil {
				return nil, fmt.Errorf("GID line %q: %v", line, err)
			}
			cur.gids[i] = devinfoGID{gid: g, typ: strings.TrimSpace(m[3])}
			continue
		}
		m := devinfoKVRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k, v := m[1], strings.TrimSpace(m[2])
		switch k {
		case "state", "active_mtu", "phys_state":
			p := numInParens.FindStringSubmatch(v)
			if p == nil {
				return nil, fmt.Errorf("%s: want \"NAME (N)\", have %q", k, v)
			}
			n, _ := strconv.Atoi(p[2])
			switch k {
			case "state":
				cur.state = n
			case "active_mtu":
				cur.activeMTU, _ = strconv.Atoi(p[1])
			case "phys_state":
				cur.physState = p[1]
			}
		case "link_layer":
			cur.linkLayer = v
		}
	}
	return ports, nil
}

// rdmaLink is one port as `rdma link show DEV/PORT` prints it:
// "link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0".
type rdmaLink struct {
	state, physState, netdev string
}

func parseRdmaLink(out string) (map[string]rdmaLink, error) {
	links := map[string]rdmaLink{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "link" {
			continue
		}
		var l rdmaLink
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i] {
			case "state":
				l.state = f[i+1]
			case "physical_state":
				l.physState = f[i+1]
			case "netdev":
				l.netdev = f[i+1]
			}
		}
		links[f[1]] = l
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("no \"link DEV/PORT ...\" line in %q", out)
	}
	return links, nil
}

func TestParseDevinfo(t *testing.T) {
	t.Parallel()
	const out = `hca_id:	rxe0
	transport:			InfiniBand (0)
	fw_ver:				0.0.0
	node_guid:			5054:00ff:fe12:3456
	max_mcast_grp:			8192
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			active_mtu:		1024 (3)
			sm_lid:			0
			link_layer:		Ethernet
			phys_state:		LINK_UP (5)
			GID[  0]:		fe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v2
			GID[  1]:		::ffff:10.99.0.1, RoCE v2
`
	ports, err := parseDevinfo(out)
	require.NoError(t, err)
	require.Len(t, ports, 1)
	p := ports[1]
	assert.Equal(t, 4, p.state)
	assert.Equal(t, 1024, p.activeMTU)
	assert.Equal(t, "Ethernet", p.linkLayer)
	assert.Equal(t, "LINK_UP", p.physState)
	assert.Equal(t, map[int]devinfoGID{
		0: {mustGID(t, "fe80::5054:ff:fe12:3456"), "RoCE v2"},
		1: {mustGID(t, "::ffff:10.99.0.1"), "RoCE v2"},
	}, p.gids)

	links, err := parseRdmaLink("link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0 \n")
	require.NoError(t, err)
	assert.Equal(t, map[string]rdmaLink{"rxe0/1": {"ACTIVE", "LINK_UP", "veth0"}}, links)
}

// TestDiscoverAgreesWithRdmaCore checks Discover("/") against rdma-core's
// own view of the devices the rxe VM creates: ibv_devinfo -v (port state,
// active MTU, link layer, GID table with types) and rdma link (state,
// physical state, netdev).
func TestDiscoverAgreesWithRdmaCore(t *testing.T) {
	dev := testenv.Device()
	if dev == "" {
		t.Skip("no RDMA device: run `make test-rxe`")
	}
	type want struct{ dev, addr string }
	devs := []want{{dev, testenv.Addr()}}
	if peer := testenv.Get(testenv.EnvNSPeerDevice); peer != "" {
		devs = append(devs, want{peer, testenv.Get(testenv.EnvNSPeerAddr)})
	}
	sys, err := Discover("/")
	require.NoError(t, err)
	for _, w := range devs {
		t.Run(w.dev, func(t *testing.T) {
			checkAgainstRdmaCore(t, sys, w.dev, w.addr)
		})
	}
}

func checkAgainstRdmaCore(t *testing.T, sys *System, dev, addr string) {
	d := sys.Device(dev)
	require.NotNil(t, d, "%s=%s but Discover(\"/\") has no such device", testenv.EnvDevice, dev)
	require.NotEmpty(t, d.Ports)

	out, err := exec.Command("ibv_devinfo", "-v", "-d", dev).CombinedOutput()
	t.Logf("ibv_devinfo -v -d %s:\n%s", dev, out)
	require.NoError(t, err, "ibv_devinfo")
	di, err := parseDevinfo(string(out))
	require.NoError(t, err)

	out, err = exec.Command("rdma", "link", "show", dev+"/1").CombinedOutput()
	t.Logf("rdma link show %s/1:\n%s", dev, out)
	require.NoError(t, err, "rdma link show")
	links, err := parseRdmaLink(string(out))
	require.NoError(t, err)

	require.Len(t, d.Ports, len(di), "ports: sysfs vs ibv_devinfo")
	for _, p := range d.Ports {
		ip := di[p.Port]
		require.NotNil(t, ip, "ibv_devinfo has no port %d", p.Port)
		assert.Equal(t, ip.state, int(p.State), "port %d state: sysfs %v", p.Port, p.State)
		assert.Equal(t, ip.linkLayer, p.LinkLayer.String(), "port %d link_layer", p.Port)
		assert.Equal(t, ip.activeMTU, p.ActiveMTU, "port %d active_mtu (derived from %s)", p.Port, p.MTUFrom)
		assert.Equal(t, strings.ReplaceAll(strings.ToLower(ip.physState), "_", ""),
			strings.ToLower(p.PhysState), "port %d phys_state", p.Port)

		// The GID tables: every valid entry on both sides, same type.
		have := map[int]devinfoGID{}
		for _, e := range p.GIDs {
			have[e.Index] = devinfoGID{e.GID, e.Type.String()}
		}
		assert.Equal(t, ip.gids, have, "port %d GID table: ibv_devinfo vs sysfs", p.Port)

		link, ok := links[fmt.Sprintf("%s/%d", dev, p.Port)]
		require.True(t, ok, "rdma link has no %s/%d", dev, p.Port)
		assert.Equal(t, link.state, p.State.String(), "port %d state (rdma link)", p.Port)
		assert.Equal(t, strings.ReplaceAll(strings.ToLower(link.physState), "_", ""),
			strings.ToLower(p.PhysState), "port %d physical_state (rdma link)", p.Port)
		require.NotEmpty(t, link.netdev, "rdma link shows no netdev")
		assert.Contains(t, p.Netdevs, link.netdev, "port %d netdevs", p.Port)
		for _, e := range p.GIDs {
			assert.Equal(t, link.netdev, e.Netdev, "GID[%d] netdev", e.Index)
		}

		// The netdev side: it points back at this port, and the MTU came
		// from it.
		n := sys.Netdev(link.netdev)
		require.NotNil(t, n, "netdev %s", link.netdev)
		assert.Equal(t, dev, n.Device)
		assert.Equal(t, p.Port, n.Port)
		assert.Equal(t, NetdevEthernet, n.Kind)
		assert.Equal(t, link.netdev, p.MTUFrom)
		assert.Equal(t, "up", n.OperState)

		if addr == "" {
			continue
		}
		// GID[1] is the netdev's IPv4 address as a RoCE v2 GID, as the
		// VM sets it up, and the bindings find it.
		a := netip.MustParseAddr(addr)
		g1, ok := ip.gids[1]
		require.True(t, ok, "ibv_devinfo shows no GID[1]")
		assert.Equal(t, GIDFromIP(netip.AddrFrom16(a.As16())), g1.gid, "GID[1] is ::ffff:%s", addr)
		assert.Equal(t, "RoCE v2", g1.typ)

		b, err := sys.InterfaceFor(link.netdev)
		require.NoError(t, err)
		assert.Equal(t, Binding{Device: dev, Port: p.Port, GIDIndex: 1, GID: g1.gid, GIDType: GIDTypeRoCEv2, Netdev: link.netdev}, b)
		b, err = sys.PortForIP(a)
		require.NoError(t, err)
		assert.Equal(t, Binding{Device: dev, Port: p.Port, GIDIndex: 1, GID: g1.gid, GIDType: GIDTypeRoCEv2, Netdev: link.netdev}, b)
	}
}
