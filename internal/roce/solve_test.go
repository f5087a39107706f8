package roce

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

func TestSolveIPv4IDRecoversIDAndDF(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	src, dst := [4]byte{127, 1, 2, 3}, [4]byte{239, 9, 8, 7}
	for i := range 300 {
		plen := rng.IntN(1100)
		payload := make([]byte, plen)
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: uint32(i), QKey: 0x01234567, SrcQPN: 0x10203}
		id, df := uint16(rng.Uint32()), rng.IntN(2) == 1
		sport := uint16(0xC000 | rng.IntN(1<<14))
		pkt := ipv4Packet(datagram(h, payload), src, dst, id, df, sport)
		sealICRC(t, pkt)

		gotID, gotDF, ok := SolveIPv4ID(pkt[28:], src, dst, sport, UDPPort)
		require.True(t, ok, "valid packet %d rejected", i)
		require.Equal(t, id, gotID)
		require.Equal(t, df, gotDF)

		// Any corruption of what the receiver sees must be rejected
		// (up to the documented 2^-15 false-accept rate; fixed seed).
		bad := append([]byte(nil), pkt[28:]...)
		bad[rng.IntN(len(bad))] ^= byte(1 << rng.IntN(8))
		_, _, ok = SolveIPv4ID(bad, src, dst, sport, UDPPort)
		assert.False(t, ok, "corrupted packet %d accepted", i)
		_, _, ok = SolveIPv4ID(pkt[28:], src, [4]byte{239, 9, 8, 6}, sport, UDPPort)
		assert.False(t, ok, "packet %d accepted for the wrong destination", i)
	}
}

func TestSolveTabColumnsIndependent(t *testing.T) {
	t.Parallel()
	for _, udpLen := range []int{32, 33, 100, 1060, 4135, 65507} {
		tab := newSolveTab(udpLen)
		rank := 0
		for _, v := range tab.v {
			if v != 0 {
				rank++
			}
		}
		assert.Equal(t, 17, rank, "UDP length %d", udpLen)
	}
}

func BenchmarkSolveIPv4ID(b *testing.B) {
	h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, QKey: 1, SrcQPN: 2}
	pkt := ipv4Packet(datagram(h, make([]byte, 1024)), [4]byte{127, 0, 0, 2}, [4]byte{239, 0, 0, 1}, 0x1234, true, 4791)
	sealICRC(b, pkt)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if _, _, ok := SolveIPv4ID(pkt[28:], [4]byte{127, 0, 0, 2}, [4]byte{239, 0, 0, 1}, 4791, UDPPort); !ok {
			b.Fatal("rejected")
		}
	}
}
