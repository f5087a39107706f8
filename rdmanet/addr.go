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

// GroupAddr returns the group form of an Addr for an MGID.
func GroupAddr(mgid ipoib.MGID) Addr {
	return Addr{GID: ipoib.GID(mgid), QPN: MulticastQPN}
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
	return verbs.GID(a.GID).IsMulticast()
}

// ParseAddr parses the GID/QPN form String returns. The QPN may be hex
// with 0x or decimal.
func ParseAddr(s string) (Addr, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return Addr{}, fmt.Errorf("rdmanet: bad address %q: want GID/QPN", s)
	}
	ip, err := netip.ParseAddr(s[:i])
	if err != nil || ip.Zone() != "" {
		return Addr{}, fmt.Errorf("rdmanet: bad address %q: bad GID", s)
	}
	qpn, err := strconv.ParseUint(s[i+1:], 0, 32)
	if err != nil || qpn > 0xFFFFFF {
		return Addr{}, fmt.Errorf("rdmanet: bad address %q: QPN must be a 24-bit number", s)
	}
	return Addr{GID: ipoib.GID(ip.As16()), QPN: uint32(qpn)}, nil
}
