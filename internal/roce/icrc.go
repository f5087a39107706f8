package roce

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// The ICRC (InfiniBand Architecture, Annex A17 RoCEv2) is CRC-32 (IEEE,
// reflected, as hash/crc32) over 8 bytes of 0xFF standing for a masked LRH,
// the IP header, the UDP header, BTH, DETH, [ImmDt], payload and pad, with
// the variant fields masked to all ones: IPv4 TOS, TTL and header checksum;
// IPv6 traffic class, flow label and hop limit; the UDP checksum; BTH byte 4
// (resv8a). It goes on the wire least-significant byte first.
//
// The kernel's rxe computes the same value as crc32_le seeded with
// 0xdebb20e3 (the state after 8 bytes of 0xFF from ~0) and complements
// it (drivers/infiniband/sw/rxe/rxe_icrc.c); the tests check both forms
// agree.

// icrcPrefixV4 is the masked LRH, IPv4 and UDP headers.
const icrcPrefixV4 = 8 + IPv4HdrSize + UDPHdrSize

// ipv4ICRCPrefix writes the first 36 bytes the ICRC covers for an IPv4
// packet carrying a UDP datagram of udpLen bytes (header included).
func ipv4ICRCPrefix(p []byte, src, dst [4]byte, id uint16, df bool, sport, dport uint16, udpLen int) {
	_ = p[icrcPrefixV4-1]
	for i := range 8 {
		p[i] = 0xFF
	}
	ip := p[8 : 8+IPv4HdrSize]
	ip[0] = 0x45
	ip[1] = 0xFF // TOS
	binary.BigEndian.PutUint16(ip[2:], uint16(IPv4HdrSize+udpLen))
	binary.BigEndian.PutUint16(ip[4:], id)
	var frag uint16
	if df {
		frag = IPv4DF
	}
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8] = 0xFF // TTL
	ip[9] = 17   // UDP
	ip[10], ip[11] = 0xFF, 0xFF
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	u := p[8+IPv4HdrSize:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0xFF, 0xFF
}

// icrcHead is scratch for the start of an IPv4 ICRC: the masked LRH,
// IPv4 and UDP headers, and the BTH with byte 4 masked. Hot paths keep one
// in a long-lived struct: crc32.Update makes a stack buffer escape.
type icrcHead [icrcPrefixV4 + BTHSize]byte

// start fills h and returns the CRC state over it.
func (h *icrcHead) start(src, dst [4]byte, id uint16, df bool, sport, dport uint16, udpLen int, bth []byte) uint32 {
	ipv4ICRCPrefix(h[:], src, dst, id, df, sport, dport, udpLen)
	copy(h[icrcPrefixV4:], bth[:BTHSize])
	h[icrcPrefixV4+4] = 0xFF
	return crc32.Update(0, crc32.IEEETable, h[:])
}

// icrcBTH feeds the BTH with byte 4 masked.
func icrcBTH(crc uint32, bth []byte) uint32 {
	var b [BTHSize]byte
	copy(b[:], bth[:BTHSize])
	b[4] = 0xFF
	return crc32.Update(crc, crc32.IEEETable, b[:])
}

// # UD datagrams of one flow
//
// The ICRC stream of a UD datagram starts with udHeadLen bytes (masked
// LRH, IPv4 and UDP headers, BTH, DETH) that, between two datagrams of one
// flow (same addresses, ports, length, opcode, Q_Key and QPs), differ only
// in the IP ID and the PSN. CRC is affine, so the state after that head is
// the state over the same head with ID and PSN zero, XOR a table entry per
// byte of ID and PSN. FlowICRC keeps the zeroed head it last computed and
// its state: the next datagram of the flow costs a 56-byte comparison and
// five lookups instead of a byte-at-a-time CRC over 56 bytes (too short
// for the carry-less multiply path).

const (
	udHeadLen = icrcPrefixV4 + BTHSize + DETHSize
	idOff     = 8 + 4            // IP header bytes 4-5
	psnOff    = icrcPrefixV4 + 9 // BTH bytes 9-11
	bthMask   = icrcPrefixV4 + 4 // BTH byte 4 (resv8a), masked
)

// headTab[k][b] is what byte value b at the k-th varying position (ID
// bytes, then PSN bytes) adds to the CRC state after udHeadLen bytes.
var headTab = func() (t [5][256]uint32) {
	var z [udHeadLen]byte
	base := crc32.Update(0, crc32.IEEETable, z[:])
	for k, off := range [5]int{idOff, idOff + 1, psnOff, psnOff + 1, psnOff + 2} {
		for b := 1; b < 256; b++ {
			z[off] = byte(b)
			t[k][b] = crc32.Update(0, crc32.IEEETable, z[:]) ^ base
		}
		z[off] = 0
	}
	return t
}()

