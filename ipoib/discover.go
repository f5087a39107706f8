package ipoib

import "github.com/go-rdma/rdmanet/internal/infiniband/sysfs"

// Port is one port of an RDMA device: its state, physical state, link
// layer, active MTU (derived, see MTUFrom), GID table, non-zero P_Keys
// and the netdevs on it.
type Port = sysfs.Port

// Device is an RDMA device as sysfs shows it: name, node type, node GUID,
// whether its transport can do UD multicast (Multicast), and its ports.
type Device = sysfs.Device

// Netdev is a network interface and the RDMA port under it, if any: name,
// index, kind, MTU, operational state, the device and port under it and,
// for IPoIB, the link and broadcast addresses, P_Key, parent and mode.
type Netdev = sysfs.Netdev

// System is what Discover found: the RDMA devices and the network
// interfaces, sorted by name. Its methods Device, Netdev and Port look
// them up by name; InterfaceFor and PortForIP answer "which device, port
// and GID index do I use for ib0 / for 192.168.10.5".
type System = sysfs.System

// Binding is where traffic for an interface or IP address goes in RDMA
// terms: a device, a port and the GID table entry to send from.
type Binding = sysfs.Binding

// ErrNoRDMA is returned (wrapped) when an interface or address has no RDMA
// port under it.
var ErrNoRDMA = sysfs.ErrNoRDMA

// Discover reads the RDMA devices and network interfaces from the sysfs
// under root ("/" for the running system; a directory holding a fake
// sys/class tree for tests). A missing /sys/class/infiniband means no RDMA
// devices, not an error. On the running system the network interfaces
// are the caller's network namespace's. Off Linux the running system has
// no sysfs: root "/" (or "") is an error wrapping rdmanet.ErrUnavailable.
func Discover(root string) (*System, error) {
	if err := needsLinux(root); err != nil {
		return nil, err
	}
	return sysfs.Discover(root)
}

// LookupGID finds gid in the GID table of a device's port under root,
// reading the table only as far as it must: on an Ethernet port the first
// RoCE v2 entry with that GID, else the first entry of any type; on
// InfiniBand the first. GID tables have hundreds of slots, mostly empty
// (rxe has 1024), and each is a file: Discover reads them all, while the
// entry a bound address uses is usually among the first. ok is false when
// the table has no such GID; an error means the port's directory could
// not be read (off Linux, for root "/", one wrapping
// rdmanet.ErrUnavailable).
func LookupGID(root, device string, port int, gid GID) (e GIDEntry, ok bool, err error) {
	if err := needsLinux(root); err != nil {
		return GIDEntry{}, false, err
	}
	return sysfs.LookupGID(root, device, port, gid)
}

// LookupNetdev reads one network interface from the sysfs under root,
// without the RDMA side: Device and Port are left empty (Discover fills
// them). It fails when the interface does not exist (and off Linux, for
// root "/", with an error wrapping rdmanet.ErrUnavailable).
func LookupNetdev(root, name string) (Netdev, error) {
	if err := needsLinux(root); err != nil {
		return Netdev{}, err
	}
	return sysfs.LookupNetdev(root, name)
}
