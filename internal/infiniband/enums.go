package infiniband

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = iota
	LinkLayerInfiniBand
	LinkLayerEthernet
)

func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "unspecified"
}

// GIDType is the type of a GID table entry (IBV_GID_TYPE_* order).
type GIDType uint8

// GID types.
const (
	GIDTypeIB GIDType = iota
	GIDTypeRoCEv1
	GIDTypeRoCEv2
	// GIDTypeUnknown is a GID whose type sysfs does not give, such as an
	// iWARP device's.
	GIDTypeUnknown GIDType = 0xff
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "unknown"
}

// PortState is a port's logical state (enum ib_port_state; the number
// sysfs prints before the name).
type PortState uint8

// Port states.
const (
	PortNop PortState = iota
	PortDown
	PortInit
	PortArmed
	PortActive
	PortActiveDefer
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	case PortActiveDefer:
		return "ACTIVE_DEFER"
	}
	return "NOP"
}

// NodeType is an RDMA device's node type (enum rdma_node_type; sysfs
// node_type prints "1: CA").
type NodeType uint8

// Node types.
const (
	NodeCA          NodeType = 1 // InfiniBand channel adapter; RoCE NICs too
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4 // iWARP
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

func (n NodeType) String() string {
	switch n {
	case NodeCA:
		return "CA"
	case NodeSwitch:
		return "switch"
	case NodeRouter:
		return "router"
	case NodeRNIC:
		return "RNIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	}
	return "unspecified"
}

// NetdevKind says what a network interface is to RDMA.
type NetdevKind uint8

// Netdev kinds, from /sys/class/net/X/type (ARPHRD_*).
const (
	NetdevOther    NetdevKind = iota
	NetdevEthernet            // ARPHRD_ETHER (1)
	NetdevIPoIB               // ARPHRD_INFINIBAND (32)
	NetdevLoopback            // ARPHRD_LOOPBACK (772)
)

func (k NetdevKind) String() string {
	switch k {
	case NetdevEthernet:
		return "Ethernet"
	case NetdevIPoIB:
		return "IPoIB"
	case NetdevLoopback:
		return "loopback"
	}
	return "other"
}

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	Index  int
	GID    GID
	Type   GIDType
	Netdev string // gid_attrs/ndevs; empty on InfiniBand
}
