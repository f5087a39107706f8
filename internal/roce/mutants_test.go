package roce

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// refICRCv6 is the ICRC of an IPv6 packet as IBA Annex A17 defines it,
// written out apart from ICRC: traffic class, flow label, hop limit, UDP
// checksum and BTH resv8a masked with ones.
func refICRCv6(pkt []byte) uint32 {
	ps := make([]byte, 40+8+12)
	copy(ps, pkt)
	ps[0] |= 0x0F                          // traffic class, high nibble
	ps[1], ps[2], ps[3] = 0xFF, 0xFF, 0xFF // traffic class, low nibble; flow label
	ps[7] = 0xFF                           // hop limit
	ps[46], ps[47] = 0xFF, 0xFF            // udp check
	ps[48+4] = 0xFF                        // bth resv8a
	crc := refCRC32LE(0xdebb20e3, ps)
	crc = refCRC32LE(crc, pkt[60:len(pkt)-4])
	return ^crc
}

// ipv6Packet wraps a datagram (with ICRC field) in IPv6 and UDP headers.
func ipv6Packet(dgram []byte) []byte {
	pkt := make([]byte, 48+len(dgram))
	pkt[0], pkt[1], pkt[2], pkt[3] = 0x6B, 0x80, 0x12, 0x34 // traffic class 0xB8, flow label 0x1234
	binary.BigEndian.PutUint16(pkt[4:], uint16(8+len(dgram)))
	pkt[6], pkt[7] = 17, 64
	for i := range 32 {
		pkt[8+i] = byte(0x20 + i) // addresses
	}
	binary.BigEndian.PutUint16(pkt[40:], 0xC001)
	binary.BigEndian.PutUint16(pkt[42:], UDPPort)
	binary.BigEndian.PutUint16(pkt[44:], uint16(8+len(dgram)))
	binary.BigEndian.PutUint16(pkt[46:], 0x5A5A) // any UDP checksum: masked
	copy(pkt[48:], dgram)
	return pkt
}

// ICRC over IPv6 matches the spec's definition, down to the shortest
// packet it takes (IPv6, UDP, BTH, ICRC); a shorter one is refused, with 0.
func TestICRCIPv6MatchesSpec(t *testing.T) {
	t.Parallel()
	for _, plen := range []int{0, 1, 5, 300} {
		pkt := ipv6Packet(datagram(Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: 9, QKey: 0x11, SrcQPN: 0x22}, bytes.Repeat([]byte{0xC3}, plen)))
		got, err := ICRC(pkt)
		if err != nil || got != refICRCv6(pkt) {
			t.Errorf("payload %d: ICRC = %#x, %v; want %#x", plen, got, err, refICRCv6(pkt))
		}
	}
	bth := make([]byte, BTHSize+ICRCSize)
	bth[0] = OpUDSendOnly
	pkt := ipv6Packet(bth)
	if got, err := ICRC(pkt); err != nil || got != refICRCv6(pkt) {
		t.Errorf("shortest (%d bytes): ICRC = %#x, %v; want %#x", len(pkt), got, err, refICRCv6(pkt))
	}
	for _, bad := range [][]byte{pkt[:len(pkt)-1], {0x45, 0, 0}, nil} {
		if got, err := ICRC(bad); err == nil || got != 0 {
			t.Errorf("ICRC of %d bytes (%#x...) = %#x, %v; want 0 and an error", len(bad), bad[:min(len(bad), 1)], got, err)
		}
	}
}

// CheckIPv4 accepts a packet for the QP or a joined group with its Q_Key
// and ICRC, and says why it drops any other.
func TestCheckIPv4(t *testing.T) {
	t.Parallel()
	f := &Filter{QPN: 0x123, QKey: 0x777, Groups: [][4]byte{{239, 1, 1, 1}}}
	payload := []byte("check me")
	build := func(dqpn, qkey uint32, dst [4]byte, edit func([]byte)) []byte {
		h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: dqpn, PSN: 1, QKey: qkey, SrcQPN: 0x55}
		pkt := ipv4Packet(datagram(h, payload), [4]byte{10, 0, 0, 1}, dst, 0, true, 0xC000)
		if edit != nil {
			edit(pkt)
		}
		crc, _ := ICRC(pkt)
		binary.LittleEndian.PutUint32(pkt[len(pkt)-4:], crc)
		return pkt
	}
	host, group, other := [4]byte{10, 0, 0, 2}, [4]byte{239, 1, 1, 1}, [4]byte{239, 2, 2, 2}
	tests := []struct {
		name string
		pkt  []byte
		want DropReason
	}{
		{"unicast", build(0x123, 0x777, host, nil), Accepted},
		{"joined group", build(0xFFFFFF, 0x777, group, nil), Accepted},
		{"group not joined", build(0xFFFFFF, 0x777, other, nil), DropNotForUs},
		{"another QPN", build(0x124, 0x777, host, nil), DropNotForUs},
		{"Q_Key", build(0x123, 0x778, host, nil), DropBadQKey},
		{"UDP port", build(0x123, 0x777, host, func(p []byte) { binary.BigEndian.PutUint16(p[22:], UDPPort+1) }), DropNotForUs},
		{"IP length", build(0x123, 0x777, host, func(p []byte) { binary.BigEndian.PutUint16(p[2:], uint16(len(p)+1)) }), DropTruncated},
		{"ICRC", func() []byte { p := build(0x123, 0x777, host, nil); p[len(p)-1] ^= 1; return p }(), DropBadICRC},
		{"bare headers to another port", func() []byte {
			p := make([]byte, IPv4HdrSize+UDPHdrSize)
			p[0], p[9] = 0x45, 17
			binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
			binary.BigEndian.PutUint16(p[22:], UDPPort+1)
			binary.BigEndian.PutUint16(p[24:], UDPHdrSize)
			return p
		}(), DropNotForUs},
	}
	for _, tt := range tests {
		var h Header
		got, r := CheckIPv4(tt.pkt, f, &h)
		if r != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, r, tt.want)
			continue
		}
		if r == Accepted && !bytes.Equal(got, payload) {
			t.Errorf("%s: payload %q, want %q", tt.name, got, payload)
		}
	}
}

