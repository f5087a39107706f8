package ipoib

import (
	"net/netip"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// GID is a 128-bit InfiniBand global identifier: a port's address, one
// entry of its GID table. On RoCE a GID is an IPv6 address, or an IPv4
// address mapped as ::ffff:a.b.c.d.
//
// It is the one GID type of this module: rdmanet.Addr's GID and the
// verbs layer's are this type, so a GID passes between them as is. A
// GID is a comparable [16]byte. Its methods: String (compressed
// colon-hex), StringExpanded (the eight-group form sysfs prints), Addr
// and IP (the IP address a RoCE GID carries), IsZero, IsMulticast, and
// for an MGID Scope, PKey, Signature and Origins.
type GID = infiniband.GID

// MGID is a multicast GID: the name of an InfiniBand or RoCE multicast
// group, what a UD queue pair is attached to. An MGID is a GID (the same
// type): its IsMulticast reports true, and Scope, PKey, Signature and
// Origins read the IB forms' fields.
type MGID = infiniband.MGID

// MulticastQPN is the QPN of multicast and broadcast IPoIB addresses.
const MulticastQPN = infiniband.MulticastQPN

// ParseGID parses a GID in colon-hex form: the compressed form
// (fe80::2:c903:0:1b41), the eight-group form sysfs prints
// (fe80:0000:0000:0000:0002:c903:0000:1b41), or an IPv4-mapped form
// (::ffff:10.99.0.1). A bare IPv4 address is not a GID and is rejected.
func ParseGID(s string) (GID, error) { return infiniband.ParseGID(s) }

// ParseMGID parses an MGID in the same forms as ParseGID.
func ParseMGID(s string) (MGID, error) { return infiniband.ParseMGID(s) }

// GIDFromIP returns the GID a RoCE v2 port has for an IP address: IPv4
// maps to ::ffff:a.b.c.d, IPv6 is used as is.
func GIDFromIP(ip netip.Addr) GID { return infiniband.GIDFromIP(ip) }
