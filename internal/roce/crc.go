package roce

import "hash/crc32"

// CRCUpdate is crc32.Update with the IEEE table: the ICRC's CRC over a
// payload. Where the CPU has AVX-512 VPCLMULQDQ, the bulk of a long
// payload is folded 256 bytes a step in four independent 512-bit chains
// (crc_amd64.s), where hash/crc32 folds 64 bytes a step in one chain whose
// every step waits for the one before: 4096 bytes in about 80 ns instead
// of 140 on a Zen 4 core.
func CRCUpdate(crc uint32, p []byte) uint32 {
	if len(p) >= foldMin && haveFold {
		return crcFold(crc, p)
	}
	return crc32.Update(crc, crc32.IEEETable, p)
}

func crcFold(crc uint32, p []byte) uint32 {
	n := len(p) &^ (foldStep - 1)
	crc = ^foldCopy256(^crc, p[:n], nil)
	return crc32.Update(crc, crc32.IEEETable, p[n:])
}

// CRCCopy is CRCUpdate(crc, src) that also copies src to dst, which must
// hold it: with the fold, a long src is copied from the registers its
// CRC loads, for about the CRC's time alone.
func CRCCopy(crc uint32, dst, src []byte) uint32 {
	dst = dst[:len(src)]
	if len(src) < foldMin || !haveFold {
		copy(dst, src)
		return crc32.Update(crc, crc32.IEEETable, src)
	}
	n := len(src) &^ (foldStep - 1)
	crc = ^foldCopy256(^crc, src[:n], &dst[0])
	copy(dst[n:], src[n:])
	return crc32.Update(crc, crc32.IEEETable, src[n:])
}

const (
	foldStep = 256 // bytes a foldCopy256 step takes
	foldMin  = 256
)
