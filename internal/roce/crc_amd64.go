package roce

import "golang.org/x/sys/cpu"

var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ

// foldCopy256 returns the raw CRC (not complemented, as hash/crc32's
// ieeeCLMUL) of p, a multiple of 256 bytes and at least 256, from raw
// state crc; unless dst is nil, it also copies p to dst (len(p) bytes),
// from the registers the fold loads anyway.
//
//go:noescape
func foldCopy256(crc uint32, p []byte, dst *byte) uint32
