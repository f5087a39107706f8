//go:build linux

package soft

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// A block hands out its QPNs in turn, never 0, 1 or 0xFFFFFF, and a QPN
// given back is taken again only after the block's others.
func TestQPNBlockTake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   uint32
		usable int
	}{
		{"first block", 0, qpnBlockSize - 2},
		{"middle block", 0x123400, qpnBlockSize},
		{"last block", 0xFFFF00, qpnBlockSize - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &qpnBlock{base: tc.base, next: 7}
			seen := map[uint32]bool{}
			for {
				q, ok := b.take()
				if !ok {
					break
				}
				if q < 2 || q > 0xFFFFFE || q>>qpnBlockBits != tc.base>>qpnBlockBits || seen[q] {
					t.Fatalf("took QPN %#x (block %#x, seen %v)", q, tc.base, seen[q])
				}
				seen[q] = true
			}
			if len(seen) != tc.usable || b.n != tc.usable {
				t.Fatalf("took %d QPNs (n %d), want %d", len(seen), b.n, tc.usable)
			}
		})
	}
	b := &qpnBlock{base: 0x123400}
	first, _ := b.take()
	second, _ := b.take()
	i := int(first - b.base)
	b.used[i/64] &^= 1 << (i % 64) // give the first back
	b.n--
	for k := 2; k < qpnBlockSize; k++ {
		if q, _ := b.take(); q == first {
			t.Fatalf("QPN %#x taken again after %d others, want after all %d", q, k-1, qpnBlockSize-1)
		}
	}
	if q, ok := b.take(); !ok || q != first {
		t.Fatalf("last take: %#x %v, want %#x (second was %#x)", q, ok, first, second)
	}

	// The QPN given back last, right after it was taken, waits its turn
	// too: the next take is the one after it.
	b = &qpnBlock{base: 0x123400}
	q, _ := b.take()
	i = int(q - b.base)
	b.used[i/64] &^= 1 << (i % 64)
	b.n--
	if next, ok := b.take(); !ok || next != q+1 {
		t.Fatalf("take after giving back %#x at once: %#x %v, want %#x", q, next, ok, q+1)
	}
}

