//go:build !purego && !noasm && gc

#include "textflag.h"

// expConst holds fastExp's constants (see fastmath.go), each four times
// over for the 256-bit operands: 32/ln2, the shifter 1.5·2⁵², ln2/32 in
// two parts, the Taylor coefficients 1/120, 1/24, 1/6, 1/2 and 1, the
// bounds −708 and 709 of the formula, +Inf, and the table index mask 31.
DATA expConst<>+0(SB)/8, $0x40471547652b82fe
DATA expConst<>+8(SB)/8, $0x40471547652b82fe
DATA expConst<>+16(SB)/8, $0x40471547652b82fe
DATA expConst<>+24(SB)/8, $0x40471547652b82fe
DATA expConst<>+32(SB)/8, $0x4338000000000000
DATA expConst<>+40(SB)/8, $0x4338000000000000
DATA expConst<>+48(SB)/8, $0x4338000000000000
DATA expConst<>+56(SB)/8, $0x4338000000000000
DATA expConst<>+64(SB)/8, $0x3f962e42fee00000
DATA expConst<>+72(SB)/8, $0x3f962e42fee00000
DATA expConst<>+80(SB)/8, $0x3f962e42fee00000
DATA expConst<>+88(SB)/8, $0x3f962e42fee00000
DATA expConst<>+96(SB)/8, $0x3d9a39ef35793c76
DATA expConst<>+104(SB)/8, $0x3d9a39ef35793c76
DATA expConst<>+112(SB)/8, $0x3d9a39ef35793c76
DATA expConst<>+120(SB)/8, $0x3d9a39ef35793c76
DATA expConst<>+128(SB)/8, $0x3f81111111111111
DATA expConst<>+136(SB)/8, $0x3f81111111111111
DATA expConst<>+144(SB)/8, $0x3f81111111111111
DATA expConst<>+152(SB)/8, $0x3f81111111111111
DATA expConst<>+160(SB)/8, $0x3fa5555555555555
DATA expConst<>+168(SB)/8, $0x3fa5555555555555
DATA expConst<>+176(SB)/8, $0x3fa5555555555555
DATA expConst<>+184(SB)/8, $0x3fa5555555555555
DATA expConst<>+192(SB)/8, $0x3fc5555555555555
DATA expConst<>+200(SB)/8, $0x3fc5555555555555
DATA expConst<>+208(SB)/8, $0x3fc5555555555555
DATA expConst<>+216(SB)/8, $0x3fc5555555555555
DATA expConst<>+224(SB)/8, $0x3fe0000000000000
DATA expConst<>+232(SB)/8, $0x3fe0000000000000
DATA expConst<>+240(SB)/8, $0x3fe0000000000000
DATA expConst<>+248(SB)/8, $0x3fe0000000000000
DATA expConst<>+256(SB)/8, $0x3ff0000000000000
DATA expConst<>+264(SB)/8, $0x3ff0000000000000
DATA expConst<>+272(SB)/8, $0x3ff0000000000000
DATA expConst<>+280(SB)/8, $0x3ff0000000000000
DATA expConst<>+288(SB)/8, $0xc086200000000000
DATA expConst<>+296(SB)/8, $0xc086200000000000
DATA expConst<>+304(SB)/8, $0xc086200000000000
DATA expConst<>+312(SB)/8, $0xc086200000000000
DATA expConst<>+320(SB)/8, $0x4086280000000000
DATA expConst<>+328(SB)/8, $0x4086280000000000
DATA expConst<>+336(SB)/8, $0x4086280000000000
DATA expConst<>+344(SB)/8, $0x4086280000000000
DATA expConst<>+352(SB)/8, $0x7ff0000000000000
DATA expConst<>+360(SB)/8, $0x7ff0000000000000
DATA expConst<>+368(SB)/8, $0x7ff0000000000000
DATA expConst<>+376(SB)/8, $0x7ff0000000000000
DATA expConst<>+384(SB)/8, $0x1f
DATA expConst<>+392(SB)/8, $0x1f
DATA expConst<>+400(SB)/8, $0x1f
DATA expConst<>+408(SB)/8, $0x1f
GLOBL expConst<>(SB), RODATA|NOPTR, $416

// func expAVX2(dst, src *float64, n int, table *[32]float64)
//
// dst[i] = fastExp(src[i]) for i < n, n a positive multiple of 4, four
// values at a time: the same operations as fastExp's, in the same order
// and without fused multiply-adds, so the results are the same bits.
// k's integer is read from t's low bits (bits(t) − bits(shifter)), as
// int64(k) is exact for |k| < 2⁵¹; only bits 5 to 16 of it reach the
// exponent, which a logical shift keeps as the arithmetic one does.
// Lanes outside [−708, 709] get 0, +Inf or their NaN by blending, as
// fastExp's branches give them.
TEXT ·expAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ table+24(FP), R8
	SHRQ $2, CX
	VXORPD Y15, Y15, Y15 // zero

loop:
	VMOVUPD (SI), Y0 // x
	VMULPD expConst<>+0(SB), Y0, Y1
	VADDPD expConst<>+32(SB), Y1, Y1 // t = x·32/ln2 + shifter
	VSUBPD expConst<>+32(SB), Y1, Y2 // k = t − shifter
	VMULPD expConst<>+64(SB), Y2, Y3
	VSUBPD Y3, Y0, Y4             // x − k·ln2Hi
	VMULPD expConst<>+96(SB), Y2, Y3
	VSUBPD Y3, Y4, Y4             // r = (x − k·ln2Hi) − k·ln2Lo
	VMULPD expConst<>+128(SB), Y4, Y3    // p = 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r/120))))
	VADDPD expConst<>+160(SB), Y3, Y3
	VMULPD Y3, Y4, Y3
	VADDPD expConst<>+192(SB), Y3, Y3
	VMULPD Y3, Y4, Y3
	VADDPD expConst<>+224(SB), Y3, Y3
	VMULPD Y3, Y4, Y3
	VADDPD expConst<>+256(SB), Y3, Y3
	VMULPD Y3, Y4, Y3
	VADDPD expConst<>+256(SB), Y3, Y3
	VPSUBQ expConst<>+32(SB), Y1, Y1 // ki = bits(t) − bits(shifter)
	VPAND expConst<>+384(SB), Y1, Y5      // ki & 31
	VPCMPEQQ Y6, Y6, Y6
	VGATHERQPD Y6, (R8)(Y5*8), Y7 // table[ki & 31]
	VMULPD Y3, Y7, Y7             // table[ki & 31]·p
	VPSRLQ $5, Y1, Y1
	VPSLLQ $52, Y1, Y1
	VPADDQ Y1, Y7, Y7             // + (ki >> 5) << 52 in the exponent bits
	VCMPPD $0x1e, expConst<>+320(SB), Y0, Y8  // x > 709
	VBLENDVPD Y8, expConst<>+352(SB), Y0, Y9 // +Inf there, else x (NaN stays)
	VCMPPD $0x11, expConst<>+288(SB), Y0, Y8  // x < −708
	VBLENDVPD Y8, Y15, Y9, Y9        // 0 there
	VCMPPD $0x1d, expConst<>+288(SB), Y0, Y8  // x ≥ −708
	VCMPPD $0x12, expConst<>+320(SB), Y0, Y10 // x ≤ 709
	VANDPD Y10, Y8, Y8
	VBLENDVPD Y8, Y7, Y9, Y9         // the formula where −708 ≤ x ≤ 709
	VMOVUPD Y9, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop
	VZEROUPPER
	RET
