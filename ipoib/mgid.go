package ipoib

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// Scope is the multicast scope nibble of an IPoIB MGID (ff1S:...), with
// the meanings of IPv6 multicast scopes. The kernel copies it from the
// IPoIB interface's broadcast address; the default is link-local.
type Scope = infiniband.Scope

// Scopes RFC 4391 names (any value 0-15 fits in the nibble).
const (
	ScopeInterfaceLocal = infiniband.ScopeInterfaceLocal
	ScopeLinkLocal      = infiniband.ScopeLinkLocal
	ScopeSiteLocal      = infiniband.ScopeSiteLocal
	ScopeOrgLocal       = infiniband.ScopeOrgLocal
	ScopeGlobal         = infiniband.ScopeGlobal
)

// DefaultScope is the scope of the default IPoIB broadcast group.
const DefaultScope = infiniband.DefaultScope

// P_Key constants.
const (
	// DefaultPKey is the default partition's key, full member.
	DefaultPKey = infiniband.DefaultPKey
	// FullMember is the P_Key's membership bit. IPoIB always sets it in
	// the key it puts into MGIDs (ipoib_main.c: priv->pkey |= 0x8000,
	// then broadcast[8..9] = pkey), so a limited-member key such as
	// 0x7fff maps to the same group as 0xffff.
	FullMember = infiniband.FullMember
)

// MGID signatures (bytes 2-3 of an IB MGID).
const (
	SignatureIPoIBv4 = infiniband.SignatureIPoIBv4 // RFC 4391, IPv4
	SignatureIPoIBv6 = infiniband.SignatureIPoIBv6 // RFC 4391, IPv6
	SignatureCMv4    = infiniband.SignatureCMv4    // rdma_cm RDMA_PS_UDP, IPv4 group
	SignatureCMv6    = infiniband.SignatureCMv6    // rdma_cm RDMA_PS_UDP, IPv6 group
	SignatureSA      = infiniband.SignatureSA      // MGID assigned by the subnet administrator
)

// ErrNotMulticast is returned (wrapped) for a group that is not an IP
// multicast address.
var ErrNotMulticast = errors.New("not a multicast address")

func checkGroup(group netip.Addr) (netip.Addr, error) {
	group = group.Unmap()
	if !group.IsValid() {
		return group, fmt.Errorf("ipoib: no group address")
	}
	if group.Zone() != "" {
		group = group.WithZone("")
	}
	if !group.IsMulticast() {
		return group, fmt.Errorf("ipoib: group %s: %w", group, ErrNotMulticast)
	}
	return group, nil
}

func checkPKeyScope(pkey uint16, scope Scope) error {
	if pkey&^FullMember == 0 {
		return fmt.Errorf("ipoib: P_Key %#04x is not a valid partition key", pkey)
	}
	if scope > 0xf {
		return fmt.Errorf("ipoib: scope %d does not fit in 4 bits", uint8(scope))
	}
	return nil
}

// ibMGID fills an IB MGID the way the kernel's ip_ib_mc_map and
// ipv6_ib_mc_map (include/net/ip.h, include/net/if_inet6.h) fill bytes
// 4-19 of the IPoIB hardware address:
//
//	buf[5] = 0x10 | scope;   buf[6..7] = signature
//	buf[8..9] = P_Key (from the broadcast address, full-member bit set)
//	IPv4: buf[10..15] = 0; buf[16] = group[0] & 0x0f; buf[17..19] = group[1..3]
//	IPv6: buf[10..19] = group[6..15]
func ibMGID(group netip.Addr, pkey uint16, scope Scope, v4sig, v6sig uint16) MGID {
	var m MGID
	pkey |= FullMember
	m[0] = 0xff
	m[1] = 0x10 | byte(scope)
	m[4], m[5] = byte(pkey>>8), byte(pkey)
	if group.Is4() {
		m[2], m[3] = byte(v4sig>>8), byte(v4sig)
		g := group.As4()
		m[12] = g[0] & 0x0f
		copy(m[13:], g[1:])
	} else {
		m[2], m[3] = byte(v6sig>>8), byte(v6sig)
		g := group.As16()
		copy(m[6:], g[6:])
	}
	return m
}

// IPoIBMGID returns the MGID that IPoIB (RFC 4391, the kernel's
// ip_ib_mc_map and ipv6_ib_mc_map) joins for an IP multicast group on a
// partition and scope:
//
//	IPv4: ff1S:401b:PPPP:0000:0000:0000:GGGG:GGGG  (the group's low 28 bits)
//	IPv6: ff1S:601b:PPPP:GGGG:GGGG:GGGG:GGGG:GGGG  (the group's low 80 bits)
//
// The full-member bit is set in PPPP whatever pkey says, as the kernel
// does. 239.1.2.3 on the default partition and scope gives
// ff12:401b:ffff::f01:203.
func IPoIBMGID(group netip.Addr, pkey uint16, scope Scope) (MGID, error) {
	group, err := checkGroup(group)
	if err != nil {
		return MGID{}, err
	}
	if err := checkPKeyScope(pkey, scope); err != nil {
		return MGID{}, err
	}
	return ibMGID(group, pkey, scope, SignatureIPoIBv4, SignatureIPoIBv6), nil
}

