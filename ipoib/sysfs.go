package ipoib

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// Port is one port of an RDMA device.
type Port struct {
	Device    string
	Port      int
	State     PortState
	PhysState string // "LinkUp", "Disabled", ...
	LinkLayer LinkLayer
	// ActiveMTU is the path MTU in bytes, 0 when unknown. sysfs has no
	// active_mtu (that is ibv_query_port's), so it is derived: on
	// Ethernet from the netdev's MTU as the kernel's iboe_get_mtu does
	// (the MTU rdma_cm puts in RoCE path records; 1500 gives 1024), on
	// InfiniBand from a datagram-mode IPoIB interface (its MTU is the
	// IB MTU less the 4-byte IPoIB header). MTUFrom says which netdev.
	ActiveMTU int
	MTUFrom   string
	GIDs      []GIDEntry
	PKeys     []uint16 // the non-zero P_Key table entries
	Netdevs   []string // the netdevs on this port, sorted
}

// Device is an RDMA device as sysfs shows it.
type Device struct {
	Name     string
	NodeType NodeType
	NodeGUID uint64
	// Multicast reports whether the device's transport can do UD
	// multicast at all: InfiniBand and RoCE can, iWARP and usNIC
	// cannot (rdma_cm's join returns ENOSYS there). sysfs does not show
	// max_mcast_grp: a backend that has called ibv_query_device should
	// clear Multicast when max_mcast_grp is 0.
	Multicast bool
	Ports     []Port
}

// Netdev is a network interface and the RDMA port under it, if any.
type Netdev struct {
	Name      string
	Index     int
	Kind      NetdevKind
	ARPHRD    int // /sys/class/net/X/type
	MTU       int
	OperState string // "up", "down", ...
	// Device and Port are the RDMA device and port under the interface,
	// "" and 0 when none.
	Device string
	Port   int
	// For IPoIB interfaces: the hardware and broadcast addresses, the
	// P_Key (full-member bit included, as the kernel keeps it), the
	// parent of a child interface (ib0.8001's is ib0), and the mode
	// ("datagram" or "connected").
	LinkAddr  LinkAddr
	Broadcast LinkAddr
	PKey      uint16
	Parent    string
	Mode      string
}

// System is what Discover found: the RDMA devices and the network
// interfaces, sorted by name.
type System struct {
	Root    string
	Devices []Device
	Netdevs []Netdev
	// InterfaceAddrs returns the IP addresses of a network interface;
	// PortForIP uses it for IPoIB interfaces. Discover sets it to a
	// function that asks the kernel (net.InterfaceByName); tests may
	// replace it.
	InterfaceAddrs func(netdev string) ([]netip.Addr, error)
}

// Discover reads the RDMA devices and network interfaces from the sysfs
// under root ("/" for the running system; a directory holding a fake
// sys/class tree for tests). A missing /sys/class/infiniband means no RDMA
// devices, not an error.
func Discover(root string) (*System, error) {
	if root == "" {
		root = "/"
	}
	s := &System{Root: root, InterfaceAddrs: kernelAddrs}
	var err error
	if s.Netdevs, err = readNetdevs(filepath.Join(root, "sys/class/net")); err != nil {
		return nil, err
	}
	if s.Devices, err = readDevices(filepath.Join(root, "sys/class/infiniband")); err != nil {
		return nil, err
	}
	s.link()
	return s, nil
}

