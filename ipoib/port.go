package ipoib

import "github.com/go-rdma/rdmanet/internal/infiniband"

// The enums of sysfs and the verbs, one definition each (the verbs layer
// uses the same types).

// LinkLayer is a port's link layer.
type LinkLayer = infiniband.LinkLayer

// Link layers.
const (
	LinkLayerUnspecified = infiniband.LinkLayerUnspecified
	LinkLayerInfiniBand  = infiniband.LinkLayerInfiniBand
	LinkLayerEthernet    = infiniband.LinkLayerEthernet
)

// GIDType is the type of a GID table entry.
type GIDType = infiniband.GIDType

// GID types.
const (
	GIDTypeIB     = infiniband.GIDTypeIB
	GIDTypeRoCEv1 = infiniband.GIDTypeRoCEv1
	GIDTypeRoCEv2 = infiniband.GIDTypeRoCEv2
	// GIDTypeUnknown is a GID whose type sysfs does not give, such as an
	// iWARP device's.
	GIDTypeUnknown = infiniband.GIDTypeUnknown
)

// PortState is a port's logical state (enum ib_port_state; the number
// sysfs prints before the name).
type PortState = infiniband.PortState

// Port states.
const (
	PortNop         = infiniband.PortNop
	PortDown        = infiniband.PortDown
	PortInit        = infiniband.PortInit
	PortArmed       = infiniband.PortArmed
	PortActive      = infiniband.PortActive
	PortActiveDefer = infiniband.PortActiveDefer
)

// NodeType is an RDMA device's node type (enum rdma_node_type; sysfs
// node_type prints "1: CA").
type NodeType = infiniband.NodeType

// Node types.
const (
	NodeCA          = infiniband.NodeCA // InfiniBand channel adapter; RoCE NICs too
	NodeSwitch      = infiniband.NodeSwitch
	NodeRouter      = infiniband.NodeRouter
	NodeRNIC        = infiniband.NodeRNIC // iWARP
	NodeUSNIC       = infiniband.NodeUSNIC
	NodeUSNICUDP    = infiniband.NodeUSNICUDP
	NodeUnspecified = infiniband.NodeUnspecified
)

// NetdevKind says what a network interface is to RDMA.
type NetdevKind = infiniband.NetdevKind

// Netdev kinds, from /sys/class/net/X/type (ARPHRD_*).
const (
	NetdevOther    = infiniband.NetdevOther
	NetdevEthernet = infiniband.NetdevEthernet // ARPHRD_ETHER (1)
	NetdevIPoIB    = infiniband.NetdevIPoIB    // ARPHRD_INFINIBAND (32)
	NetdevLoopback = infiniband.NetdevLoopback // ARPHRD_LOOPBACK (772)
)

// GIDEntry is one valid entry of a port's GID table: index, GID, type
// and (on RoCE) the netdev of gid_attrs/ndevs.
type GIDEntry = infiniband.GIDEntry

// RoCEMTU is the path MTU RoCE uses over a netdev of MTU netdevMTU, as the
// kernel's iboe_get_mtu computes it (the MTU rdma_cm puts in RoCE path
// records and multicast joins): the netdev MTU less the RoCE headers (GRH
// 40, UDP 8, BTH 12, the largest extended header 28, ICRC 4, XRC 4),
// rounded down to an IB MTU. 1500 gives 1024, 9000 and loopback's 65536
// give 4096; below 352 it is 0.
func RoCEMTU(netdevMTU int) int { return infiniband.RoCEMTU(netdevMTU) }