// RDMACMMGID returns the MGID rdma_cm joins on InfiniBand for an IP group
// in port space RDMA_PS_UDP (the kernel's cma_set_mgid in
// drivers/infiniband/core/cma.c):
//
//	} else if ((addr->sa_family == AF_INET6) &&
//		   ((be32_to_cpu(sin6->sin6_addr.s6_addr32[0]) & 0xFFF0FFFF) ==
//								 0xFF10A01B)) {
//		/* IPv6 address is an SA assigned MGID. */
//		memcpy(mgid, &sin6->sin6_addr, sizeof *mgid);
//	...
//	} else {
//		ip_ib_mc_map(sin->sin_addr.s_addr, dev_addr->broadcast, mc_map);
//		if (id_priv->id.ps == RDMA_PS_UDP)
//			mc_map[7] = 0x01;	/* Use RDMA CM signature */
//		*mgid = *(union ib_gid *) (mc_map + 4);
//	}
//
// That is the IPoIB MGID with byte 3 set to 0x01 (ff1S:4001:PPPP::... and
// ff1S:6001:PPPP:...), P_Key and scope coming from the IPoIB interface's
// broadcast address. An IPv6 group of the form ff1S:a01b:... is an MGID
// the subnet administrator assigned and is used verbatim. (The unspecified
// address, which asks the SA to assign an MGID, is not a group and is
// rejected here.)
func RDMACMMGID(group netip.Addr, pkey uint16, scope Scope) (MGID, error) {
	group, err := checkGroup(group)
	if err != nil {
		return MGID{}, err
	}
	if err := checkPKeyScope(pkey, scope); err != nil {
		return MGID{}, err
	}
	if group.Is6() {
		g := group.As16()
		if g[0] == 0xff && g[1]&0xf0 == 0x10 && g[2] == 0xa0 && g[3] == 0x1b {
			return MGID(g), nil
		}
	}
	return ibMGID(group, pkey, scope, SignatureCMv4, SignatureCMv6), nil
}

// RoCEv2MGID returns the MGID rdma_cm joins on a RoCE v2 port
// (cma_iboe_set_mgid with IB_GID_TYPE_ROCE_UDP_ENCAP): an IPv4 group maps
// to ::ffff:a.b.c.d, the IPv4-mapped address the RoCE v2 annex
// specifies, and an IPv6 group to itself.
//
// rdma_cm refuses to join an IPv6 group on RoCE v2 (ENOTSUPP in
// cma_iboe_join_multicast): the MGID is well defined, the join is not.
func RoCEv2MGID(group netip.Addr) (MGID, error) {
	group, err := checkGroup(group)
	if err != nil {
		return MGID{}, err
	}
	return MGID(group.As16()), nil
}

// RoCEv1MGID returns the MGID rdma_cm joins on a RoCE v1 port
// (cma_iboe_set_mgid with IB_GID_TYPE_ROCE): an IPv4 group maps to
// ff0e::ffff:a.b.c.d (raw[0] = 0xff, raw[1] = 0x0e, raw[10..11] = 0xff,
// raw[12..15] = the group), an IPv6 group to itself.
func RoCEv1MGID(group netip.Addr) (MGID, error) {
	group, err := checkGroup(group)
	if err != nil {
		return MGID{}, err
	}
	m := MGID(group.As16())
	if group.Is4() {
		m[0], m[1] = 0xff, 0x0e
	}
	return m, nil
}

// BroadcastMGID returns the IPoIB broadcast group of a partition and
// scope (RFC 4391 section 4.1): ff1S:401b:PPPP::ffff:ffff, P_Key with the
// full-member bit set. Every IPoIB interface joins it; the default one is
// ff12:401b:ffff::ffff:ffff.
func BroadcastMGID(pkey uint16, scope Scope) (MGID, error) {
	if err := checkPKeyScope(pkey, scope); err != nil {
		return MGID{}, err
	}
	pkey |= FullMember
	return MGID{0xff, 0x10 | byte(scope), 0x40, 0x1b, byte(pkey >> 8), byte(pkey),
		12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}, nil
}

// BroadcastAddr returns the 20-byte broadcast hardware address of an
// IPoIB interface (what /sys/class/net/ib0/broadcast shows): QPN 0xffffff
// and the broadcast MGID.
func BroadcastAddr(pkey uint16, scope Scope) (LinkAddr, error) {
	m, err := BroadcastMGID(pkey, scope)
	if err != nil {
		return LinkAddr{}, err
	}
	return MakeLinkAddr(0, MulticastQPN, m), nil
}

// EthernetMAC returns the Ethernet multicast address a RoCE frame for the
// group carries (ip_eth_mc_map, ipv6_eth_mc_map): 01:00:5e and the low 23
// bits of an IPv4 group, 33:33 and the low 32 bits of an IPv6 one.
func EthernetMAC(group netip.Addr) (net.HardwareAddr, error) {
	group, err := checkGroup(group)
	if err != nil {
		return nil, err
	}
	if group.Is4() {
		g := group.As4()
		return net.HardwareAddr{0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3]}, nil
	}
	g := group.As16()
	return net.HardwareAddr{0x33, 0x33, g[12], g[13], g[14], g[15]}, nil
}

// Mapping names a way an IP group becomes an MGID.
type Mapping = infiniband.Mapping

// Mappings.
const (
	MapIPoIB     = infiniband.MapIPoIB     // IPoIB, RFC 4391 (ip_ib_mc_map)
	MapRDMACM    = infiniband.MapRDMACM    // rdma_cm RDMA_PS_UDP on InfiniBand
	MapRDMACMSA  = infiniband.MapRDMACMSA  // rdma_cm, SA-assigned MGID used verbatim
	MapRoCEv2    = infiniband.MapRoCEv2    // rdma_cm on RoCE v2
	MapRoCEv1    = infiniband.MapRoCEv1    // rdma_cm on RoCE v1
	MapRoCEIPv6  = infiniband.MapRoCEIPv6  // rdma_cm on RoCE, IPv6 group verbatim
	MapBroadcast = infiniband.MapBroadcast // the IPoIB broadcast group
)

// Origin is one way an MGID can have come from an IP group: the result of
// the reverse mapping, MGID.Origins, which returns every mapping that
// produces an MGID, most specific first.
type Origin = infiniband.Origin
