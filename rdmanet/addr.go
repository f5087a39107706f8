package rdmanet

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/ipoib"
)

// MulticastQPN is the QP number of a multicast group's address.
const MulticastQPN = verbs.MulticastQPN

// Addr is an RDMA UD endpoint: a port's GID and a QP number. ReadFrom
// returns the sender of a datagram as an *Addr; WriteTo an *Addr sends a
// unicast UD datagram to that QP.
//
// An Addr whose GID is a multicast GID (and QPN MulticastQPN) names a
// group by MGID: JoinGroup accepts it (as mckey -M joins a raw MGID) and
// WriteTo sends to the group.
//
// Addr is a comparable value: it holds no pointers, so it can be a map key
// and returned without allocation.
type Addr struct {
	GID ipoib.GID
	QPN uint32
}

var _ net.Addr = (*Addr)(nil)

// AddrFromMGID returns the Addr that names the group with this MGID (the
// MGID and MulticastQPN), as JoinGroup and WriteTo take it. It needs no
// conn; Conn.GroupAddr instead looks up a group the conn joined (by IP
// or MGID) and returns the Addr its join gave.
func AddrFromMGID(mgid ipoib.MGID) Addr {
	return Addr{GID: mgid, QPN: MulticastQPN}
}

// Network returns "rdma".
func (a *Addr) Network() string { return "rdma" }

// String formats the address as GID/QPN, with the QPN in hex:
// "::ffff:10.99.0.1/0x000011" or "fe80::2:c903:0:1b41/0x000048".
func (a *Addr) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.GID.String() + "/0x" + fmt.Sprintf("%06x", a.QPN)
}

// IP returns the IP address the GID carries on RoCE (IPv4 for an
// IPv4-mapped GID), or nil.
func (a *Addr) IP() net.IP {
	ip := a.GID.Addr()
	if a.GID.IsZero() {
		return nil
	}
	return net.IP(ip.AsSlice())
}

// IsMulticast reports whether the Addr names a multicast group.
func (a *Addr) IsMulticast() bool {
	return a.GID.IsMulticast()
}

// ParseAddr parses the GID/QPN form String returns: a GID in IPv6 form
// ("::ffff:10.99.0.1", "fe80::2:c903:0:1b41"; no zone, and no bare IPv4
// address), a slash, and a QPN of at most 24 bits, in hex after a
// lower-case 0x ("0x000011", at most 6 digits) or in decimal ("17"; a
// leading 0 is still decimal). Nothing else is taken: no 0X, no sign, no
// space, no underscores, no other base prefix, nothing after the number.
//
// Its errors are *net.AddrError, as net's parsers return: Err says what
// is wrong, and Addr is s, quoted and cut to its first 64 bytes.
func ParseAddr(s string) (Addr, error) {
	bad := func(why string) (Addr, error) {
		return Addr{}, &net.AddrError{Err: "rdmanet: " + why, Addr: quoteTrunc(s)}
	}
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return bad("want GID/QPN")
	}
	ip, err := netip.ParseAddr(s[:i])
	if err != nil || ip.Zone() != "" || ip.Is4() {
		return bad("the GID must be an IPv6-form address without a zone (::ffff:a.b.c.d on RoCE)")
	}
	qpn, why := parseQPN(s[i+1:])
	if why != "" {
		return bad(why)
	}
	return Addr{GID: ipoib.GIDFromIP(ip), QPN: qpn}, nil
}

// parseQPN parses hex after 0x (1 to 6 digits) or decimal digits, at most
// 24 bits; else it says why not.
func parseQPN(s string) (uint32, string) {
	const want = "the QPN must be a 24-bit number, hex after 0x (as String writes it) or decimal"
	base, digits := 10, s
	if strings.HasPrefix(s, "0x") {
		base, digits = 16, s[2:]
		if len(digits) > 6 {
			return 0, want + ": at most 6 hex digits"
		}
	} else if strings.HasPrefix(s, "0X") {
		return 0, want + ": the prefix is 0x, lower-case"
	}
	if digits == "" {
		return 0, want + ": no digits"
	}
	for _, r := range digits {
		ok := r >= '0' && r <= '9' || base == 16 && (r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F')
		if !ok {
			return 0, fmt.Sprintf("%s: %q is not a digit", want, r)
		}
	}
	v, err := strconv.ParseUint(digits, base, 24) // digits only: err is a range error
	if err != nil {
		return 0, want + ": over 24 bits"
	}
	return uint32(v), ""
}

// quoteTrunc quotes s for an error message, cut to 64 bytes.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + fmt.Sprintf("... (%d bytes)", len(s))
}
