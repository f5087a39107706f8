package verbs

import "github.com/go-rdma/rdmanet/internal/infiniband"

// The enums sysfs and the verbs share are internal/infiniband's (ipoib exports
// them): one definition, one String for each.
type (
	// LinkLayer is a port's link layer.
	LinkLayer = infiniband.LinkLayer
	// GIDType is the type of a GID table entry.
	GIDType = infiniband.GIDType
	// PortState is a port's logical state (enum ibv_port_state).
	PortState = infiniband.PortState
	// GIDEntry is one entry of a port's GID table.
	GIDEntry = infiniband.GIDEntry
)

const (
	LinkLayerUnspecified = infiniband.LinkLayerUnspecified
	LinkLayerInfiniBand  = infiniband.LinkLayerInfiniBand
	LinkLayerEthernet    = infiniband.LinkLayerEthernet

	GIDTypeIB     = infiniband.GIDTypeIB
	GIDTypeRoCEv1 = infiniband.GIDTypeRoCEv1
	GIDTypeRoCEv2 = infiniband.GIDTypeRoCEv2

	PortNop         = infiniband.PortNop
	PortDown        = infiniband.PortDown
	PortInit        = infiniband.PortInit
	PortArmed       = infiniband.PortArmed
	PortActive      = infiniband.PortActive
	PortActiveDefer = infiniband.PortActiveDefer
)

// PortAttr describes one port of a device.
type PortAttr struct {
	Port      int
	State     PortState
	ActiveMTU int // bytes
	MaxMTU    int // bytes
	LinkLayer LinkLayer
	Netdev    string
	GIDs      []GIDEntry
}

// DeviceAttr describes a device and its ports.
type DeviceAttr struct {
	Name     string
	Provider string // "software" or "rdma-core"
	NodeGUID uint64
	// MaxMcastGroups is max_mcast_grp; 0 means the device cannot do
	// multicast.
	MaxMcastGroups   int
	MaxQPMcastAttach int
	MaxQPWR          int
	Ports            []PortAttr
}

// IBMTU returns the enum ibv_mtu value (1..5) of a byte MTU, or 0.
func IBMTU(bytes int) int {
	switch bytes {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

// MTUBytes returns the byte MTU of an enum ibv_mtu value, or 0.
func MTUBytes(ibmtu int) int {
	if ibmtu < 1 || ibmtu > 5 {
		return 0
	}
	return 128 << ibmtu
}
