package roce

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refCRC32LE is the kernel's crc32_le: reflected CRC-32, polynomial
// 0xEDB88320, bit at a time, no pre- or post-inversion.
func refCRC32LE(crc uint32, p []byte) uint32 {
	for _, b := range p {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xEDB88320
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// refICRCv4 is rxe_icrc_hdr + rxe_icrc_check, transcribed: a masked copy of
// the IPv4 and UDP headers and BTH, crc32_le from seed 0xdebb20e3, the
// rest of the packet, complemented.
func refICRCv4(pkt []byte) uint32 {
	ps := make([]byte, 20+8+12)
	copy(ps, pkt[:40])
	ps[1] = 0xFF                // tos
	ps[8] = 0xFF                // ttl
	ps[10], ps[11] = 0xFF, 0xFF // check = CSUM_MANGLED_0
	ps[26], ps[27] = 0xFF, 0xFF // udp check
	ps[28+4] = 0xFF             // bth->qpn |= ~BTH_QPN_MASK
	crc := refCRC32LE(0xdebb20e3, ps)
	crc = refCRC32LE(crc, pkt[40:len(pkt)-4])
	return ^crc
}

// ipv4Packet wraps a datagram (with ICRC field) in IPv4 and UDP headers.
func ipv4Packet(dgram []byte, src, dst [4]byte, id uint16, df bool, sport uint16) []byte {
	pkt := make([]byte, 28+len(dgram))
	pkt[0] = 0x45
	pkt[1] = 0x02 // ECN bits: masked anyway
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	binary.BigEndian.PutUint16(pkt[4:], id)
	if df {
		pkt[6] = 0x40
	}
	pkt[8] = 64
	pkt[9] = 17
	copy(pkt[12:], src[:])
	copy(pkt[16:], dst[:])
	binary.BigEndian.PutUint16(pkt[10:], IPv4Checksum(pkt[:20]))
	binary.BigEndian.PutUint16(pkt[20:], sport)
	binary.BigEndian.PutUint16(pkt[22:], UDPPort)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(dgram)))
	binary.BigEndian.PutUint16(pkt[26:], 0x1234) // any UDP checksum: masked
	copy(pkt[28:], dgram)
	return pkt
}

func sealICRC(t testing.TB, pkt []byte) {
	crc, err := ICRC(pkt)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(pkt[len(pkt)-4:], crc)
}

func TestICRCMatchesKernelAlgorithm(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, plen := range []int{0, 1, 3, 64, 1024, 4096} {
		payload := make([]byte, plen)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: 17, QKey: 0x01234567, SrcQPN: 0x345678}
		if plen%2 == 1 {
			h.Opcode, h.Imm = OpUDSendOnlyImm, 0xCAFEF00D
		}
		pkt := ipv4Packet(datagram(h, payload), [4]byte{10, 0, 0, 1}, [4]byte{239, 1, 2, 3}, uint16(rng.Uint32()), true, 0xC123)
		got, err := ICRC(pkt)
		require.NoError(t, err)
		assert.Equal(t, refICRCv4(pkt), got, "payload %d", plen)
		// And the masked fields really are masked.
		pkt2 := append([]byte(nil), pkt...)
		pkt2[1], pkt2[8], pkt2[10], pkt2[26], pkt2[28+4] = 0xB8, 1, 0x55, 0x66, 0x77
		got2, _ := ICRC(pkt2)
		assert.Equal(t, got, got2, "masked fields changed the ICRC")
		pkt2[4] ^= 1 // the IP ID is covered
		got3, _ := ICRC(pkt2)
		assert.NotEqual(t, got, got3)
		sealICRC(t, pkt)
		assert.True(t, VerifyICRC(pkt))
	}
}

func TestICRCIPv6Masks(t *testing.T) {
	t.Parallel()
	dg := datagram(Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 3, QKey: 1, SrcQPN: 2}, []byte("v6 payload"))
	pkt := make([]byte, 48+len(dg))
	pkt[0] = 0x60
	binary.BigEndian.PutUint16(pkt[4:], uint16(8+len(dg)))
	pkt[6], pkt[7] = 17, 64
	pkt[8], pkt[24] = 0xfe, 0xff
	binary.BigEndian.PutUint16(pkt[42:], UDPPort)
	copy(pkt[48:], dg)
	a, err := ICRC(pkt)
	require.NoError(t, err)
	pkt[0], pkt[1], pkt[3], pkt[7] = 0x6A, 0xBC, 0x12, 1 // traffic class, flow label, hop limit
	b, err := ICRC(pkt)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	pkt[9] ^= 1 // source address is covered
	c, _ := ICRC(pkt)
	assert.NotEqual(t, a, c)
	_, err = ICRC([]byte{0x50, 1, 2})
	assert.Error(t, err)
}

// TestUDICRCHeadMatchesFullCRC checks FlowICRC's remembered flow head
// against the kernel's algorithm: datagrams of one flow (the cache hits,
// only ID and PSN change) interleaved with flow changes in every other
// field the head covers (the cache must miss), each completed with a
// random payload and compared with refICRCv4 over the whole packet.
func TestUDICRCHeadMatchesFullCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var u FlowICRC
	src, dst := [4]byte{127, 1, 2, 3}, [4]byte{239, 1, 2, 3}
	sport := uint16(UDPPort)
	h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, QKey: 0x01234567, SrcQPN: 0x42}
	plen, df := 64, true
	hits, unchanged := 0, 0
	for i := range 2000 {
		switch rng.IntN(16) { // mostly the same flow, sometimes another
		case 0:
			src[3] = byte(rng.Uint32())
		case 1:
			sport = uint16(rng.Uint32())
		case 2:
			plen = rng.IntN(200)
		case 3:
			h.QKey, h.SrcQPN, h.SE = rng.Uint32(), rng.Uint32()&0xFFFFFF, !h.SE
		case 4:
			df = !df
		default:
			unchanged++
		}
		h.PSN = rng.Uint32() & 0xFFFFFF
		h.PadCnt = uint8(PadFor(plen))
		id := uint16(rng.Uint32())
		dgram := make([]byte, HdrSize+plen+int(h.PadCnt)+ICRCSize)
		h.Encode(dgram)
		for j := HdrSize; j < HdrSize+plen; j++ {
			dgram[j] = byte(rng.Uint32())
		}
		before := u.last
		crc := u.Start(src, dst, id, df, sport, UDPPort, UDPHdrSize+len(dgram), dgram)
		if u.last == before {
			hits++
		}
		crc = crc32.Update(crc, crc32.IEEETable, dgram[HdrSize:len(dgram)-ICRCSize])
		pkt := ipv4Packet(dgram, src, dst, id, df, sport)
		require.Equal(t, refICRCv4(pkt), crc, "datagram %d", i)
	}
	assert.GreaterOrEqual(t, hits, unchanged-1, "the flow head should be remembered between datagrams of one flow (the first has none to find)")
	assert.Greater(t, 2000-hits, 300, "flow changes should be seen")
}

// TestSameHead: the word-wise head comparison agrees with the array
// comparison, for a difference in any one byte.
func TestSameHead(t *testing.T) {
	var a, b [udHeadLen]byte
	for i := range a {
		a[i] = byte(i * 7)
	}
	b = a
	require.True(t, sameHead(&a, &b))
	for i := range b {
		b[i] ^= 0x10
		require.False(t, sameHead(&a, &b), "byte %d differs", i)
		b[i] ^= 0x10
	}
}

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
