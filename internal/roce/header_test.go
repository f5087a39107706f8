package roce

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// datagram builds a UD SEND_ONLY[/IMM] datagram: headers, payload, zero
// pad, and a zero ICRC field.
func datagram(h Header, payload []byte) []byte {
	h.PadCnt = uint8(PadFor(len(payload)))
	b := make([]byte, h.Len()+len(payload)+int(h.PadCnt)+ICRCSize)
	n := h.Encode(b)
	copy(b[n:], payload)
	return b
}

func TestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	for _, h := range []Header{
		{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: 0xABCDEF, QKey: 0x01234567, SrcQPN: 0x123456},
		{Opcode: OpUDSendOnlyImm, SE: true, PKey: 0x7FFF, DestQPN: 2, PSN: 0, QKey: 0x80000001, SrcQPN: 0xFFFFFE, Imm: 0xDEADBEEF},
		{Opcode: OpUDSendOnly, M: true, AckReq: true, PKey: 0xFFFF, DestQPN: 7, PSN: 0xFFFFFF, QKey: 1, SrcQPN: 9},
	} {
		for _, plen := range []int{0, 1, 2, 3, 4, 5, 1024} {
			payload := bytes.Repeat([]byte{0xA5}, plen)
			d := datagram(h, payload)
			want := h
			want.PadCnt = uint8(PadFor(plen))
			var got Header
			p, r := Decode(d, &got)
			require.Equal(t, Accepted, r, "payload %d", plen)
			assert.Equal(t, want, got)
			assert.Equal(t, payload, p)
			assert.Equal(t, 0, (h.Len()+plen+int(want.PadCnt))%4, "headers+payload+pad not 4-byte aligned")
		}
	}
}

func TestEncodeWireBytes(t *testing.T) {
	t.Parallel()
	h := Header{Opcode: OpUDSendOnlyImm, SE: true, PadCnt: 3, PKey: 0xFFFF, DestQPN: 0xFFFFFF, PSN: 0x010203,
		QKey: 0x01234567, SrcQPN: 0x0A0B0C, Imm: 0x11223344}
	b := make([]byte, MaxHdrSize)
	require.Equal(t, MaxHdrSize, h.Encode(b))
	want := []byte{
		0x65, 0x80 | 3<<4, 0xFF, 0xFF, // opcode, SE|PadCnt|TVer 0, P_Key
		0x00, 0xFF, 0xFF, 0xFF, // reserved, dest QPN
		0x00, 0x01, 0x02, 0x03, // A=0, PSN
		0x01, 0x23, 0x45, 0x67, // Q_Key
		0x00, 0x0A, 0x0B, 0x0C, // reserved, source QPN
		0x11, 0x22, 0x33, 0x44, // ImmDt
	}
	assert.Equal(t, want, b)
}

func TestDecodeBad(t *testing.T) {
	t.Parallel()
	good := func() []byte {
		return datagram(Header{Opcode: OpUDSendOnly, PKey: 0xFFFF, DestQPN: 5, QKey: 1, SrcQPN: 6}, []byte("abcd"))
	}
	for _, tc := range []struct {
		name   string
		mangle func([]byte) []byte
		want   DropReason
	}{
		{"empty", func(b []byte) []byte { return nil }, DropTruncated},
		{"headers only", func(b []byte) []byte { return b[:HdrSize] }, DropTruncated},
		{"one short of ICRC", func(b []byte) []byte { return b[:HdrSize+ICRCSize-1] }, DropTruncated},
		{"TVer 1", func(b []byte) []byte { b[1] |= 1; return b }, DropBadTVer},
		{"RC SEND_ONLY", func(b []byte) []byte { b[0] = 0x04; return b }, DropBadOpcode},
		{"UD SEND_FIRST", func(b []byte) []byte { b[0] = 0x60; return b }, DropBadOpcode},
		{"P_Key 0x8001", func(b []byte) []byte { b[2], b[3] = 0x80, 0x01; return b }, DropBadPKey},
		{"P_Key 0", func(b []byte) []byte { b[2], b[3] = 0, 0; return b }, DropBadPKey},
		{"pad past payload", func(b []byte) []byte { b[1] |= 3 << 4; return b[:HdrSize+2+ICRCSize] }, DropBadPad},
		{"imm without room", func(b []byte) []byte { b[0] = OpUDSendOnlyImm; return b[:HdrSize+ICRCSize+2] }, DropTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Header
			p, r := Decode(tc.mangle(good()), &h)
			assert.Equal(t, tc.want, r, "got %v, want %v", r, tc.want)
			assert.Nil(t, p)
			assert.NotEqual(t, "unknown drop reason", r.String())
		})
	}
	var h Header
	d := good()
	d[2], d[3] = 0x7F, 0xFF // limited member P_Key: accepted
	_, r := Decode(d, &h)
	assert.Equal(t, Accepted, r)
	d = good()
	d[8] |= 0x80 // A bit: ignored
	_, r = Decode(d, &h)
	assert.Equal(t, Accepted, r)
}