// Device returns the named RDMA device, or nil.
func (s *System) Device(name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

// Netdev returns the named network interface, or nil.
func (s *System) Netdev(name string) *Netdev {
	for i := range s.Netdevs {
		if s.Netdevs[i].Name == name {
			return &s.Netdevs[i]
		}
	}
	return nil
}

// Port returns a port of a device, or nil.
func (s *System) Port(device string, port int) *Port {
	d := s.Device(device)
	if d == nil {
		return nil
	}
	for i := range d.Ports {
		if d.Ports[i].Port == port {
			return &d.Ports[i]
		}
	}
	return nil
}

// Binding is where traffic for an interface or IP address goes in RDMA
// terms: a device, a port and the GID table entry to send from.
type Binding struct {
	Device   string
	Port     int
	GIDIndex int // -1 when the port has no suitable GID
	GID      GID
	GIDType  GIDType
	Netdev   string
}

// ErrNoRDMA is returned (wrapped) when an interface or address has no RDMA
// port under it.
var ErrNoRDMA = errors.New("no RDMA port")

// InterfaceFor returns the RDMA port under a network interface. For IPoIB
// the GID is the port GID (index 0); for RoCE it is the first RoCE v2
// entry of the netdev with an IPv4 address, else its first RoCE v2 entry,
// else its first entry.
func (s *System) InterfaceFor(netdev string) (Binding, error) {
	n := s.Netdev(netdev)
	if n == nil {
		return Binding{}, fmt.Errorf("ipoib: no network interface %q", netdev)
	}
	if n.Device == "" {
		return Binding{}, fmt.Errorf("ipoib: interface %s: %w", netdev, ErrNoRDMA)
	}
	b := Binding{Device: n.Device, Port: n.Port, GIDIndex: -1, Netdev: n.Name}
	p := s.Port(n.Device, n.Port)
	if p == nil {
		return b, nil
	}
	best := -1
	rank := func(e GIDEntry) int {
		switch {
		case n.Kind == NetdevIPoIB:
			if e.Index == 0 {
				return 4
			}
			return 0
		case e.Netdev != n.Name:
			return 0
		case e.Type == GIDTypeRoCEv2 && e.GID.Addr().Is4():
			return 3
		case e.Type == GIDTypeRoCEv2:
			return 2
		}
		return 1
	}
	for i, e := range p.GIDs {
		if r := rank(e); r > 0 && (best < 0 || r > rank(p.GIDs[best])) {
			best = i
		}
	}
	if best >= 0 {
		e := p.GIDs[best]
		b.GIDIndex, b.GID, b.GIDType = e.Index, e.GID, e.Type
	}
	return b, nil
}

// PortForIP returns the RDMA port that carries a local IP address: the
// GID table entry equal to the address (RoCE; a RoCE v2 entry preferred),
// or else the IPoIB interface that has the address (asked through
// InterfaceAddrs).
func (s *System) PortForIP(ip netip.Addr) (Binding, error) {
	ip = ip.Unmap().WithZone("")
	g := GIDFromIP(ip)
	var found *Binding
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			for _, e := range p.GIDs {
				if e.GID != g || p.LinkLayer != LinkLayerEthernet {
					continue
				}
				b := Binding{d.Name, p.Port, e.Index, e.GID, e.Type, e.Netdev}
				if e.Type == GIDTypeRoCEv2 {
					return b, nil
				}
				if found == nil {
					found = &b
				}
			}
		}
	}
	if found != nil {
		return *found, nil
	}
	addrs := s.InterfaceAddrs
	if addrs == nil {
		addrs = kernelAddrs
	}
	for _, n := range s.Netdevs {
		if n.Kind != NetdevIPoIB || n.Device == "" {
			continue
		}
		as, err := addrs(n.Name)
		if err != nil {
			continue // the interface went away or has no addresses
		}
		for _, a := range as {
			if a.Unmap().WithZone("") == ip {
				return s.InterfaceFor(n.Name)
			}
		}
	}
	return Binding{}, fmt.Errorf("ipoib: address %s: %w", ip, ErrNoRDMA)
}

