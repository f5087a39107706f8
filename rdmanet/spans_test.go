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
