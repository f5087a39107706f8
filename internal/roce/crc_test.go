package roce

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestCRCUpdateMatchesHashCRC32 checks CRCUpdate against hash/crc32 on
// every length to 5000 bytes, at every start alignment mod 64 on some,
// from random CRC states, and on long buffers.
func TestCRCUpdateMatchesHashCRC32(t *testing.T) {
	if !haveFold {
		t.Log("no AVX-512 VPCLMULQDQ here: CRCUpdate is hash/crc32")
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := CRCUpdate(crc, p), crc32.Update(crc, crc32.IEEETable, p); got != want {
			t.Fatalf("len %d crc %#x: CRCUpdate %#x, hash/crc32 %#x", len(p), crc, got, want)
		}
	}
	for n := 0; n <= 5000; n++ {
		check(r.Uint32(), buf[n%64:n%64+n])
	}
	for off := range 64 {
		for _, n := range []int{foldMin, foldMin + 1, 4096, 4096 + 36, 4097} {
			check(0, buf[off:off+n])
			check(0xFFFFFFFF, buf[off:off+n])
		}
	}
	check(r.Uint32(), buf[:65535])
	check(r.Uint32(), buf[3:])
}

// TestCRCCopy checks CRCCopy's CRC against hash/crc32 and its copy
// against the source, on every length to 5000 bytes at shifting source
// and destination alignments, and that it writes nothing past the copy.
func TestCRCCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 5100)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, 5200)
	for n := 0; n <= 5000; n++ {
		so, do := n%64, (n*7)%64
		for i := range dst {
			dst[i] = 0xA5
		}
		crc := r.Uint32()
		p := src[so : so+n]
		if got, want := CRCCopy(crc, dst[do:], p), crc32.Update(crc, crc32.IEEETable, p); got != want {
			t.Fatalf("len %d: CRCCopy %#x, hash/crc32 %#x", n, got, want)
		}
		if !bytes.Equal(dst[do:do+n], p) {
			t.Fatalf("len %d: the copy differs from the source", n)
		}
		for i, b := range dst {
			if (i < do || i >= do+n) && b != 0xA5 {
				t.Fatalf("len %d: byte %d outside the copy written", n, i)
			}
		}
	}
}

// BenchmarkCRCUpdate is CRCUpdate beside hash/crc32, each call waiting
// for the one before, as an ICRC does.
func BenchmarkCRCUpdate(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 4096} {
		p := make([]byte, n)
		b.Run("hash-crc32/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var crc uint32
			for range b.N {
				crc = crc32.Update(crc, crc32.IEEETable, p)
			}
			sink = crc
		})
		b.Run("CRCUpdate/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var crc uint32
			for range b.N {
				crc = CRCUpdate(crc, p)
			}
			sink = crc
		})
	}
}

var sink uint32
