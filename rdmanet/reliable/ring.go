package reliable

// ringIndex maps a sequence number to its slot in a ring of n slots: by a
// mask where n is a power of two (the default Window and RecvWindow), by
// a division otherwise. The receive path looks up a dozen slots a message
// (placing, settling, delivering), and a 64-bit division each was a
// measurable share of a reader's time.
type ringIndex struct {
	n    uint64
	mask uint64 // n-1 where n is a power of two; 0 otherwise
}

func newRingIndex(n int) ringIndex {
	r := ringIndex{n: uint64(n)}
	// n is not 0: a ring has Window slots (at least 16, bounds.go) or
	// minRing (8) to RecvWindow.
	if n&(n-1) == 0 {
		r.mask = uint64(n - 1)
	}
	return r
}

func (r ringIndex) of(seq uint64) uint64 {
	if r.mask != 0 {
		return seq & r.mask
	}
	return seq % r.n
}

// slotStride is the distance between two datagram slots of a ring: the
// MTU rounded up to a cache line, plus one line. At a stride of exactly
// 4096 bytes every slot's first line falls in the same few cache sets
// (and each slot on a page of its own), so a stream of small datagrams
// missed the cache on every slot it wrote; the extra line spreads the
// slots over all the sets.
func slotStride(mtu int) int { return (mtu+63)&^63 + 64 }
