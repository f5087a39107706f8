package sysfs

import "github.com/go-rdma/rdmanet/internal/infiniband"

// Port is one port of an RDMA device.
type Port struct {
	Device    string
	Port      int
	State     infiniband.PortState
	PhysState string // "LinkUp", "Disabled", ...
	LinkLayer infiniband.LinkLayer
	// ActiveMTU is the path MTU in bytes, 0 when unknown. sysfs has no
	// active_mtu (that is ibv_query_port's), so it is derived: on
	// Ethernet from the netdev's MTU as the kernel's iboe_get_mtu does
	// (the MTU rdma_cm puts in RoCE path records; 1500 gives 1024), on
	// InfiniBand from a datagram-mode IPoIB interface (its MTU is the
	// IB MTU less the 4-byte IPoIB header). MTUFrom says which netdev.
	ActiveMTU int
	MTUFrom   string
	GIDs      []infiniband.GIDEntry
	PKeys     []uint16 // the non-zero P_Key table entries
	Netdevs   []string // the netdevs on this port, sorted
}

// Device is an RDMA device as sysfs shows it.
type Device struct {
	Name     string
	NodeType infiniband.NodeType
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
	Kind      infiniband.NetdevKind
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
	LinkAddr  infiniband.LinkAddr
	Broadcast infiniband.LinkAddr
	PKey      uint16
	Parent    string
	Mode      string
}
