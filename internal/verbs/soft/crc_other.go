//go:build !amd64

package soft

const haveFold = false

func fold256(crc uint32, p []byte) uint32 { panic("soft: fold256 without AVX-512") }
