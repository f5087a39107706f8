package roce

import (
	"testing"
)

var fuzzFilter = Filter{QPN: 0x123456, QKey: 0x01234567, Groups: [][4]byte{{239, 1, 2, 3}}}

func fuzzSeeds(f *testing.F) {
	for i, plen := range []int{0, 1, 5, 64, 1024} {
		h := Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: uint32(i), QKey: 0x01234567, SrcQPN: 42}
		if i%2 == 1 {
			h.Opcode, h.Imm, h.DestQPN = OpUDSendOnlyImm, 7, 0x123456
		}
		pkt := ipv4Packet(datagram(h, make([]byte, plen)), [4]byte{127, 0, 0, 9}, [4]byte{239, 1, 2, 3}, uint16(i*977), true, 4791)
		sealICRC(f, pkt)
		f.Add(pkt)
	}
}

// FuzzDecode feeds hostile packets to Decode and CheckIPv4 (as whole IPv4
// packets) and SolveIPv4ID: none may panic, each is accepted or dropped
// with a known reason, and an accepted payload lies inside the packet.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var h Header
		p, r := CheckIPv4(pkt, &fuzzFilter, &h)
		if r >= NumDropReasons {
			t.Fatalf("CheckIPv4: unknown reason %d", r)
		}
		if (r == Accepted) != (p != nil) {
			t.Fatalf("CheckIPv4: reason %v with payload %d bytes", r, len(p))
		}
		if r == Accepted {
			if !VerifyICRC(pkt) {
				t.Fatal("accepted a packet with a bad ICRC")
			}
			if id, df, ok := SolveIPv4ID(pkt[28:], [4]byte(pkt[12:16]), [4]byte(pkt[16:20]), uint16(pkt[20])<<8|uint16(pkt[21]), UDPPort); !ok ||
				id != uint16(pkt[4])<<8|uint16(pkt[5]) || df != (pkt[6]&0x40 != 0) {
				t.Fatalf("SolveIPv4ID: %#x %v %v, want the header's", id, df, ok)
			}
		}
		if len(pkt) >= 28 {
			p, r = Decode(pkt[28:], &h)
			if r >= NumDropReasons || (r == Accepted) != (p != nil && len(p) <= len(pkt)) {
				t.Fatalf("Decode: reason %v, payload %d bytes", r, len(p))
			}
			SolveIPv4ID(pkt[28:], [4]byte{}, [4]byte{}, 0, 0)
		}
		p, r = Decode(pkt, &h)
		if r >= NumDropReasons || (r == Accepted) != (p != nil) {
			t.Fatalf("Decode: reason %v, payload %d bytes", r, len(p))
		}
	})
}
