package ipoib

import (
	"fmt"
	"net/netip"
)

// GID is a 128-bit InfiniBand global identifier: a port's address, one
// entry of its GID table. On RoCE a GID is an IPv6 address, or an IPv4
// address mapped as ::ffff:a.b.c.d.
//
// GID has the same underlying type as the verbs layer's GID, so converting
// between them is a plain type conversion.
type GID [16]byte

// MGID is a multicast GID: the name of an InfiniBand or RoCE multicast
// group, what a UD queue pair is attached to.
type MGID [16]byte

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

// String returns the compressed colon-hex form (fe80::2:c903:0:1b41;
// ::ffff:10.99.0.1 for an IPv4-mapped GID).
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// StringExpanded returns the eight-group form that sysfs and ibv_devinfo
// print (fe80:0000:0000:0000:0002:c903:0000:1b41).
func (g GID) StringExpanded() string { return netip.AddrFrom16(g).StringExpanded() }

// Addr returns the GID as an IP address, IPv4-mapped GIDs unmapped.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsZero reports whether the GID is all zeros (an unused GID table entry).
func (g GID) IsZero() bool { return g == GID{} }

// GIDFromIP returns the GID a RoCE v2 port has for an IP address: IPv4
// maps to ::ffff:a.b.c.d, IPv6 is used as is.
func GIDFromIP(ip netip.Addr) GID { return GID(ip.As16()) }

// String returns the compressed colon-hex form (ff12:401b:ffff::f01:203;
// ::ffff:239.1.2.3 for a RoCE v2 IPv4 group).
func (m MGID) String() string { return netip.AddrFrom16(m).String() }

// StringExpanded returns the eight-group form.
func (m MGID) StringExpanded() string { return netip.AddrFrom16(m).StringExpanded() }

// IsZero reports whether the MGID is all zeros: the MGID rdma_cm asks the
// subnet administrator to assign.
func (m MGID) IsZero() bool { return m == MGID{} }

// IsMulticast reports whether m can name a multicast group: ff00::/8, or
// an IPv4-mapped multicast address (RoCE v2's ::ffff:224.0.0.0/100), as
// the kernel's rdma_is_multicast_addr decides.
func (m MGID) IsMulticast() bool {
	if m[0] == 0xff {
		return true
	}
	a := netip.AddrFrom16(m)
	return a.Is4In6() && a.Unmap().IsMulticast()
}

// Scope returns the IPoIB scope nibble (the low four bits of byte 1).
// It is meaningful for IPoIB and rdma_cm MGIDs (ff1S:...).
func (m MGID) Scope() Scope { return Scope(m[1] & 0x0f) }

// PKey returns the P_Key field of an IPoIB or rdma_cm MGID (bytes 4-5).
func (m MGID) PKey() uint16 { return uint16(m[4])<<8 | uint16(m[5]) }

// Signature returns bytes 2-3 of an IB MGID: 0x401b for IPoIB IPv4,
// 0x601b IPoIB IPv6, 0x4001 and 0x6001 for rdma_cm's RDMA_PS_UDP,
// 0xa01b for an MGID the subnet administrator assigned.
func (m MGID) Signature() uint16 { return uint16(m[2])<<8 | uint16(m[3]) }
