//go:build linux

package rdmacore

import (
	"net/netip"
	"slices"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/infiniband/sysfs"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// sysfsRoot is the root of the sysfs tree that internal/infiniband reads ("/" for the
// running system); tests point it at a fake tree.
var sysfsRoot = "/"

// discover is sysfs.Discover; tests replace it to give IPoIB interfaces
// addresses.
var discover = sysfs.Discover

// gidTable is a port's GID table as sysfs shows it (a copy: the caller
// owns the result).
func gidTable(p *sysfs.Port) []infiniband.GIDEntry {
	if p == nil || len(p.GIDs) == 0 {
		return nil
	}
	return slices.Clone(p.GIDs)
}

// portNetdev is the netdev under a port: the one its first GID entry
// names, else the first the port lists (IPoIB interfaces, whose GID
// entries name none).
func portNetdev(p *sysfs.Port) string {
	if p == nil {
		return ""
	}
	for _, e := range p.GIDs {
		if e.Netdev != "" {
			return e.Netdev
		}
	}
	if len(p.Netdevs) > 0 {
		return p.Netdevs[0]
	}
	return ""
}

// refineMTU combines the active MTU ibv_query_port reports with the one
// sysfs implies. On InfiniBand ibv_query_port's is the truth. On Ethernet
// a UD payload must fit both the device's active MTU (rxe drops longer
// sends) and the path MTU rdma_cm gives RoCE joins, iboe_get_mtu of the
// netdev MTU (infiniband.RoCEMTU): the smaller one wins. 0 means unknown.
func refineMTU(ll infiniband.LinkLayer, active, fromSysfs int) int {
	if ll != infiniband.LinkLayerEthernet || fromSysfs <= 0 {
		return active
	}
	if active <= 0 || fromSysfs < active {
		return fromSysfs
	}
	return active
}

// refinePort fills what sysfs knows of a port into the attributes
// ibv_query_port gave: the GID table with types and netdevs, the netdev
// and, on Ethernet, the path MTU. p may be nil (no sysfs, as in some
// containers): pa is returned as is.
func refinePort(pa verbs.PortAttr, p *sysfs.Port) verbs.PortAttr {
	if p == nil {
		return pa
	}
	pa.GIDs = gidTable(p)
	pa.Netdev = portNetdev(p)
	pa.ActiveMTU = refineMTU(pa.LinkLayer, pa.ActiveMTU, p.ActiveMTU)
	return pa
}

// bindingDetails fills the sysfs side of a binding whose device, port,
// GID, IP, link layer and ibv_query_port MTU are known: the GID's table
// index, type and netdev (sysfs.LookupGID, which stops at the entry), the
// netdev of an InfiniBand binding (the IPoIB interface with the address,
// through sysfs.Discover), and the RoCE path MTU of the netdev.
func bindingDetails(b *verbs.Binding) {
	e, ok, _ := sysfs.LookupGID(sysfsRoot, b.Device, b.Port, b.GID)
	switch {
	case ok:
		b.GIDIndex, b.GIDType, b.Netdev = e.Index, e.Type, e.Netdev
	case b.LinkLayer == infiniband.LinkLayerEthernet:
		b.GIDType = infiniband.GIDTypeRoCEv2
	}
	if b.Netdev == "" && b.IP != nil {
		if sys, err := discover(sysfsRoot); err == nil {
			if ip, ok := netip.AddrFromSlice(b.IP); ok {
				if pb, err := sys.PortForIP(ip.Unmap()); err == nil && pb.Device == b.Device && pb.Port == b.Port {
					b.Netdev = pb.Netdev
				}
			}
		}
	}
	if b.LinkLayer == infiniband.LinkLayerEthernet && b.Netdev != "" {
		if n, err := sysfs.LookupNetdev(sysfsRoot, b.Netdev); err == nil {
			b.MTU = refineMTU(b.LinkLayer, b.MTU, infiniband.RoCEMTU(n.MTU))
		}
	}
}
