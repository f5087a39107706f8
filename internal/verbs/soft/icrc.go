//go:build linux

package soft

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
	"sync/atomic"
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

const (
	ipv4HdrSize = 20
	ipv6HdrSize = 40
	udpHdrSize  = 8
	// icrcPrefixV4 is the masked LRH, IPv4 and UDP headers.
	icrcPrefixV4 = 8 + ipv4HdrSize + udpHdrSize
	ipv4DF       = 0x4000
)

// ipv4ICRCPrefix writes the first 36 bytes the ICRC covers for an IPv4
// packet carrying a UDP datagram of udpLen bytes (header included).
func ipv4ICRCPrefix(p []byte, src, dst [4]byte, id uint16, df bool, sport, dport uint16, udpLen int) {
	_ = p[icrcPrefixV4-1]
	for i := range 8 {
		p[i] = 0xFF
	}
	ip := p[8 : 8+ipv4HdrSize]
	ip[0] = 0x45
	ip[1] = 0xFF // TOS
	binary.BigEndian.PutUint16(ip[2:], uint16(ipv4HdrSize+udpLen))
	binary.BigEndian.PutUint16(ip[4:], id)
	var frag uint16
	if df {
		frag = ipv4DF
	}
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8] = 0xFF // TTL
	ip[9] = 17   // UDP
	ip[10], ip[11] = 0xFF, 0xFF
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	u := p[8+ipv4HdrSize:]
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
// byte of ID and PSN. udICRC keeps the zeroed head it last computed and
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

// udICRC starts the ICRCs of UD datagrams, remembering the last flow.
// Not safe for concurrent use: each queue keeps its own.
type udICRC struct {
	h     [udHeadLen]byte // this datagram's head, ID and PSN zeroed
	last  [udHeadLen]byte // the head state was computed over (none yet: zero, which no head is, its first 8 bytes being 0xFF)
	state uint32
}

// start returns the CRC state after the head of a UD datagram of udpLen
// bytes (UDP header included) whose BTH and DETH are hdr[:hdrSize], sent
// with IP ID id and DF df.
func (u *udICRC) start(src, dst [4]byte, id uint16, df bool, sport, dport uint16, udpLen int, hdr []byte) uint32 {
	h := &u.h
	ipv4ICRCPrefix(h[:], src, dst, 0, df, sport, dport, udpLen)
	copy(h[icrcPrefixV4:], hdr[:hdrSize])
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

var errNotRoCE = errors.New("soft: not a RoCEv2 packet (IPv4/IPv6 + UDP + BTH + ICRC)")

// ICRC computes the ICRC of a whole IP packet (IPv4 without options, or
// IPv6 without extension headers, carrying UDP), whose last four bytes are
// the ICRC field and are not covered. Use it where the whole IP header is
// visible (raw sockets, captures, tests).
func ICRC(pkt []byte) (uint32, error) {
	if len(pkt) < 1 {
		return 0, errNotRoCE
	}
	var hdr [8 + ipv6HdrSize + udpHdrSize]byte
	for i := range 8 {
		hdr[i] = 0xFF
	}
	var ipLen int
	switch pkt[0] >> 4 {
	case 4:
		ipLen = ipv4HdrSize
		if pkt[0] != 0x45 || len(pkt) < ipLen+udpHdrSize+BTHSize+ICRCSize || pkt[9] != 17 {
			return 0, errNotRoCE
		}
		copy(hdr[8:], pkt[:ipLen+udpHdrSize])
		ip := hdr[8:]
		ip[1] = 0xFF
		ip[8] = 0xFF
		ip[10], ip[11] = 0xFF, 0xFF
	case 6:
		ipLen = ipv6HdrSize
		if len(pkt) < ipLen+udpHdrSize+BTHSize+ICRCSize || pkt[6] != 17 {
			return 0, errNotRoCE
		}
		copy(hdr[8:], pkt[:ipLen+udpHdrSize])
		ip := hdr[8:]
		ip[0] |= 0x0F // traffic class, high nibble
		ip[1], ip[2], ip[3] = 0xFF, 0xFF, 0xFF
		ip[7] = 0xFF // hop limit
	default:
		return 0, errNotRoCE
	}
	n := 8 + ipLen + udpHdrSize
	hdr[n-2], hdr[n-1] = 0xFF, 0xFF // UDP checksum
	crc := crc32.Update(0, crc32.IEEETable, hdr[:n])
	dgram := pkt[ipLen+udpHdrSize : len(pkt)-ICRCSize]
	crc = icrcBTH(crc, dgram)
	return crcUpdate(crc, dgram[BTHSize:]), nil
}

// VerifyICRC reports whether the ICRC at the end of a whole IP packet is
// correct.
func VerifyICRC(pkt []byte) bool {
	crc, err := ICRC(pkt)
	return err == nil && binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCSize:]) == crc
}

