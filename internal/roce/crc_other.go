//go:build !amd64

package roce

const haveFold = false

func foldCopy256(crc uint32, p []byte, dst *byte) uint32 { panic("soft: no AVX-512") }
