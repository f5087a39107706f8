//go:build linux

package rdmanet

// SpansLeftAfter returns the [base, base+size) spans of bases and sizes
// that deleteOverlaps keeps when a buffer at [nb, nb+ns) is mapped.
func SpansLeftAfter(bases, sizes []uintptr, nb, ns uintptr) [][2]uintptr {
	var spans []span
	for i := range bases {
		spans = append(spans, span{bases[i], sizes[i]})
	}
	var out [][2]uintptr
	for _, sp := range deleteOverlaps(spans, span{nb, ns}) {
		out = append(out, [2]uintptr{sp.base, sp.size})
	}
	return out
}