// # Verifying without the IP Identification
//
// A UDP socket does not show the received IPv4 header's Identification
// field nor its DF flag, and both are covered by the ICRC (senders such as
// rxe pick the ID with __ip_select_ident). CRC is affine over GF(2): for a
// fixed length, ICRC(ID, DF) = ICRC(0, 0) XOR L(ID, DF) with L linear in
// those 17 bits. The receiver computes the syndrome
//
//	s = received ICRC XOR ICRC(ID=0, DF=0)
//
// and solves L(x) = s. The 17 columns of L are independent (they lie
// within one 24-bit burst, which CRC-32 always detects), so a solution,
// when there is one, is unique and is the sent ID and DF. A corrupted
// packet is accepted only if its syndrome happens to fall in the 17-bit
// column space: a 2^-15 chance, against 2^-32 for a receiver that sees the
// whole header.

// solveTab is the elimination table for one datagram length: an XOR basis
// of the columns, indexed by pivot (highest set) bit, with the combination
// of unknown bits (ID in bits 0-15, DF in bit 16) each basis vector is.
type solveTab struct {
	v [32]uint32
	m [32]uint32
	// col is L's columns: what each unknown bit flips in the ICRC.
	col [17]uint32
}

// idBits is where the unknown bits sit in the ICRC stream: ID at stream
// bytes 12-13 (IP header bytes 4-5), DF at byte 14 bit 0x40.
func unknownBit(j int) (off int, mask byte) {
	switch {
	case j < 8:
		return 13, 1 << j
	case j < 16:
		return 12, 1 << (j - 8)
	}
	return 14, 0x40
}

var zeroBlock [4096]byte

func crcZeros(crc uint32, n int) uint32 {
	for n > 0 {
		k := min(n, len(zeroBlock))
		crc = crcUpdate(crc, zeroBlock[:k])
		n -= k
	}
	return crc
}

func newSolveTab(udpLen int) *solveTab {
	// Stream length: prefix, then the datagram without its ICRC.
	n := icrcPrefixV4 + udpLen - udpHdrSize - ICRCSize
	base := crcZeros(0, n)
	t := new(solveTab)
	for j := range 17 {
		off, mask := unknownBit(j)
		var head [15]byte
		head[off] = mask
		v := crc32.Update(0, crc32.IEEETable, head[:off+1])
		v = crcZeros(v, n-off-1) ^ base
		t.col[j] = v
		m := uint32(1) << j
		for v != 0 {
			p := 31 - bits.LeadingZeros32(v)
			if t.v[p] == 0 {
				t.v[p], t.m[p] = v, m
				break
			}
			v ^= t.v[p]
			m ^= t.m[p]
		}
	}
	return t
}

// solve returns the ID and DF whose contribution is syndrome s.
func (t *solveTab) solve(s uint32) (id uint16, df bool, ok bool) {
	var x uint32
	for s != 0 {
		p := 31 - bits.LeadingZeros32(s)
		if t.v[p] == 0 {
			return 0, false, false
		}
		s ^= t.v[p]
		x ^= t.m[p]
	}
	return uint16(x), x>>16&1 != 0, true
}

// icrcIDDelta is what changing an IPv4 datagram's IP ID from 0 to id
// flips in its ICRC (udpLen is the UDP length, header included).
func icrcIDDelta(udpLen int, id uint16) uint32 {
	t := solveTabFor(udpLen)
	var d uint32
	for j := range 16 {
		if id>>j&1 != 0 {
			d ^= t.col[j]
		}
	}
	return d
}

// solveTabs caches the tables by UDP length, two levels, built lazily.
var solveTabs [256]atomic.Pointer[[256]atomic.Pointer[solveTab]]

func solveTabFor(udpLen int) *solveTab {
	hi, lo := udpLen>>8&0xFF, udpLen&0xFF
	l2 := solveTabs[hi].Load()
	if l2 == nil {
		l2 = new([256]atomic.Pointer[solveTab])
		if !solveTabs[hi].CompareAndSwap(nil, l2) {
			l2 = solveTabs[hi].Load()
		}
	}
	t := l2[lo].Load()
	if t == nil {
		t = newSolveTab(udpLen)
		l2[lo].Store(t)
	}
	return t
}

// SolveIPv4ID checks the ICRC of a RoCEv2 datagram received over IPv4 when
// the IP Identification and DF flag are unknown. dgram is the UDP payload
// (BTH through ICRC); src, dst and the ports are the IP and UDP ones. It
// returns the ID and DF the sender used and ok; ok is false when no ID and
// DF make the ICRC right.
func SolveIPv4ID(dgram []byte, src, dst [4]byte, sport, dport uint16) (id uint16, df bool, ok bool) {
	if len(dgram) < BTHSize+ICRCSize || len(dgram)+udpHdrSize > 0xFFFF-ipv4HdrSize {
		return 0, false, false
	}
	var h icrcHead
	udpLen := udpHdrSize + len(dgram)
	body := dgram[:len(dgram)-ICRCSize]
	crc := h.start(src, dst, 0, false, sport, dport, udpLen, body)
	crc = crcUpdate(crc, body[BTHSize:])
	s := crc ^ binary.LittleEndian.Uint32(dgram[len(dgram)-ICRCSize:])
	return solveTabFor(udpLen).solve(s)
}
