package reliable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []header{
		{kind: kindData, flags: flagRepair | flagFlowMin, frag: 2, nfrag: 3, tx: 0xfffe, session: 0xdeadbeef, seq: 1<<40 + 7, msg: 99},
		{kind: kindHeartbeat, flags: flagFin | 15<<gsizeShift, tx: 1, session: 1, seq: 5, msg: 6},
		{kind: kindData, flags: 6 << gsizeShift, nfrag: 1, seq: 1},
		{kind: kindNAK, tx: 0x8001, session: 2, seq: 10},
		{kind: kindStatus, session: 3, seq: 11},
		{kind: kindLost, session: 4, seq: 12, msg: 13},
	} {
		b := make([]byte, headerLen+map[kind]int{kindData: 5, kindHeartbeat: hbPayload, kindNAK: nakPayload, kindStatus: statusPayload}[h.kind])
		putHeader(b, &h)
		var got header
		p, err := decode(b, &got)
		require.NoError(t, err, "%v", h.kind)
		require.Equal(t, h, got)
		require.Len(t, p, len(b)-headerLen)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := func(k kind, n int) []byte {
		b := make([]byte, headerLen+n)
		h := header{kind: k, session: 1, seq: 4}
		if k == kindData {
			h.nfrag = 1
		}
		putHeader(b, &h)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		mod  func(b []byte)
		want error
	}{
		{"short", make([]byte, headerLen-1), nil, errShort},
		{"version", good(kindData, 0), func(b []byte) { b[0] = 2<<4 | 1 }, errVersion},
		{"kind", good(kindData, 0), func(b []byte) { b[0] = 1<<4 | 9 }, errKind},
		{"flags", good(kindData, 0), func(b []byte) { b[1] = 0x08 }, errFlags},
		{"group size on a NAK", good(kindNAK, nakPayload), func(b []byte) { b[1] = 0x10 }, errFlags},
		{"group size on a status", good(kindStatus, statusPayload), func(b []byte) { b[1] = 0x80 }, errFlags},
		{"status reserved", good(kindStatus, statusPayload), func(b []byte) { b[7] = 1 }, errReserved},
		{"lost reserved", good(kindLost, 0), func(b []byte) { b[6] = 1 }, errReserved},
		{"no fragments", good(kindData, 0), func(b []byte) { b[5] = 0 }, errFragment},
		{"fragment past count", good(kindData, 0), func(b []byte) { b[3] = 1 }, errFragment},
		{"fragment before seq 0", good(kindData, 0), func(b []byte) { b[3], b[5], b[19] = 5, 6, 1 }, errFragment},
		{"heartbeat short", good(kindHeartbeat, hbPayload-1), nil, errPayload},
		{"nak short", good(kindNAK, nakPayload-1), nil, errPayload},
		{"status fragment", good(kindStatus, statusPayload), func(b []byte) { b[5] = 1 }, errFragment},
		{"heartbeat start other than 1", good(kindHeartbeat, hbPayload), func(b []byte) { b[3] = hbStart + 1 }, errFragment},
		{"heartbeat start in the high byte", good(kindHeartbeat, hbPayload), func(b []byte) { b[2] = 1 }, errFragment},
		{"heartbeat fragment count", good(kindHeartbeat, hbPayload), func(b []byte) { b[3], b[5] = hbStart, 1 }, errFragment},
		{"start on a NAK", good(kindNAK, nakPayload), func(b []byte) { b[3] = hbStart }, errFragment},
		{"start on a status", good(kindStatus, statusPayload), func(b []byte) { b[3] = hbStart }, errFragment},
		{"lost payload", good(kindLost, 1), nil, errPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mod != nil {
				tc.mod(tc.b)
			}
			var h header
			_, err := decode(tc.b, &h)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// FuzzDecode: the decoder never panics, and what it accepts encodes back
// to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, k := range []kind{kindData, kindHeartbeat, kindNAK, kindStatus, kindLost} {
		b := make([]byte, headerLen+16)
		h := header{kind: k, session: 7, seq: 3, msg: 2}
		if k == kindData {
			h.nfrag, h.frag = 2, 1
		}
		putHeader(b, &h)
		f.Add(b)
		f.Add(b[:headerLen])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h header
		p, err := decode(b, &h)
		if err != nil {
			return
		}
		out := make([]byte, headerLen)
		putHeader(out, &h)
		require.Equal(t, b[:headerLen], out)
		want := b[headerLen:]
		if h.kind == kindNAK {
			want = want[:nakPayload] // then padding (nakPays)
		}
		require.Equal(t, want, p)
		if h.kind == kindData {
			require.Less(t, h.frag, h.nfrag)
			require.LessOrEqual(t, uint64(h.frag), h.seq)
		}
	})
}

// The in-place accessors read and write the fields putHeader and decode
// place.
func TestHeaderAccessors(t *testing.T) {
	h := header{kind: kindData, flags: flagFlowMin, frag: 2, nfrag: 3, tx: 7, session: 0xdeadbeef, seq: 9, msg: 1<<40 + 3}
	b := make([]byte, headerLen)
	putHeader(b, &h)
	require.Equal(t, h.frag, fragOf(b))
	require.Equal(t, h.nfrag, nfragOf(b))
	require.Equal(t, h.session, sessionOf(b))
	require.Equal(t, h.msg, msgOf(b))
	require.False(t, keyed(b))
	markRepair(b)
	setTx(b, 0xfffe)
	setKeyed(b, true)
	require.True(t, keyed(b))
	setKeyed(b, false)
	var got header
	_, err := decode(b, &got)
	require.NoError(t, err)
	h.flags |= flagRepair
	h.tx = 0xfffe
	require.Equal(t, h, got)
}

