package verbs

import (
	"fmt"
	"net"
	"net/netip"
)

// GID is a 128-bit global identifier: a port's address (GID table entry) or
// a multicast group's MGID. On RoCE a GID is an IPv6 address or an
// IPv4-mapped one (::ffff:a.b.c.d).
type GID [16]byte

// GIDFromIP returns the GID of an IP address the way RoCE v2 and rdma_cm
// form it: IPv4 addresses map to ::ffff:a.b.c.d, IPv6 ones are used as is.
func GIDFromIP(ip net.IP) GID {
	var g GID
	copy(g[:], ip.To16())
	return g
}

// IP returns the IP address a RoCE GID carries, and false for a GID that
// carries none (zero, or an InfiniBand GID with a subnet prefix that is not
// an IPv6 address we can tell apart: callers decide by link layer).
func (g GID) IP() (net.IP, bool) {
	if g.IsZero() {
		return nil, false
	}
	ip := make(net.IP, 16)
	copy(ip, g[:])
	if v4 := ip.To4(); v4 != nil {
		return v4, true
	}
	return ip, true
}

// Addr returns the GID as a netip.Addr (IPv4-mapped GIDs unmapped).
func (g GID) Addr() netip.Addr {
	return netip.AddrFrom16(g).Unmap()
}

// IsZero reports whether the GID is all zeros.
func (g GID) IsZero() bool { return g == GID{} }

// IsMulticast reports whether the GID is a multicast GID: ff00::/8, or an
// IPv4-mapped multicast address (RoCE v2's ::ffff:224.0.0.0/100).
func (g GID) IsMulticast() bool {
	if g[0] == 0xff {
		return true
	}
	a := g.Addr()
	return a.Is4() && a.IsMulticast()
}

// String formats the GID as an IPv6 address (::ffff:239.1.2.3 for mapped
// IPv4), as rdma_cm and ibv_devinfo print them.
func (g GID) String() string {
	return netip.AddrFrom16(g).String()
}

// ParseGID parses the colon-hex form (also the 8-group form sysfs prints,
// fe80:0000:0000:0000:...).
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() && !a.Is4() {
		return GID{}, fmt.Errorf("verbs: bad GID %q", s)
	}
	if a.Zone() != "" {
		return GID{}, fmt.Errorf("verbs: bad GID %q: has a zone", s)
	}
	return GID(a.As16()), nil
}