// QPNs of different network namespaces come from different blocks, and
// of the blocks that empty only the last stays reserved.
func TestQPNBlocksPerNamespace(t *testing.T) {
	const ns1, ns2 = 1<<62 | 1, 1<<62 | 2 // no namespace has these cookies
	a, err := reserveQPN(ns1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reserveQPN(ns2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := reserveQPN(ns1)
	if err != nil {
		t.Fatal(err)
	}
	if a>>qpnBlockBits == b>>qpnBlockBits {
		t.Errorf("QPNs %#x and %#x of two namespaces from one block", a, b)
	}
	if a>>qpnBlockBits != c>>qpnBlockBits {
		t.Errorf("QPNs %#x and %#x of one namespace from two blocks", a, c)
	}
	blocks := func(ns uint64) int {
		qpnPool.mu.Lock()
		defer qpnPool.mu.Unlock()
		n := 0
		for _, b := range qpnPool.blocks {
			if b.netns == ns {
				n++
			}
		}
		return n
	}
	releaseQPN(ns1, a)
	releaseQPN(ns1, c) // ns1's block empties: kept
	if blocks(ns1) != 1 {
		t.Errorf("ns1 blocks after its last QPN went: %d, want 1 (the last to empty)", blocks(ns1))
	}
	releaseQPN(ns2, b) // ns2's empties: kept, ns1's released
	if blocks(ns1) != 0 || blocks(ns2) != 1 {
		t.Errorf("blocks after ns2's emptied: ns1 %d, ns2 %d; want 0, 1", blocks(ns1), blocks(ns2))
	}
}

// releaseQPN gives back the QPN it is asked to, and only it: the next
// QPN of the block, still in use, stays taken.
func TestReleaseQPNFreesItsOwn(t *testing.T) {
	const netns = 0x5eed80 // no namespace's cookie: blocks of its own
	first, err := reserveQPN(netns)
	if err != nil {
		t.Fatalf("reserveQPN: %v", err)
	}
	second, err := reserveQPN(netns)
	if err != nil {
		t.Fatalf("reserveQPN: %v", err)
	}
	defer releaseQPN(netns, second)
	releaseQPN(netns, first)
	qpnPool.mu.Lock()
	defer qpnPool.mu.Unlock()
	for _, b := range qpnPool.blocks {
		if b.netns != netns {
			continue
		}
		if got := b.usable(int(first - b.base)); !got {
			t.Errorf("got QPN %#x given back usable %v, want true", first, got)
		}
		if got := b.usable(int(second - b.base)); got {
			t.Errorf("got QPN %#x in use usable %v, want false", second, got)
		}
		if b.n != 1 {
			t.Errorf("got %d QPNs of the block handed out, want 1", b.n)
		}
		return
	}
	t.Fatalf("no block of namespace %#x", netns)
}

// A QPN given back frees its own offset in its block and no other, at
// every offset: the block's used bits are four 64-bit words, and a QPN
// past the first 64 has its bit in another word.
func TestReleaseQPNEveryOffset(t *testing.T) {
	const netns = 0x5eed81 // no namespace's cookie: a block of its own
	if _, err := reserveQPN(netns); err != nil {
		t.Fatalf("reserveQPN: %v", err)
	}
	qpnPool.mu.Lock()
	var b *qpnBlock
	for _, x := range qpnPool.blocks {
		if x.netns == netns {
			b = x
		}
	}
	if b == nil {
		qpnPool.mu.Unlock()
		t.Fatalf("no block of namespace %#x", netns)
	}
	for _, ok := b.take(); ok; _, ok = b.take() {
	}
	full := b.n
	qpnPool.mu.Unlock()
	defer func() {
		for j := range qpnBlockSize {
			if q := b.base + uint32(j); q >= 2 && q <= 0xFFFFFE {
				releaseQPN(netns, q)
			}
		}
	}()
	for j := range qpnBlockSize {
		q := b.base + uint32(j)
		if q < 2 || q > 0xFFFFFE {
			continue // never handed out
		}
		releaseQPN(netns, q)
		qpnPool.mu.Lock()
		var free []int
		for i := range qpnBlockSize {
			if b.usable(i) {
				free = append(free, i)
			}
		}
		n := b.n
		got, ok := b.take()
		qpnPool.mu.Unlock()
		if len(free) != 1 || free[0] != j {
			t.Errorf("QPN %#x (offset %d) given back: free offsets %v, want [%d]", q, j, free, j)
		}
		if n != full-1 {
			t.Errorf("QPN %#x given back: %d of the block handed out, want %d", q, n, full-1)
		}
		if !ok || got != q {
			t.Fatalf("QPN %#x given back, then taken: %#x, %v; want it again", q, got, ok)
		}
	}
}

// reserveBlock draws its block from the whole 24-bit QPN space (qpnBlocks
// blocks of qpnBlockSize), so that processes in a namespace rarely draw
// the same one: of 64 draws, none lies past the space and some lie in its
// upper half (all 64 in the lower half has odds of 2^-64).
func TestQPNBlocksSpanTheSpace(t *testing.T) {
	upper := 0
	for range 64 {
		b, err := reserveBlock()
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(b.fd)
		if b.base+qpnBlockSize-1 > 0xFFFFFF {
			t.Fatalf("block at %#x: past the 24-bit QPN space", b.base)
		}
		if b.base >= 1<<23 {
			upper++
		}
	}
	if upper == 0 {
		t.Errorf("64 blocks drawn, none in the upper half of the QPN space")
	}
}

// A block whose name another socket holds (another process's block in
// this namespace) is skipped: reserveBlock draws again and binds the
// next free one. Where every draw is taken it gives up after 256 draws
// (the package doc's), with an error.
func TestReserveBlockSkipsTaken(t *testing.T) {
	const taken, free = 0x1234, 0x1235
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: fmt.Sprintf("@rdmanet-sw-qpns-%04x", taken)}); err != nil {
		t.Fatalf("bind block %#x's name: %v", taken, err)
	}
	orig := drawBlock
	defer func() { drawBlock = orig }()
	draws := 0
	drawBlock = func() uint32 {
		draws++
		if draws <= 2 {
			return taken
		}
		return free
	}
	b, err := reserveBlock()
	if err != nil {
		t.Fatalf("reserveBlock with block %#x taken, %#x free: %v", taken, free, err)
	}
	unix.Close(b.fd)
	if b.base != free<<qpnBlockBits || draws != 3 {
		t.Fatalf("block at %#x after %d draws; want %#x after 3", b.base, draws, free<<qpnBlockBits)
	}

	draws = 0
	drawBlock = func() uint32 { draws++; return taken }
	if b, err := reserveBlock(); err == nil {
		unix.Close(b.fd)
		t.Fatalf("reserveBlock with every draw taken: block at %#x, want an error", b.base)
	}
	if draws != 256 {
		t.Errorf("every draw taken: gave up after %d draws, want 256", draws)
	}
}