func kernelAddrs(name string) ([]netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// link fills the cross references: netdev -> device/port (from the GID
// tables, else the netdev's device/infiniband directory and dev_port), port
// -> netdevs, and the derived port MTU.
func (s *System) link() {
	for di := range s.Devices {
		d := &s.Devices[di]
		for pi := range d.Ports {
			p := &d.Ports[pi]
			for _, e := range p.GIDs {
				if n := s.Netdev(e.Netdev); n != nil && n.Device == "" {
					n.Device, n.Port = d.Name, p.Port
				}
			}
		}
	}
	for ni := range s.Netdevs {
		n := &s.Netdevs[ni]
		if n.Device != "" {
			continue
		}
		dev, port := n.fallbackDevice(s.Root)
		if dev == "" && n.Parent != "" {
			if parent := s.Netdev(n.Parent); parent != nil {
				dev, port = parent.fallbackDevice(s.Root)
			}
		}
		if s.Port(dev, port) != nil {
			n.Device, n.Port = dev, port
		}
	}
	for _, n := range s.Netdevs {
		if p := s.Port(n.Device, n.Port); p != nil {
			p.Netdevs = append(p.Netdevs, n.Name)
		}
	}
	for di := range s.Devices {
		for pi := range s.Devices[di].Ports {
			s.derivePortMTU(&s.Devices[di].Ports[pi])
		}
	}
}

func (n *Netdev) fallbackDevice(root string) (string, int) {
	dir := filepath.Join(root, "sys/class/net", n.Name)
	ents, err := os.ReadDir(filepath.Join(dir, "device", "infiniband"))
	if err != nil || len(ents) == 0 {
		return "", 0
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	// dev_port (decimal) is the 0-based port; older kernels used dev_id
	// (hex) for it.
	port := 1
	if v, ok := readTrim(filepath.Join(dir, "dev_port")); ok {
		if i, err := strconv.Atoi(v); err == nil {
			port = i + 1
		}
	}
	if port == 1 {
		if v, ok := readTrim(filepath.Join(dir, "dev_id")); ok {
			if i, err := strconv.ParseInt(v, 0, 32); err == nil {
				port = int(i) + 1
			}
		}
	}
	return names[0], port
}

func (s *System) derivePortMTU(p *Port) {
	switch p.LinkLayer {
	case LinkLayerEthernet:
		var names []string
		for _, e := range p.GIDs {
			if e.Netdev != "" {
				names = append(names, e.Netdev)
			}
		}
		names = append(names, p.Netdevs...)
		for _, name := range names {
			if n := s.Netdev(name); n != nil && n.MTU > 0 {
				p.ActiveMTU, p.MTUFrom = infiniband.RoCEMTU(n.MTU), name
				return
			}
		}
	case LinkLayerInfiniBand:
		for _, name := range p.Netdevs {
			if n := s.Netdev(name); n != nil && n.Kind == NetdevIPoIB && n.Mode == "datagram" && n.MTU > 0 {
				p.ActiveMTU, p.MTUFrom = infiniband.FloorIBMTU(n.MTU+4), name
				return
			}
		}
	}
}

// readTrim reads a small sysfs file. A file that does not exist or that
// the kernel refuses to read (EINVAL, as empty GID attribute entries do)
// reports ok == false.
func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENODEV)
}

func listDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// numbered lists the numeric entries of a directory, in numeric order.
func numbered(dir string) ([]int, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out, nil
}

