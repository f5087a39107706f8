package roce

import "encoding/binary"

// The IPv4 and UDP headers RoCEv2 datagrams travel in.
const (
	IPv4HdrSize = 20     // an IPv4 header without options
	ipv6HdrSize = 40     // an IPv6 header without extension headers
	UDPHdrSize  = 8      // a UDP header
	IPv4DF      = 0x4000 // the Don't Fragment flag in the IPv4 flags and offset
	ipProtoUDP  = 17
)

// Filter is what a receiving QP accepts: datagrams for its QPN, or for
// the multicast QPN sent to one of its groups, with its Q_Key.
type Filter struct {
	QPN    uint32
	QKey   uint32
	Groups [][4]byte // IPv4 groups joined as a full member
}

// CheckIPv4 validates a whole IPv4 packet (header without options, UDP,
// RoCEv2 datagram) as a QP with filter f would, seeing the whole IP
// header, so the ICRC is verified plainly. It returns the payload, or nil
// and why the packet is dropped.
func CheckIPv4(pkt []byte, f *Filter, h *Header) ([]byte, DropReason) {
	if len(pkt) < IPv4HdrSize+UDPHdrSize || pkt[0] != 0x45 || pkt[9] != 17 {
		return nil, DropTruncated
	}
	ipLen := int(binary.BigEndian.Uint16(pkt[2:]))
	udpLen := int(binary.BigEndian.Uint16(pkt[IPv4HdrSize+4:]))
	if ipLen != len(pkt) || udpLen != len(pkt)-IPv4HdrSize {
		return nil, DropTruncated
	}
	if binary.BigEndian.Uint16(pkt[IPv4HdrSize+2:]) != UDPPort {
		return nil, DropNotForUs
	}
	dgram := pkt[IPv4HdrSize+UDPHdrSize:]
	payload, r := Decode(dgram, h)
	if r != Accepted {
		return nil, r
	}
	dst := [4]byte(pkt[16:20])
	switch {
	case h.DestQPN == f.QPN:
	case h.DestQPN == 0xFFFFFF && dst[0]&0xF0 == 0xE0:
		joined := false
		for _, g := range f.Groups {
			joined = joined || g == dst
		}
		if !joined {
			return nil, DropNotForUs
		}
	default:
		return nil, DropNotForUs
	}
	if h.QKey != f.QKey {
		return nil, DropBadQKey
	}
	if !VerifyICRC(pkt) {
		return nil, DropBadICRC
	}
	return payload, Accepted
}

// FillGRH writes the GRH area of a received datagram (verbs.GRHSize
// bytes) as rxe fills it for RoCEv2 over IPv4: bytes 0-19 zero, then the
// datagram's IPv4 header (n bytes of UDP payload, IP ID id, DF as df, TOS
// tos and TTL ttl, from src to dst).
func FillGRH(grh []byte, src, dst [4]byte, tos, ttl uint8, id uint16, df bool, n int) {
	clear(grh[:20])
	ip := grh[20:]
	ip[0] = 0x45
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[2:], uint16(IPv4HdrSize+UDPHdrSize+n))
	binary.BigEndian.PutUint16(ip[4:], id)
	var frag uint16
	if df {
		frag = IPv4DF
	}
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8] = ttl
	ip[9] = ipProtoUDP
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], IPv4Checksum(ip))
}

// IPv4Checksum returns the IPv4 header checksum of h (checksum field
// zero). A header without options, as every received datagram's GRH has,
// is summed in five 32-bit words.
func IPv4Checksum(h []byte) uint16 {
	if len(h) == IPv4HdrSize {
		be := binary.BigEndian
		s := uint64(be.Uint32(h[0:])) + uint64(be.Uint32(h[4:])) + uint64(be.Uint32(h[8:])) +
			uint64(be.Uint32(h[12:])) + uint64(be.Uint32(h[16:]))
		s = s&0xFFFF + s>>16&0xFFFF + s>>32
		for s>>16 != 0 {
			s = s&0xFFFF + s>>16
		}
		return ^uint16(s)
	}
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}
