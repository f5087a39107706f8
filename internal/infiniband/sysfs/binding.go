package sysfs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// Binding is where traffic for an interface or IP address goes in RDMA
// terms: a device, a port and the GID table entry to send from.
type Binding struct {
	Device   string
	Port     int
	GIDIndex int // -1 when the port has no suitable GID
	GID      infiniband.GID
	GIDType  infiniband.GIDType
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
	rank := func(e infiniband.GIDEntry) int {
		switch {
		case n.Kind == infiniband.NetdevIPoIB:
			if e.Index == 0 {
				return 4
			}
			return 0
		case e.Netdev != n.Name:
			return 0
		case e.Type == infiniband.GIDTypeRoCEv2 && e.GID.Addr().Is4():
			return 3
		case e.Type == infiniband.GIDTypeRoCEv2:
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
	g := infiniband.GIDFromIP(ip)
	var found *Binding
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			for _, e := range p.GIDs {
				if e.GID != g || p.LinkLayer != infiniband.LinkLayerEthernet {
					continue
				}
				b := Binding{d.Name, p.Port, e.Index, e.GID, e.Type, e.Netdev}
				if e.Type == infiniband.GIDTypeRoCEv2 {
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
		if n.Kind != infiniband.NetdevIPoIB || n.Device == "" {
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
