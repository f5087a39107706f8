package soft

import "golang.org/x/sys/cpu"

var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ

// fold256 returns the raw CRC (not complemented, as hash/crc32's
// ieeeCLMUL) of p, a multiple of 256 bytes and at least 256, from raw
// state crc.
//
//go:noescape
func fold256(crc uint32, p []byte) uint32