// FillGRH writes rxe's GRH for IPv4: 20 zero bytes, then the header.
func TestFillGRH(t *testing.T) {
	t.Parallel()
	grh := bytes.Repeat([]byte{0xEE}, 40)
	FillGRH(grh, [4]byte{10, 1, 2, 3}, [4]byte{239, 4, 5, 6}, 0xB8, 17, 0xABCD, true, 1000)
	want := []byte{
		0x45, 0xB8, 0x04, 0x04, // version, IHL; TOS; total length 20+8+1000
		0xAB, 0xCD, 0x40, 0x00, // ID; DF
		17, 17, 0, 0, // TTL; UDP; checksum (below)
		10, 1, 2, 3,
		239, 4, 5, 6,
	}
	binary.BigEndian.PutUint16(want[10:], IPv4Checksum(want))
	if !bytes.Equal(grh[:20], make([]byte, 20)) || !bytes.Equal(grh[20:], want) {
		t.Errorf("FillGRH = % x\nwant     % x % x", grh, make([]byte, 20), want)
	}
	if IPv4Checksum(grh[20:]) != 0 {
		t.Errorf("the header's checksum does not verify")
	}
	FillGRH(grh, [4]byte{}, [4]byte{}, 0, 0, 0, false, 0)
	if grh[26] != 0 || grh[27] != 0 {
		t.Errorf("DF false: flags % x, want 00 00", grh[26:28])
	}
}

// SolveIPv4ID answers for any UDP length up to IPv4's largest, each from
// its own table (lengths 32 KiB apart included), and says 0, false where
// no ID and DF fit.
func TestSolveIPv4IDLengths(t *testing.T) {
	t.Parallel()
	src, dst := [4]byte{10, 9, 8, 7}, [4]byte{239, 0, 0, 9}
	for _, dlen := range []int{100, 100 + 1<<15, 0xFFFF - IPv4HdrSize - UDPHdrSize} {
		dgram := make([]byte, dlen)
		for i := range dgram {
			dgram[i] = byte(i * 7)
		}
		dgram[0] = OpUDSendOnly
		pkt := ipv4Packet(dgram, src, dst, 0x1234, true, 0xC0DE)
		sealICRC(t, pkt)
		id, df, ok := SolveIPv4ID(pkt[28:], src, dst, 0xC0DE, UDPPort)
		if !ok || id != 0x1234 || !df {
			t.Errorf("datagram of %d bytes: ID %#x, DF %v, ok %v; want 0x1234, true, true", dlen, id, df, ok)
		}
		pkt[40] ^= 0x80
		if id, df, ok := SolveIPv4ID(pkt[28:], src, dst, 0xC0DE, UDPPort); ok || id != 0 || df {
			t.Errorf("corrupted datagram of %d bytes: ID %#x, DF %v, ok %v; want 0, false, false", dlen, id, df, ok)
		}
	}
}

// IPv4Checksum of a header with options (longer than 20 bytes) is
// RFC 1071's sum too.
func TestIPv4ChecksumOptions(t *testing.T) {
	t.Parallel()
	rfc1071 := func(h []byte) uint16 {
		var sum uint64
		for i := 0; i < len(h); i += 2 {
			sum += uint64(binary.BigEndian.Uint16(h[i:]))
		}
		for sum > 0xFFFF {
			sum = sum&0xFFFF + sum>>16
		}
		return ^uint16(sum)
	}
	var seed uint32 = 1
	for n := 24; n <= 60; n += 4 {
		for range 200 {
			h := make([]byte, n)
			for i := range h {
				seed = seed*1664525 + 1013904223
				h[i] = byte(seed >> 24)
			}
			if got, want := IPv4Checksum(h), rfc1071(h); got != want {
				t.Fatalf("header of %d bytes % x: %#04x, want %#04x", n, h, got, want)
			}
		}
	}
}
