package roce

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

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

// TestIPv4ChecksumWords: the 32-bit-word sum of a 20-byte header gives
// the checksum the 16-bit one's-complement sum of RFC 1071 gives, also
// for headers whose sums carry (all ones, all zeros, random).
func TestIPv4ChecksumWords(t *testing.T) {
	rfc1071 := func(h []byte) uint16 {
		var sum uint32
		for i := 0; i < len(h); i += 2 {
			sum += uint32(h[i])<<8 | uint32(h[i+1])
		}
		for sum>>16 != 0 {
			sum = sum&0xFFFF + sum>>16
		}
		return ^uint16(sum)
	}
	hs := [][]byte{make([]byte, 20), make([]byte, 20)}
	for i := range hs[1] {
		hs[1][i] = 0xFF
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		h := make([]byte, 20)
		for i := range h {
			h[i] = byte(r.Uint32())
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.Equal(t, rfc1071(h), IPv4Checksum(h), "header % x", h)
	}
}
