package soft

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestCRCUpdateMatchesHashCRC32 checks crcUpdate against hash/crc32 on
// every length to 5000 bytes, at every start alignment mod 64 on some,
// from random CRC states, and on long buffers.
func TestCRCUpdateMatchesHashCRC32(t *testing.T) {
	if !haveFold {
		t.Log("no AVX-512 VPCLMULQDQ here: crcUpdate is hash/crc32")
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := crcUpdate(crc, p), crc32.Update(crc, crc32.IEEETable, p); got != want {
			t.Fatalf("len %d crc %#x: crcUpdate %#x, hash/crc32 %#x", len(p), crc, got, want)
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

// BenchmarkCRCUpdate is crcUpdate beside hash/crc32, each call waiting
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
		b.Run("crcUpdate/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var crc uint32
			for range b.N {
				crc = crcUpdate(crc, p)
			}
			sink = crc
		})
	}
}

var sink uint32