// FlowICRC starts the ICRCs of UD datagrams, remembering the last flow.
// Not safe for concurrent use: each queue keeps its own.
type FlowICRC struct {
	h     [udHeadLen]byte // this datagram's head, ID and PSN zeroed
	last  [udHeadLen]byte // the head state was computed over (none yet: zero, which no head is, its first 8 bytes being 0xFF)
	state uint32
}

// Start returns the CRC state after the head of a UD datagram of udpLen
// bytes (UDP header included) whose BTH and DETH are hdr[:HdrSize], sent
// with IP ID id and DF df.
func (u *FlowICRC) Start(src, dst [4]byte, id uint16, df bool, sport, dport uint16, udpLen int, hdr []byte) uint32 {
	h := &u.h
	ipv4ICRCPrefix(h[:], src, dst, 0, df, sport, dport, udpLen)
	copy(h[icrcPrefixV4:], hdr[:HdrSize])
	h[bthMask] = 0xFF
	p0, p1, p2 := h[psnOff], h[psnOff+1], h[psnOff+2]
	h[psnOff], h[psnOff+1], h[psnOff+2] = 0, 0, 0
	if !sameHead(h, &u.last) {
		u.last = *h
		u.state = crc32.Update(0, crc32.IEEETable, h[:])
	}
	return u.state ^ headTab[0][id>>8] ^ headTab[1][id&0xFF] ^
		headTab[2][p0] ^ headTab[3][p1] ^ headTab[4][p2]
}

// sameHead compares two heads a word at a time, inline: the array
// comparison is a call into the runtime's memequal, on every datagram
// sent and received.
func sameHead(a, b *[udHeadLen]byte) bool {
	le := binary.LittleEndian
	return le.Uint64(a[0:]) == le.Uint64(b[0:]) && le.Uint64(a[8:]) == le.Uint64(b[8:]) &&
		le.Uint64(a[16:]) == le.Uint64(b[16:]) && le.Uint64(a[24:]) == le.Uint64(b[24:]) &&
		le.Uint64(a[32:]) == le.Uint64(b[32:]) && le.Uint64(a[40:]) == le.Uint64(b[40:]) &&
		le.Uint64(a[48:]) == le.Uint64(b[48:])
}

// The words of sameHead cover the head exactly.
var _ [udHeadLen - 56]struct{}
var _ [56 - udHeadLen]struct{}

var errNotRoCE = errors.New("roce: not a RoCEv2 packet (IPv4/IPv6 + UDP + BTH + ICRC)")

// ICRC computes the ICRC of a whole IP packet (IPv4 without options, or
// IPv6 without extension headers, carrying UDP), whose last four bytes are
// the ICRC field and are not covered. Use it where the whole IP header is
// visible (raw sockets, captures, tests).
func ICRC(pkt []byte) (uint32, error) {
	if len(pkt) < 1 {
		return 0, errNotRoCE
	}
	var hdr [8 + ipv6HdrSize + UDPHdrSize]byte
	for i := range 8 {
		hdr[i] = 0xFF
	}
	var ipLen int
	switch pkt[0] >> 4 {
	case 4:
		ipLen = IPv4HdrSize
		if pkt[0] != 0x45 || len(pkt) < ipLen+UDPHdrSize+BTHSize+ICRCSize || pkt[9] != 17 {
			return 0, errNotRoCE
		}
		copy(hdr[8:], pkt[:ipLen+UDPHdrSize])
		ip := hdr[8:]
		ip[1] = 0xFF
		ip[8] = 0xFF
		ip[10], ip[11] = 0xFF, 0xFF
	case 6:
		ipLen = ipv6HdrSize
		if len(pkt) < ipLen+UDPHdrSize+BTHSize+ICRCSize || pkt[6] != 17 {
			return 0, errNotRoCE
		}
		copy(hdr[8:], pkt[:ipLen+UDPHdrSize])
		ip := hdr[8:]
		ip[0] |= 0x0F // traffic class, high nibble
		ip[1], ip[2], ip[3] = 0xFF, 0xFF, 0xFF
		ip[7] = 0xFF // hop limit
	default:
		return 0, errNotRoCE
	}
	n := 8 + ipLen + UDPHdrSize
	hdr[n-2], hdr[n-1] = 0xFF, 0xFF // UDP checksum
	crc := crc32.Update(0, crc32.IEEETable, hdr[:n])
	dgram := pkt[ipLen+UDPHdrSize : len(pkt)-ICRCSize]
	crc = icrcBTH(crc, dgram)
	return CRCUpdate(crc, dgram[BTHSize:]), nil
}

// VerifyICRC reports whether the ICRC at the end of a whole IP packet is
// correct.
func VerifyICRC(pkt []byte) bool {
	crc, err := ICRC(pkt)
	return err == nil && binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCSize:]) == crc
}
