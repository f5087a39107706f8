package reliable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A receiver's per-sender bookkeeping (senders.go, ring.go), piece by
// piece: what it keeps of the sender's transmission numbers, and where a
// seq lands in its ring.

// hearTx keeps the latest transmission number in serial order (a 16-bit
// number that wraps), whatever order the datagrams arrive in: one step
// ahead moves it, an older one does not, and the wrap is a step.
func TestPeerHearTx(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, tx uint16
		want     uint16
	}{
		{"one ahead", 5, 6, 6},
		{"two ahead", 5, 7, 7},
		{"the same", 5, 5, 5},
		{"one behind (reordered)", 6, 5, 6},
		{"wraps: one ahead", 0xffff, 0, 0},
		{"wraps: one behind", 0, 0xffff, 0},
		{"half the space ahead, less one", 0, 0x7fff, 0x7fff},
		{"half the space: behind", 0, 0x8000, 0},
	} {
		p := &peer{tx: c.from}
		p.hearTx(c.tx)
		require.Equal(t, c.want, p.tx, "%s: heard %#x after %#x", c.name, c.tx, c.from)
	}
	// A stream of numbers, each one ahead: each is kept.
	p := &peer{tx: 0xfff0}
	for tx := uint16(0xfff1); tx != 0x10; tx++ {
		p.hearTx(tx)
		require.Equal(t, tx, p.tx)
	}
}

// A ring of a power of two slots masks; any other size divides; both
// map seq to seq mod n.
func TestRingIndex(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 12, 64, 100, 1 << 12} {
		r := newRingIndex(n)
		require.Equal(t, uint64(n), r.n)
		if n > 1 && n&(n-1) == 0 {
			require.Equal(t, uint64(n-1), r.mask, "n=%d: a mask", n)
		} else {
			require.Zero(t, r.mask, "n=%d: no mask", n)
		}
		for _, seq := range []uint64{0, 1, uint64(n) - 1, uint64(n), uint64(n) + 1, 1000003, 1<<63 + 5} {
			require.Equal(t, seq%uint64(n), r.of(seq), "n=%d: slot of %d", n, seq)
		}
	}
}

// A peer's ring is made on first need (minRing slots) and doubles until
// the seq asked for fits, up to RecvWindow; a seq that fits leaves it as
// it is, and growing keeps the datagrams it holds at their seqs.
func TestPeerRingGrows(t *testing.T) {
	const stride = 64
	r := &receiver{c: &Conn{stride: stride}, rw: 100}
	p := &peer{next: 1000}
	put := func(seq uint64, b byte) {
		i := p.ri.of(seq)
		p.ring[int(i)*stride] = b
		p.lens[i], p.seqs[i] = 1, seq
	}
	r.grow(p, 1000)
	require.Equal(t, uint64(minRing), p.ri.n, "the first ring")
	require.Len(t, p.lens, minRing)
	require.Len(t, p.ring, minRing*stride)
	put(1000, 'a')
	put(1007, 'b')
	first := &p.ring[0]
	r.grow(p, 1007) // fits exactly
	require.Equal(t, uint64(minRing), p.ri.n)
	require.Same(t, first, &p.ring[0], "a seq that fits moves nothing")

	r.grow(p, 1008) // one past: doubled
	require.Equal(t, uint64(2*minRing), p.ri.n)
	for seq, b := range map[uint64]byte{1000: 'a', 1007: 'b'} {
		require.True(t, p.valid(seq), "seq %d kept across the growth", seq)
		require.Equal(t, []byte{b}, p.slot(seq, stride), "seq %d's bytes", seq)
	}
	require.False(t, p.valid(1008))
	r.grow(p, 1000+33) // 34 slots needed: 16 -> 32 -> 64
	require.Equal(t, uint64(64), p.ri.n)
	r.grow(p, 1000+99) // 100 needed: 128, at most RecvWindow
	require.Equal(t, uint64(100), p.ri.n)
	require.Zero(t, p.ri.mask, "100 slots: divided, not masked")
	for seq := range map[uint64]byte{1000: 'a', 1007: 'b'} {
		require.True(t, p.valid(seq), "seq %d kept across the growths", seq)
	}
}

// A ring's slot stride is the MTU rounded up to a cache line (64
// bytes), plus one line: the line past the rounded MTU is what keeps
// the slots of a 4096-byte MTU off the same cache sets (ring.go). Seed
// 117: `(mtu+63)&^63` -> `(mtu+62)&^63` rounded an MTU one past a line
// down, leaving a 4033-byte MTU a stride of exactly 4096.
func TestSlotStride(t *testing.T) {
	for mtu := 1; mtu <= 9000; mtu++ {
		lines := (mtu + 63) / 64 // the MTU's cache lines, rounded up
		require.Equal(t, (lines+1)*64, slotStride(mtu), "mtu %d", mtu)
	}
	require.Equal(t, 4096+64, slotStride(4096))
	require.Equal(t, 4096+64, slotStride(4033))
}
