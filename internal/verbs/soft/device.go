//go:build linux

package soft

import (
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/infiniband/sysfs"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// devicePrefix names a software device after its netdev: sw-lo, sw-eth0.
const devicePrefix = "sw-"

// Limits the software devices report.
const (
	maxQPWR     = 16384
	maxMTU      = 4096
	portNum     = 1
	defaultMcgs = 20 // net.ipv4.igmp_max_memberships default
)

// maxMemberships is the per-socket IP multicast membership limit, which is
// the per-QP attach limit here. A file that cannot be read holds no
// number: os.ReadFile returns nothing when the open fails, and the
// sysctl's one read returns the whole value or nothing.
func maxMemberships() int {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/igmp_max_memberships")
	return parseMemberships(b)
}

// parseMemberships reads igmp_max_memberships: defaultMcgs where it holds
// no number.
func parseMemberships(b []byte) int {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return defaultMcgs
	}
	return max(n, 0) // 0 or less: no socket may join a group
}

// deviceAttr describes the software device over one netdev.
func deviceAttr(ifi *net.Interface) verbs.DeviceAttr {
	mcgs := maxMemberships()
	return verbs.DeviceAttr{
		Name:             devicePrefix + ifi.Name,
		Provider:         verbs.Software,
		NodeGUID:         nodeGUID(ifi),
		MaxMcastGroups:   mcgs,
		MaxQPMcastAttach: mcgs,
		MaxQPWR:          maxQPWR,
		Ports:            []verbs.PortAttr{portAttr(ifi)},
	}
}

// nodeGUID is the EUI-64 of the netdev's MAC, as RoCE devices derive it,
// or a hash of the name for netdevs without one (lo).
func nodeGUID(ifi *net.Interface) uint64 {
	if m := ifi.HardwareAddr; len(m) == 6 && (m[0]|m[1]|m[2]|m[3]|m[4]|m[5]) != 0 {
		return uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xFF<<32 |
			0xFE<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
	}
	h := fnv.New64a()
	h.Write([]byte(ifi.Name))
	return h.Sum64()
}

// liveNetdevs is the root lookupNetdev and resolveAt take to ask the
// kernel about the netdevs of the current network namespace (rtnetlink).
// Tests give them the root of a fake sysfs tree instead.
const liveNetdevs = ""

// netdevInfo is what the software backend needs to know of a netdev: its
// kind, MTU and whether it can carry traffic.
type netdevInfo struct {
	kind infiniband.NetdevKind
	mtu  int
	// operState is the operational state as sysfs operstate names it
	// ("up", "unknown" for lo, "down", "lowerlayerdown", ...); "" when it
	// could not be read.
	operState string
}

// lookupNetdev says what a netdev is. With root liveNetdevs it asks the
// kernel over rtnetlink, for the network namespace the process runs in
// (sysfs may show another one: a plain `unshare -n` keeps the host's
// /sys). With any other root it reads the fake sysfs tree there through
// internal/infiniband (tests). Where neither answers it falls back to what the
// interface list says: the MTU, and loopback or Ethernet by the flags.
func lookupNetdev(root string, ifi *net.Interface) netdevInfo {
	if root == liveNetdevs {
		if n, err := netlinkNetdev(ifi.Index); err == nil {
			return n
		}
	} else if n, err := sysfs.LookupNetdev(root, ifi.Name); err == nil {
		return netdevInfo{kind: n.Kind, mtu: n.MTU, operState: n.OperState}
	}
	k := infiniband.NetdevEthernet
	if ifi.Flags&net.FlagLoopback != 0 {
		k = infiniband.NetdevLoopback
	}
	return netdevInfo{kind: k, mtu: ifi.MTU}
}

// unusable reports why a netdev that is administratively up cannot carry
// traffic, or "" when it can: operstate "down" (no carrier),
// "lowerlayerdown" (a veth whose peer is down, a VLAN over a down
// device) and "notpresent". "unknown" (lo, tun) and "dormant" are let
// through, as the kernel sends on them.
func (n netdevInfo) unusable() string {
	switch n.operState {
	case "down", "lowerlayerdown", "notpresent":
		return "operstate " + n.operState
	}
	return ""
}

func portAttr(ifi *net.Interface) verbs.PortAttr {
	info := lookupNetdev(liveNetdevs, ifi)
	st := infiniband.PortDown
	if ifi.Flags&net.FlagUp != 0 && info.unusable() == "" {
		st = infiniband.PortActive
	}
	return verbs.PortAttr{
		Port:      portNum,
		State:     st,
		ActiveMTU: infiniband.RoCEMTU(info.mtu),
		MaxMTU:    maxMTU,
		LinkLayer: infiniband.LinkLayerEthernet,
		Netdev:    ifi.Name,
		GIDs:      gidTable(ifi),
	}
}

// gidTable lists the netdev's addresses as RoCE v2 GIDs, in the order the
// kernel reports them; none where they cannot be read (Addrs returns no
// addresses with its error).
func gidTable(ifi *net.Interface) []infiniband.GIDEntry {
	addrs, _ := ifi.Addrs()
	var gids []infiniband.GIDEntry
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		gids = append(gids, infiniband.GIDEntry{
			Index:  len(gids),
			GID:    infiniband.GIDFromNetIP(ipn.IP),
			Type:   infiniband.GIDTypeRoCEv2,
			Netdev: ifi.Name,
		})
	}
	return gids
}

// resolved is what Bind resolves a BindConfig to.
type resolved struct {
	ifi     *net.Interface
	ip      net.IP // IPv4, 4 bytes
	gidIdx  int
	mtu     int
	loopbak bool
	// sock is a UDP socket made in the namespace resolved (it told which
	// one: currentNetlinkView), the QP's unicast socket to be; whoever
	// takes r closes it or hands it on (release).
	sock  int
	netns uint64 // the namespace's cookie (SO_NETNS_COOKIE), 0 if unknown
}