// The header's bytes are where doc.go's wire format puts them, big-endian,
// and the kinds are its numbers: byte 0 is version 1 in the high nibble
// and the kind in the low one, data 1 to lost 5. Sender and receiver
// share the constants, so sending and receiving alone never tell.
func TestHeaderLayout(t *testing.T) {
	b := make([]byte, headerLen)
	putHeader(b, &header{kind: kindData, flags: 0x23, frag: 0x0102, nfrag: 0x0304, tx: 0x0506,
		session: 0x0708090a, seq: 0x0b0c0d0e0f101112, msg: 0x131415161718191a})
	require.Equal(t, []byte{0x11, 0x23, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
		0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a}, b)
	for k, want := range map[kind]byte{kindData: 0x11, kindHeartbeat: 0x12, kindNAK: 0x13, kindStatus: 0x14, kindLost: 0x15} {
		putHeader(b, &header{kind: k})
		require.Equal(t, want, b[0], "byte 0 of a %v datagram", k)
	}
	// Byte 1's bits, as doc.go gives them: a heartbeat's "a write waits"
	// shares 0x1 with data's repair, and the group size is the high
	// nibble.
	for name, f := range map[string][2]int{
		"repair": {flagRepair, 0x1}, "wait": {flagWait, 0x1}, "FlowMin": {flagFlowMin, 0x2},
		"fin": {flagFin, 0x4}, "start": {flagStart, 0x4}, "heartbeat start": {hbStart, 1}, "keyed": {flagKeyed, 0x8}, "group size": {flagsGSize, 0xf0}, "group size shift": {gsizeShift, 4},
	} {
		require.Equal(t, f[1], f[0], "flag %s", name)
	}
}

// The control datagrams' payloads are the sizes doc.go's wire format
// gives, in bytes: a heartbeat 16 (low seq, low msg), a NAK 12 (session,
// count, rtt; padding after it allowed), a status 12 (session, limit), a
// lost notice none. One byte short is refused, and one byte over but for
// the NAK's padding.
func TestControlPayloadSizes(t *testing.T) {
	for _, tc := range []struct {
		k      kind
		size   int
		padded bool
	}{{kindHeartbeat, 16, false}, {kindNAK, 12, true}, {kindStatus, 12, false}, {kindLost, 0, false}} {
		for _, n := range []int{tc.size - 1, tc.size, tc.size + 1} {
			if n < 0 {
				continue
			}
			b := make([]byte, headerLen+n)
			putHeader(b, &header{kind: tc.k, session: 1, seq: 4})
			var h header
			p, err := decode(b, &h)
			if n == tc.size || n > tc.size && tc.padded {
				require.NoError(t, err, "kind %d, payload %d bytes", tc.k, n)
				require.Len(t, p, tc.size, "kind %d, payload %d bytes: got %d bytes, want %d", tc.k, n, len(p), tc.size)
			} else {
				require.ErrorIs(t, err, errPayload, "kind %d, payload %d bytes: got %v, want errPayload", tc.k, n, err)
			}
		}
	}
}

// A NAK pays for what it asks (nakLen): nakPays times its length covers
// count datagrams of the MTU, and it is no longer than that needs, but
// never shorter than a NAK's header and payload nor longer than the MTU.
// Every MTU from that least length to 9000: a device's is a power of
// two (256 to 4096), a multiple of nakPays, where the division is exact,
// so the others are where rounding up shows. Seed 123: `count*mtu + nakPays - 1` -> `- 2`
// rounded down where count*mtu is 1 past a multiple of 8 (a one-datagram
// NAK at MTU 1001 was 125 bytes, paying for 1000).
func TestNAKLenPaysForWhatItAsks(t *testing.T) {
	const least = headerLen + nakPayload
	for mtu := least; mtu <= 9000; mtu++ {
		for _, count := range []uint64{1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 1 << 20} {
			n := nakLen(count, mtu)
			asks := count * uint64(mtu)
			require.True(t, n >= least && n <= mtu, "MTU %d, %d datagrams: %d bytes, want %d to the MTU", mtu, count, n, least)
			require.True(t, n == mtu || uint64(nakPays*n) >= asks, "MTU %d, %d datagrams: %d bytes pay for %d of the %d asked", mtu, count, n, nakPays*n, asks)
			require.True(t, n == least || uint64(nakPays*(n-1)) < asks, "MTU %d, %d datagrams: %d bytes, one fewer would pay for the %d asked", mtu, count, n, asks)
		}
	}
}

// The start marker: data carry it in byte 1 (flagStart), heartbeats in
// the fragment index (hbStart); it decodes on those two kinds only, and
// a datagram without it is not in a start.
func TestStartMarker(t *testing.T) {
	for _, tc := range []struct {
		h     header
		start bool
	}{
		{header{kind: kindData, nfrag: 1, flags: flagStart}, true},
		{header{kind: kindData, nfrag: 1}, false},
		{header{kind: kindData, nfrag: 2, frag: 1, seq: 1}, false}, // a fragment index is not a start
		{header{kind: kindHeartbeat, frag: hbStart}, true},
		{header{kind: kindHeartbeat, flags: flagFin}, false}, // fin shares flagStart's bit
		{header{kind: kindHeartbeat}, false},
	} {
		b := make([]byte, headerLen+hbPayload)
		if tc.h.kind == kindData {
			b = b[:headerLen+1]
		}
		putHeader(b, &tc.h)
		var h header
		_, err := decode(b, &h)
		require.NoError(t, err, "%+v", tc.h)
		require.Equal(t, tc.start, h.start(), "%+v", tc.h)
	}
}
