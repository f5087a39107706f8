package infiniband

import (
	"fmt"
	"net"
	"net/netip"
)

// GID is a 128-bit InfiniBand global identifier: a port's address (one
// entry of its GID table) or, for a multicast group, its MGID. On RoCE a
// GID is an IPv6 address, or an IPv4 address mapped as ::ffff:a.b.c.d.
type GID [16]byte

// MGID is a multicast GID: the name of an InfiniBand or RoCE multicast
// group, what a UD queue pair is attached to. It is a GID (the same type),
// so an MGID goes wherever a GID does (an address handle's DGID, a map
// key) with no conversion; its methods read the fields of the IB forms.
type MGID = GID

// MulticastQPN is the QPN of multicast and broadcast addresses: the
// destination QP of every multicast send.
const MulticastQPN = 0xffffff

// ParseGID parses a GID in colon-hex form: the compressed form
// (fe80::2:c903:0:1b41), the eight-group form sysfs prints
// (fe80:0000:0000:0000:0002:c903:0000:1b41), or an IPv4-mapped form
// (::ffff:10.99.0.1). A bare IPv4 address is not a GID and is rejected.
func ParseGID(s string) (GID, error) {
	b, err := parse128(s)
	if err != nil {
		return GID{}, fmt.Errorf("ipoib: bad GID %q: %v", s, err)
	}
	return GID(b), nil
}

// ParseMGID parses an MGID in the same forms as ParseGID.
func ParseMGID(s string) (MGID, error) {
	b, err := parse128(s)
	if err != nil {
		return MGID{}, fmt.Errorf("ipoib: bad MGID %q: %v", s, err)
	}
	return MGID(b), nil
}

func parse128(s string) ([16]byte, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return [16]byte{}, errNotColonHex
	case !a.Is6():
		return [16]byte{}, errNotColonHex
	case a.Zone() != "":
		return [16]byte{}, errZone
	}
	return a.As16(), nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

const (
	errNotColonHex = parseError("want colon-hex form, such as ff12:401b:ffff::1")
	errZone        = parseError("a GID has no zone")
)

// GIDFromIP returns the GID a RoCE v2 port has for an IP address: IPv4
// maps to ::ffff:a.b.c.d, IPv6 is used as is.
func GIDFromIP(ip netip.Addr) GID { return GID(ip.As16()) }

// GIDFromNetIP is GIDFromIP for a net.IP (the zero GID for an invalid
// one), as the verbs model's bindings carry them.
func GIDFromNetIP(ip net.IP) GID {
	var g GID
	copy(g[:], ip.To16())
	return g
}

// String returns the compressed colon-hex form, as rdma_cm and
// ibv_devinfo print it (fe80::2:c903:0:1b41; ::ffff:10.99.0.1 for an
// IPv4-mapped GID, ff12:401b:ffff::f01:203 for an IPoIB group).
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// StringExpanded returns the eight-group form that sysfs and ibv_devinfo
// print (fe80:0000:0000:0000:0002:c903:0000:1b41).
func (g GID) StringExpanded() string { return netip.AddrFrom16(g).StringExpanded() }

// Addr returns the GID as an IP address, IPv4-mapped GIDs unmapped.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IP returns the IP address a RoCE GID carries (IPv4 for an IPv4-mapped
// GID), and false for the zero GID. An InfiniBand GID reads as an IPv6
// address too: callers decide by link layer.
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

// IsZero reports whether the GID is all zeros: an unused GID table entry,
// or the MGID rdma_cm asks the subnet administrator to assign.
func (g GID) IsZero() bool { return g == GID{} }

// IsMulticast reports whether g can name a multicast group: ff00::/8, or
// an IPv4-mapped multicast address (RoCE v2's ::ffff:224.0.0.0/100), as
// the kernel's rdma_is_multicast_addr decides.
//
// It reads the bytes (ten zero bytes, 0xffff, then 1110 in the top nibble
// of the IPv4 address), as the send path asks it of every *Addr.
func (g GID) IsMulticast() bool {
	if g[0] == 0xff {
		return true
	}
	return g[0]|g[1]|g[2]|g[3]|g[4]|g[5]|g[6]|g[7]|g[8]|g[9] == 0 &&
		g[10] == 0xff && g[11] == 0xff && g[12]&0xf0 == 0xe0
}

// Scope returns the IPoIB scope nibble of an MGID (the low four bits of
// byte 1). It is meaningful for IPoIB and rdma_cm MGIDs (ff1S:...).
func (g GID) Scope() Scope { return Scope(g[1] & 0x0f) }

// PKey returns the P_Key field of an IPoIB or rdma_cm MGID (bytes 4-5).
func (g GID) PKey() uint16 { return uint16(g[4])<<8 | uint16(g[5]) }

// Signature returns bytes 2-3 of an IB MGID: 0x401b for IPoIB IPv4,
// 0x601b IPoIB IPv6, 0x4001 and 0x6001 for rdma_cm's RDMA_PS_UDP,
// 0xa01b for an MGID the subnet administrator assigned.
func (g GID) Signature() uint16 { return uint16(g[2])<<8 | uint16(g[3]) }
