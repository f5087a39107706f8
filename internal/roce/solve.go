package roce

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"sync/atomic"
)

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

// SolveTab is the elimination table for one datagram length: an XOR basis
// of the columns, indexed by pivot (highest set) bit, with the combination
// of unknown bits (ID in bits 0-15, DF in bit 16) each basis vector is.
type SolveTab struct {
	v [32]uint32
	m [32]uint32
	// col is L's columns: what each unknown bit flips in the ICRC.
	col [17]uint32
}

// unknownBit is where unknown bit j (ID bits 0-15, DF as bit 16) sits
// in the ICRC stream: the ID at stream bytes 12-13 (IP header bytes 4-5),
// DF at byte 14, bit 0x40.
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
		crc = CRCUpdate(crc, zeroBlock[:k])
		n -= k
	}
	return crc
}

func newSolveTab(udpLen int) *SolveTab {
	// Stream length: prefix, then the datagram without its ICRC.
	n := icrcPrefixV4 + udpLen - UDPHdrSize - ICRCSize
	base := crcZeros(0, n)
	t := new(SolveTab)
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

// Solve returns the IP ID and DF flag whose contribution to the ICRC is
// syndrome s: the XOR of the received ICRC and one computed with a
// guessed ID and DF, so that the sent ID is the guess XOR id, and DF the
// guess's flipped where df is true. ok is false when no ID and DF give s.
func (t *SolveTab) Solve(s uint32) (id uint16, df bool, ok bool) {
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

// IDDelta is what changing an IPv4 datagram's IP ID from 0 to id
// flips in its ICRC (udpLen is the UDP length, header included).
func IDDelta(udpLen int, id uint16) uint32 {
	t := SolveTabFor(udpLen)
	var d uint32
	for j := range 16 {
		if id>>j&1 != 0 {
			d ^= t.col[j]
		}
	}
	return d
}

// solveTabs caches the tables by UDP length, two levels, built lazily.
var solveTabs [256]atomic.Pointer[[256]atomic.Pointer[SolveTab]]

// SolveTabFor returns the table for IPv4 datagrams of udpLen bytes (UDP
// header included), built at its first use and kept.
func SolveTabFor(udpLen int) *SolveTab {
	hi, lo := udpLen>>8&0xFF, udpLen&0xFF
	l2 := solveTabs[hi].Load()
	if l2 == nil {
		l2 = new([256]atomic.Pointer[SolveTab])
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
	if len(dgram) < BTHSize+ICRCSize || len(dgram)+UDPHdrSize > 0xFFFF-IPv4HdrSize {
		return 0, false, false
	}
	var h icrcHead
	udpLen := UDPHdrSize + len(dgram)
	body := dgram[:len(dgram)-ICRCSize]
	crc := h.start(src, dst, 0, false, sport, dport, udpLen, body)
	crc = CRCUpdate(crc, body[BTHSize:])
	s := crc ^ binary.LittleEndian.Uint32(dgram[len(dgram)-ICRCSize:])
	return SolveTabFor(udpLen).Solve(s)
}