func readDevices(dir string) ([]Device, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ipoib: %w", err)
	}
	var out []Device
	for _, name := range names {
		d, err := readDevice(filepath.Join(dir, name), name)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func readDevice(dir, name string) (Device, error) {
	d := Device{Name: name, NodeType: NodeCA}
	if v, ok := readTrim(filepath.Join(dir, "node_type")); ok {
		n, _, err := numberColonName(v)
		if err != nil {
			return d, fmt.Errorf("ipoib: %s/node_type: %v", dir, err)
		}
		d.NodeType = NodeType(n)
	}
	if v, ok := readTrim(filepath.Join(dir, "node_guid")); ok {
		g, err := strconv.ParseUint(strings.ReplaceAll(v, ":", ""), 16, 64)
		if err != nil {
			return d, fmt.Errorf("ipoib: %s/node_guid: bad GUID %q", dir, v)
		}
		d.NodeGUID = g
	}
	d.Multicast = d.NodeType == NodeCA
	ports, err := numbered(filepath.Join(dir, "ports"))
	if err != nil {
		return d, fmt.Errorf("ipoib: %w", err)
	}
	for _, pn := range ports {
		p, err := readPort(filepath.Join(dir, "ports", strconv.Itoa(pn)), name, pn, d.NodeType)
		if err != nil {
			return d, err
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

// numberColonName parses "4: ACTIVE" (state, phys_state, node_type).
func numberColonName(v string) (int, string, error) {
	num, name, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil || n < 0 || n > 255 {
		return 0, "", fmt.Errorf("want \"N: NAME\", have %q", v)
	}
	return n, strings.TrimSpace(name), nil
}

func readPort(dir, device string, num int, node NodeType) (Port, error) {
	p := Port{Device: device, Port: num}
	if v, ok := readTrim(filepath.Join(dir, "state")); ok {
		n, _, err := numberColonName(v)
		if err != nil {
			return p, fmt.Errorf("ipoib: %s/state: %v", dir, err)
		}
		p.State = PortState(n)
	}
	if v, ok := readTrim(filepath.Join(dir, "phys_state")); ok {
		if _, name, err := numberColonName(v); err == nil {
			p.PhysState = name
		}
	}
	if v, ok := readTrim(filepath.Join(dir, "link_layer")); ok {
		switch v {
		case "InfiniBand":
			p.LinkLayer = LinkLayerInfiniBand
		case "Ethernet":
			p.LinkLayer = LinkLayerEthernet
		}
	}
	idx, err := numbered(filepath.Join(dir, "gids"))
	if err != nil {
		return p, fmt.Errorf("ipoib: %w", err)
	}
	for _, i := range idx {
		e, ok, err := readGIDEntry(dir, i, p.LinkLayer, node)
		if err != nil {
			return p, err
		}
		if ok {
			p.GIDs = append(p.GIDs, e)
		}
	}
	idx, err = numbered(filepath.Join(dir, "pkeys"))
	if err != nil {
		return p, fmt.Errorf("ipoib: %w", err)
	}
	for _, i := range idx {
		v, ok := readTrim(filepath.Join(dir, "pkeys", strconv.Itoa(i)))
		if !ok {
			continue
		}
		k, err := strconv.ParseUint(v, 0, 16)
		if err != nil {
			return p, fmt.Errorf("ipoib: %s/pkeys/%d: bad P_Key %q", dir, i, v)
		}
		if k != 0 {
			p.PKeys = append(p.PKeys, uint16(k))
		}
	}
	return p, nil
}

// readGIDEntry reads entry i of the GID table of the port directory dir.
// ok is false for an unused (zero or unreadable) entry.
func readGIDEntry(dir string, i int, ll LinkLayer, node NodeType) (e GIDEntry, ok bool, err error) {
	si := strconv.Itoa(i)
	v, ok := readTrim(filepath.Join(dir, "gids", si))
	if !ok {
		return e, false, nil
	}
	g, err := ParseGID(v)
	if err != nil {
		return e, false, fmt.Errorf("ipoib: %s/gids/%d: %v", dir, i, err)
	}
	if g.IsZero() {
		return e, false, nil // an unused entry
	}
	e = GIDEntry{Index: i, GID: g}
	t, typed := readTrim(filepath.Join(dir, "gid_attrs", "types", si))
	switch {
	case !typed && node != NodeCA:
		e.Type = GIDTypeUnknown
	case t == "RoCE v2":
		e.Type = GIDTypeRoCEv2
	case ll == LinkLayerEthernet:
		e.Type = GIDTypeRoCEv1 // "IB/RoCE v1" on an Ethernet port
	default:
		e.Type = GIDTypeIB
	}
	e.Netdev, _ = readTrim(filepath.Join(dir, "gid_attrs", "ndevs", si))
	return e, true, nil
}

// LookupGID finds gid in the GID table of a device's port under root,
// reading the table only as far as it must: on an Ethernet port the first
// RoCE v2 entry with that GID, else the first entry of any type; on
// InfiniBand the first. GID tables have hundreds of slots, mostly empty
// (rxe has 1024), and each is a file: Discover reads them all, which costs
// a slow machine a second or more, while the entry a bound address uses
// is usually among the first. ok is false when the table has no such
// GID; an error means the port's directory could not be read.
func LookupGID(root, device string, port int, gid GID) (e GIDEntry, ok bool, err error) {
	if root == "" {
		root = "/"
	}
	ddir := filepath.Join(root, "sys/class/infiniband", device)
	node := NodeCA
	if v, found := readTrim(filepath.Join(ddir, "node_type")); found {
		if n, _, err := numberColonName(v); err == nil {
			node = NodeType(n)
		}
	}
	dir := filepath.Join(ddir, "ports", strconv.Itoa(port))
	var ll LinkLayer
	switch v, _ := readTrim(filepath.Join(dir, "link_layer")); v {
	case "InfiniBand":
		ll = LinkLayerInfiniBand
	case "Ethernet":
		ll = LinkLayerEthernet
	}
	idx, err := numbered(filepath.Join(dir, "gids"))
	if err != nil {
		return e, false, fmt.Errorf("ipoib: %w", err)
	}
	if idx == nil {
		return e, false, fmt.Errorf("ipoib: %s port %d: no GID table in %s", device, port, dir)
	}
	for _, i := range idx {
		ent, valid, err := readGIDEntry(dir, i, ll, node)
		if err != nil {
			return e, false, err
		}
		if !valid || ent.GID != gid {
			continue
		}
		if !ok {
			e, ok = ent, true
		}
		if ll != LinkLayerEthernet || ent.Type == GIDTypeRoCEv2 {
			return ent, true, nil
		}
	}
	return e, ok, nil
}

// LookupNetdev reads one network interface from the sysfs under root,
// without the RDMA side: Device and Port are left empty (Discover fills
// them). It fails when the interface does not exist.
func LookupNetdev(root, name string) (Netdev, error) {
	if root == "" {
		root = "/"
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return Netdev{}, fmt.Errorf("ipoib: bad interface name %q", name)
	}
	dir := filepath.Join(root, "sys/class/net", name)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Netdev{}, fmt.Errorf("ipoib: no network interface %q", name)
	}
	return readNetdev(dir, name)
}

// ARPHRD values of /sys/class/net/X/type.
const (
	arphrdEther      = 1
	arphrdInfiniBand = 32
	arphrdLoopback   = 772
)

func readNetdevs(dir string) ([]Netdev, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ipoib: %w", err)
	}
	var out []Netdev
	for _, name := range names {
		// Not every entry is an interface: bonding adds a
		// bonding_masters file.
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			continue
		}
		n, err := readNetdev(filepath.Join(dir, name), name)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func readNetdev(dir, name string) (Netdev, error) {
	n := Netdev{Name: name}
	num := func(file string) (int, error) {
		v, ok := readTrim(filepath.Join(dir, file))
		if !ok {
			return 0, nil
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("ipoib: %s/%s: want a number, have %q", dir, file, v)
		}
		return i, nil
	}
	var err error
	if n.Index, err = num("ifindex"); err != nil {
		return n, err
	}
	if n.MTU, err = num("mtu"); err != nil {
		return n, err
	}
	if n.ARPHRD, err = num("type"); err != nil {
		return n, err
	}
	switch n.ARPHRD {
	case arphrdEther:
		n.Kind = NetdevEthernet
	case arphrdInfiniBand:
		n.Kind = NetdevIPoIB
	case arphrdLoopback:
		n.Kind = NetdevLoopback
	}
	n.OperState, _ = readTrim(filepath.Join(dir, "operstate"))
	if n.Kind != NetdevIPoIB {
		return n, nil
	}
	for file, dst := range map[string]*LinkAddr{"address": &n.LinkAddr, "broadcast": &n.Broadcast} {
		if v, ok := readTrim(filepath.Join(dir, file)); ok {
			if *dst, err = ParseLinkAddr(v); err != nil {
				return n, fmt.Errorf("%s/%s: %w", dir, file, err)
			}
		}
	}
	if v, ok := readTrim(filepath.Join(dir, "pkey")); ok {
		k, err := strconv.ParseUint(v, 0, 16)
		if err != nil {
			return n, fmt.Errorf("ipoib: %s/pkey: bad P_Key %q", dir, v)
		}
		n.PKey = uint16(k)
	} else {
		n.PKey = n.Broadcast.MGID().PKey()
	}
	n.Parent, _ = readTrim(filepath.Join(dir, "parent"))
	n.Mode, _ = readTrim(filepath.Join(dir, "mode"))
	return n, nil
}
