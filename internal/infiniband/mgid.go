package infiniband

import (
	"fmt"
	"net/netip"
)

// Scope is the multicast scope nibble of an IPoIB MGID (ff1S:...), with
// the meanings of IPv6 multicast scopes. The kernel copies it from the
// IPoIB interface's broadcast address; the default is link-local.
type Scope uint8

// Scopes RFC 4391 names (any value 0-15 fits in the nibble).
const (
	ScopeInterfaceLocal Scope = 0x1
	ScopeLinkLocal      Scope = 0x2
	ScopeSiteLocal      Scope = 0x5
	ScopeOrgLocal       Scope = 0x8
	ScopeGlobal         Scope = 0xe
)

// DefaultScope is the scope of the default IPoIB broadcast group.
const DefaultScope = ScopeLinkLocal

func (s Scope) String() string {
	name := ""
	switch s {
	case ScopeInterfaceLocal:
		name = " interface-local"
	case ScopeLinkLocal:
		name = " link-local"
	case ScopeSiteLocal:
		name = " site-local"
	case ScopeOrgLocal:
		name = " organization-local"
	case ScopeGlobal:
		name = " global"
	}
	return fmt.Sprintf("0x%x%s", uint8(s), name)
}

// P_Key constants.
const (
	// DefaultPKey is the default partition's key, full member.
	DefaultPKey uint16 = 0xffff
	// FullMember is the P_Key's membership bit. IPoIB always sets it in
	// the key it puts into MGIDs (ipoib_main.c: priv->pkey |= 0x8000,
	// then broadcast[8..9] = pkey), so a limited-member key such as
	// 0x7fff maps to the same group as 0xffff.
	FullMember uint16 = 0x8000
)

// MGID signatures (bytes 2-3 of an IB MGID).
const (
	SignatureIPoIBv4 uint16 = 0x401b // RFC 4391, IPv4
	SignatureIPoIBv6 uint16 = 0x601b // RFC 4391, IPv6
	SignatureCMv4    uint16 = 0x4001 // rdma_cm RDMA_PS_UDP, IPv4 group
	SignatureCMv6    uint16 = 0x6001 // rdma_cm RDMA_PS_UDP, IPv6 group
	SignatureSA      uint16 = 0xa01b // MGID assigned by the subnet administrator
)

// Mapping names a way an IP group becomes an MGID.
type Mapping uint8

// Mappings.
const (
	MapIPoIB     Mapping = iota + 1 // IPoIB, RFC 4391 (ip_ib_mc_map)
	MapRDMACM                       // rdma_cm RDMA_PS_UDP on InfiniBand
	MapRDMACMSA                     // rdma_cm, SA-assigned MGID used verbatim
	MapRoCEv2                       // rdma_cm on RoCE v2
	MapRoCEv1                       // rdma_cm on RoCE v1
	MapRoCEIPv6                     // rdma_cm on RoCE, IPv6 group verbatim
	MapBroadcast                    // the IPoIB broadcast group
)

func (m Mapping) String() string {
	switch m {
	case MapIPoIB:
		return "IPoIB"
	case MapRDMACM:
		return "rdma_cm UDP on InfiniBand"
	case MapRDMACMSA:
		return "rdma_cm SA-assigned"
	case MapRoCEv2:
		return "RoCE v2"
	case MapRoCEv1:
		return "RoCE v1"
	case MapRoCEIPv6:
		return "RoCE v1/v2 IPv6"
	case MapBroadcast:
		return "IPoIB broadcast"
	}
	return "unknown"
}

// Origin is one way an MGID can have come from an IP group: the result of
// the reverse mapping.
type Origin struct {
	Mapping Mapping
	// Group is the IP group. For IPoIB and rdma_cm IPv6 MGIDs only the
	// group's low 80 bits are in the MGID: Group then has its first six
	// bytes zero and Partial is true. It is the zero Addr for the
	// broadcast group.
	Group   netip.Addr
	Partial bool
	// PKey and Scope are set for the InfiniBand mappings.
	PKey  uint16
	Scope Scope
}

// Origins returns every mapping that produces m, most specific first, or
// none when no mapping here produces it. An ff00::/8 MGID is also, read
// verbatim, the MGID of itself as an IPv6 group on RoCE; that reading is
// listed last.
func (m GID) Origins() []Origin {
	var out []Origin
	a := netip.AddrFrom16(m)
	// IPoIB and rdma_cm always put a full-member, non-zero P_Key in.
	pkeyOK := m.PKey()&FullMember != 0 && m.PKey()&^FullMember != 0
	if m[0] == 0xff && m[1]&0xf0 == 0x10 && (pkeyOK || m.Signature() == SignatureSA) {
		ib := Origin{PKey: m.PKey(), Scope: m.Scope()}
		zero6to11 := m[6]|m[7]|m[8]|m[9]|m[10]|m[11] == 0
		switch m.Signature() {
		case SignatureIPoIBv4, SignatureCMv4:
			ib.Mapping = MapIPoIB
			if m.Signature() == SignatureCMv4 {
				ib.Mapping = MapRDMACM
			}
			switch {
			case !zero6to11:
			case m.Signature() == SignatureIPoIBv4 && m[12] == 0xff && m[13] == 0xff && m[14] == 0xff && m[15] == 0xff:
				ib.Mapping = MapBroadcast
				out = append(out, ib)
			case m[12]&0xf0 == 0:
				// IPv4 multicast is 224.0.0.0/4: the top nibble is
				// always 0xe, so the 28 bits restore the group exactly.
				ib.Group = netip.AddrFrom4([4]byte{0xe0 | m[12], m[13], m[14], m[15]})
				out = append(out, ib)
			}
		case SignatureIPoIBv6, SignatureCMv6:
			ib.Mapping = MapIPoIB
			if m.Signature() == SignatureCMv6 {
				ib.Mapping = MapRDMACM
			}
			var g [16]byte
			copy(g[6:], m[6:])
			ib.Group = netip.AddrFrom16(g)
			ib.Partial = true
			out = append(out, ib)
		case SignatureSA:
			ib.Mapping = MapRDMACMSA
			ib.Group = a
			out = append(out, ib)
		}
	}
	if a.Is4In6() && a.Unmap().IsMulticast() {
		out = append(out, Origin{Mapping: MapRoCEv2, Group: a.Unmap()})
	}
	if m[0] == 0xff && m[1] == 0x0e && m[2]|m[3]|m[4]|m[5]|m[6]|m[7]|m[8]|m[9] == 0 &&
		m[10] == 0xff && m[11] == 0xff {
		if g := netip.AddrFrom4([4]byte(m[12:])); g.IsMulticast() {
			out = append(out, Origin{Mapping: MapRoCEv1, Group: g})
		}
	}
	if m[0] == 0xff {
		out = append(out, Origin{Mapping: MapRoCEIPv6, Group: a})
	}
	return out
}
