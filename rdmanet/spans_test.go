//go:build linux

package rdmanet_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// A new SendBuffer takes off the freed-span list only the spans it
// overlaps: those that merely touch it, ending where it begins or
// beginning where it ends, stay recognized.
func TestNewBufferDropsOnlyOverlappingSpans(t *testing.T) {
	// The new buffer is [0x2000,0x6000); freed spans end at its start,
	// lie inside it, run over its end, and start at its end.
	bases := []uintptr{0x1000, 0x2800, 0x3000, 0x5800, 0x6000}
	sizes := []uintptr{0x1000, 0x1000, 0x1000, 0x1000, 0x1000}
	got := rdmanet.SpansLeftAfter(bases, sizes, 0x2000, 0x4000)
	require.Equal(t, [][2]uintptr{{0x1000, 0x1000}, {0x6000, 0x1000}}, got,
		"the spans ending at 0x2000 and starting at 0x6000 only touch [0x2000,0x6000)")
}

// A freed SendBuffer's span covers its bytes and no more: memory that
// begins where it ended (another mapping's) is written as any memory,
// while memory at its last byte is refused.
func TestFreedSpanEndsAtItsLastByte(t *testing.T) {
	mem := make([]byte, 0x2000)
	const freed = 0x1000 // the freed buffer was mem[:0x1000]
	err := rdmanet.WriteFromAfterFreed(mem, freed, mem[freed:freed+16])
	require.NoError(t, err, "memory starting at a freed span's end: got %v, want no error", err)
	err = rdmanet.WriteFromAfterFreed(mem, freed, mem[freed-1:freed+15])
	require.ErrorIs(t, err, rdmanet.ErrSendBufferFreed, "memory at a freed span's last byte")
}
