//go:build linux

package rdmacore

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The addresses rdma_cm is given: the one Bind binds (localAddr) and the
// struct sockaddrs, built in Go, that carry it and the groups Join joins.

// localAddr chooses the address to bind as verbs.BindConfig says: Addr, or
// the first address of Interface (IPv4 unless cfg.IPv6; a global IPv6
// address before a link-local one), or loopback. Never the default
// route's interface. zone is the interface index for a link-local IPv6
// address, else 0.
func localAddr(cfg verbs.BindConfig) (ip net.IP, zone uint32, err error) {
	if cfg.Addr != nil {
		ip = cfg.Addr
		if ip.To4() == nil && ip.IsLinkLocalUnicast() && cfg.Interface != nil {
			zone = uint32(cfg.Interface.Index)
		}
		return ip, zone, nil
	}
	if cfg.Interface != nil {
		addrs, err := cfg.Interface.Addrs()
		if err != nil {
			return nil, 0, fmt.Errorf("rdmacore: addresses of %s: %w", cfg.Interface.Name, err)
		}
		var linkLocal net.IP
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			is4 := n.IP.To4() != nil
			if is4 == cfg.IPv6 {
				continue
			}
			if !is4 && n.IP.IsLinkLocalUnicast() {
				if linkLocal == nil {
					linkLocal = n.IP
				}
				continue
			}
			return n.IP, 0, nil
		}
		if linkLocal != nil {
			return linkLocal, uint32(cfg.Interface.Index), nil
		}
		fam := "IPv4"
		if cfg.IPv6 {
			fam = "IPv6"
		}
		return nil, 0, verbs.NoDevicef("rdmacore: interface %s has no %s address", cfg.Interface.Name, fam)
	}
	if cfg.IPv6 {
		return net.IPv6loopback, 0, nil
	}
	return net.IPv4(127, 0, 0, 1).To4(), 0, nil
}

// sockaddr is a struct sockaddr_storage built in Go (8-byte aligned).
type sockaddr struct {
	_ [0]uint64
	b [128]byte
}

const (
	afInet  = 2
	afInet6 = 10
	afIB    = 27
)

// sockaddrIP fills a sockaddr_in or sockaddr_in6 (port 0).
func sockaddrIP(ip net.IP, zone uint32) sockaddr {
	var sa sockaddr
	if v4 := ip.To4(); v4 != nil {
		binary.NativeEndian.PutUint16(sa.b[0:], afInet)
		copy(sa.b[4:8], v4)
		return sa
	}
	binary.NativeEndian.PutUint16(sa.b[0:], afInet6)
	copy(sa.b[8:24], ip.To16())
	binary.NativeEndian.PutUint32(sa.b[24:], zone)
	return sa
}

// sockaddrIB fills a sockaddr_ib carrying a raw MGID, as mckey -M does.
func sockaddrIB(mgid verbs.GID) sockaddr {
	var sa sockaddr
	binary.NativeEndian.PutUint16(sa.b[0:], afIB)
	copy(sa.b[8:24], mgid[:])
	return sa
}

// groupSockaddr is the address rdma_join_multicast gets for a group: the
// IP group as sockaddr_in/in6; a raw MGID as sockaddr_in when it is an
// IPv4-mapped one (RoCE v2 can only join those), as sockaddr_ib on
// InfiniBand (mckey -M), else as sockaddr_in6.
func groupSockaddr(g verbs.Group, ll infiniband.LinkLayer) (sockaddr, error) {
	if !g.MGID.IsZero() {
		if a := g.MGID.Addr(); a.Is4() {
			return sockaddrIP(net.IP(a.AsSlice()), 0), nil
		}
		if ll == infiniband.LinkLayerInfiniBand {
			return sockaddrIB(g.MGID), nil
		}
		return sockaddrIP(net.IP(g.MGID[:]), 0), nil
	}
	if g.IP == nil || !g.IP.IsMulticast() {
		return sockaddr{}, fmt.Errorf("rdmacore: %v is not a multicast group address", g.IP)
	}
	return sockaddrIP(g.IP, 0), nil
}

// groupIsIPv6 reports whether a join would use an IPv6 address (not
// supported by rdma_cm on RoCE v2).
func groupIsIPv6(g verbs.Group) bool {
	if !g.MGID.IsZero() {
		return !g.MGID.Addr().Is4()
	}
	return g.IP.To4() == nil
}
