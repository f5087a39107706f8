package verbs

import "github.com/go-rdma/rdmanet/internal/infiniband"

// PortAttr describes one port of a device.
type PortAttr struct {
	Port      int
	State     infiniband.PortState
	ActiveMTU int // bytes
	MaxMTU    int // bytes
	LinkLayer infiniband.LinkLayer
	Netdev    string
	GIDs      []infiniband.GIDEntry
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