// release closes r.sock unless it was handed on.
func (r *resolved) release() {
	if r.sock >= 0 {
		unix.Close(r.sock)
		r.sock = noFd
	}
}

func noDevice(format string, args ...any) error {
	return verbs.NoDevicef("soft: "+format, args...)
}

// resolve finds the netdev and address cfg names: Addr selects the netdev
// owning it; Interface selects the netdev and its first IPv4 address;
// neither means loopback (127.0.0.1 on lo), never the default route's
// interface. The netdev's kind, MTU and operational state come from the
// kernel, for this network namespace (lookupNetdev): an IPoIB netdev is refused (RoCE v2 is UDP/IP on
// Ethernet; InfiniBand is rdma-core's), and so is one that is up but has
// no carrier.
func resolve(cfg verbs.BindConfig) (*resolved, error) { return resolveAt(liveNetdevs, cfg) }

// resolveAt is resolve with the netdev's kind, MTU and operational state
// read as lookupNetdev(root) reads them.
func resolveAt(root string, cfg verbs.BindConfig) (*resolved, error) {
	if cfg.IPv6 || (cfg.Addr != nil && cfg.Addr.To4() == nil) {
		return nil, fmt.Errorf("soft: rdma6: IPv6 multicast groups are not supported on RoCE v2, as with rdma_cm (ENOTSUPP); use an IPv4 group (IPv6 groups need InfiniBand): %w", verbs.ErrNotSupported)
	}
	if cfg.Port != 0 && cfg.Port != portNum {
		return nil, noDevice("port %d: software devices have one port", cfg.Port)
	}
	sock, err := udpSocket(nil)
	if err != nil {
		sock = noFd // no cookie: read the view; CreateQP reports the error
	}
	netns := netnsCookie(sock)
	r, err := resolveIn(netns, root, cfg)
	if err != nil {
		if sock >= 0 {
			unix.Close(sock)
		}
		return nil, err
	}
	r.sock, r.netns = sock, netns
	return r, nil
}

// resolveIn is resolveAt in the network namespace whose cookie is netns
// (0: unknown).
func resolveIn(netns uint64, root string, cfg verbs.BindConfig) (*resolved, error) {
	v, err := currentNetlinkView(netns)
	if err != nil {
		return nil, noDevice("list netdevs: %v", err)
	}
	var (
		l  *netlinkLink
		ip net.IP
	)
	switch {
	case cfg.Addr != nil:
		ip = cfg.Addr.To4()
		if l = v.owning(ip); l == nil {
			return nil, noDevice("no netdev has address %v", ip)
		}
		if cfg.Interface != nil && cfg.Interface.Name != "" && cfg.Interface.Name != l.ifi.Name {
			return nil, noDevice("address %v is on %s, not %s", ip, l.ifi.Name, cfg.Interface.Name)
		}
	case cfg.Interface != nil:
		if cfg.Interface.Name != "" {
			l = v.byName(cfg.Interface.Name)
		} else {
			l = v.byIndex(cfg.Interface.Index)
		}
		if l == nil {
			return nil, noDevice("interface %q (index %d): no such network interface", cfg.Interface.Name, cfg.Interface.Index)
		}
	case cfg.Device != "":
		name, ok := strings.CutPrefix(cfg.Device, devicePrefix)
		if !ok {
			return nil, noDevice("device %q is not a software device (want %s<netdev>)", cfg.Device, devicePrefix)
		}
		if l = v.byName(name); l == nil {
			return nil, noDevice("device %q: no such network interface", cfg.Device)
		}
	default:
		if l = v.loopback(); l == nil {
			return nil, noDevice("loopback: no loopback interface")
		}
		ip = net.IPv4(127, 0, 0, 1).To4()
	}
	ifi := new(net.Interface) // the view is shared: a copy
	*ifi = l.ifi
	if cfg.Device != "" && cfg.Device != devicePrefix+ifi.Name {
		return nil, noDevice("device %q does not serve %s (that is %s%s)", cfg.Device, ifi.Name, devicePrefix, ifi.Name)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, noDevice("netdev %s is down", ifi.Name)
	}
	info := l.info
	if root != liveNetdevs {
		info = lookupNetdev(root, ifi)
	}
	if info.kind == infiniband.NetdevIPoIB {
		return nil, noDevice("netdev %s is IPoIB: the software backend sends RoCE v2 (UDP/IP on Ethernet), which has no place on an InfiniBand link; use the rdma-core backend there", ifi.Name)
	}
	if why := info.unusable(); why != "" {
		return nil, noDevice("netdev %s is up but cannot carry traffic (%s)", ifi.Name, why)
	}
	gids := v.gids(l)
	r := &resolved{ifi: ifi, ip: ip, gidIdx: -1, mtu: infiniband.RoCEMTU(info.mtu), loopbak: info.kind == infiniband.NetdevLoopback || ifi.Flags&net.FlagLoopback != 0}
	for _, g := range gids {
		gip, _ := g.GID.IP()
		if v4 := gip.To4(); v4 != nil && (ip == nil || v4.Equal(ip)) {
			r.ip, r.gidIdx = v4, g.Index
			break
		}
	}
	if r.gidIdx < 0 {
		if ip == nil {
			return nil, noDevice("netdev %s has no IPv4 address", ifi.Name)
		}
		return nil, noDevice("address %v not on %s", ip, ifi.Name)
	}
	if r.mtu == 0 {
		return nil, noDevice("netdev %s MTU %d is too small for RoCE", ifi.Name, info.mtu)
	}
	return r, nil
}
