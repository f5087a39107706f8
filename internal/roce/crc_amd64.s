#include "textflag.h"

// Fold constants for the reflected IEEE CRC-32 (x^(D+32) mod P in the low
// quadword, x^(D-32) mod P in the high, bit-reflected and shifted left
// one, as hash/crc32's r2r1), broadcast to the four 128-bit lanes when
// loaded: fold256 for a fold distance D of 2048 bits (the four chains'
// step), fold64 for 512 (one 512-bit register into the next).
DATA fold256<>+0(SB)/8, $0x11542778a
DATA fold256<>+8(SB)/8, $0x1322d1430
GLOBL fold256<>(SB), RODATA, $16

DATA fold64<>+0(SB)/8, $0x154442bd4
DATA fold64<>+8(SB)/8, $0x1c6e41596
GLOBL fold64<>(SB), RODATA, $16

// The rest is hash/crc32's (crc32_amd64.s, BSD licence): fold by 128
// bits, then Barrett reduction.
DATA r4r3<>+0(SB)/8, $0x1751997d0
DATA r4r3<>+8(SB)/8, $0x0ccaa009e
DATA rupoly<>+0(SB)/8, $0x1db710641
DATA rupoly<>+8(SB)/8, $0x1f7011641
DATA r5<>+0(SB)/8, $0x163cd6124
GLOBL r4r3<>(SB), RODATA, $16
GLOBL rupoly<>(SB), RODATA, $16
GLOBL r5<>(SB), RODATA, $8

// FOLD: one step of the four chains Z1..Z4 over the next 256 bytes at
// SI, which it leaves in Z11..Z14.
#define FOLD \
	VPCLMULQDQ $0x11, Z0, Z1, Z5; \
	VPCLMULQDQ $0x00, Z0, Z1, Z1; \
	VPCLMULQDQ $0x11, Z0, Z2, Z6; \
	VPCLMULQDQ $0x00, Z0, Z2, Z2; \
	VPCLMULQDQ $0x11, Z0, Z3, Z7; \
	VPCLMULQDQ $0x00, Z0, Z3, Z3; \
	VPCLMULQDQ $0x11, Z0, Z4, Z8; \
	VPCLMULQDQ $0x00, Z0, Z4, Z4; \
	VMOVDQU64  (SI), Z11; \
	VMOVDQU64  64(SI), Z12; \
	VMOVDQU64  128(SI), Z13; \
	VMOVDQU64  192(SI), Z14; \
	VPTERNLOGD $0x96, Z11, Z5, Z1; \
	VPTERNLOGD $0x96, Z12, Z6, Z2; \
	VPTERNLOGD $0x96, Z13, Z7, Z3; \
	VPTERNLOGD $0x96, Z14, Z8, Z4; \
	ADDQ       $256, SI

// func foldCopy256(crc uint32, p []byte, dst *byte) uint32
TEXT ·foldCopy256(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ dst+32(FP), DI

	// Z1..Z4: the first 256 bytes, the state merged into the first four.
	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z10, Z10, Z10
	VMOVD     AX, X10
	VBROADCASTI32X4 fold256<>(SB), Z0
	ADDQ      $256, SI
	SUBQ      $256, CX
	TESTQ     DI, DI
	JZ        fold

	// Copying: the first 256 bytes, then each step's as it is loaded.
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z2, 64(DI)
	VMOVDQU64 Z3, 128(DI)
	VMOVDQU64 Z4, 192(DI)
	VPXORQ    Z10, Z1, Z1
	TESTQ     CX, CX
	JZ        merge

copyloop:
	FOLD
	VMOVDQU64 Z11, 256(DI)
	VMOVDQU64 Z12, 320(DI)
	VMOVDQU64 Z13, 384(DI)
	VMOVDQU64 Z14, 448(DI)
	ADDQ      $256, DI
	SUBQ      $256, CX
	JNZ       copyloop
	JMP       merge

fold:
	VPXORQ Z10, Z1, Z1
	TESTQ  CX, CX
	JZ     merge

loop:
	FOLD
	SUBQ $256, CX
	JNZ  loop

merge:
	// Fold each register 64 bytes on into the next.
	VBROADCASTI32X4 fold64<>(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z2, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z3, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z5, Z1

	// Its four lanes into X1..X4, then as hash/crc32's remain64.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	VZEROUPPER

	MOVOA     r4r3<>+0(SB), X0
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

	// Fold the 128 bits into 32 (hash/crc32's finish).
	PCMPEQB   X3, X3
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1
	MOVOA     X1, X2
	MOVQ      r5<>+0(SB), X0
	PSRLQ     $32, X3
	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1
	MOVOA     rupoly<>+0(SB), X0
	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1
	PEXTRD    $1, X1, AX
	MOVL      AX, ret+40(FP)
	RET
