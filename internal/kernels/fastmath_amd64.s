//go:build !purego && !noasm && gc

#include "textflag.h"

// The float64 exponential of fastmath.go four values at a time (AVX2),
// and the float32 sigmoid and tanh built on it as the scalar code builds
// them (widening each value exactly, narrowing the result as a Go
// conversion rounds it): the same operations in the same order, without
// fused multiply-adds, so every result has the bits of the scalar code's.

// mathConst holds the constants, each four times over for the 256-bit
// operands.
DATA mathConst<>+0(SB)/8, $0x40471547652b82fe
DATA mathConst<>+8(SB)/8, $0x40471547652b82fe
DATA mathConst<>+16(SB)/8, $0x40471547652b82fe
DATA mathConst<>+24(SB)/8, $0x40471547652b82fe
DATA mathConst<>+32(SB)/8, $0x4338000000000000
DATA mathConst<>+40(SB)/8, $0x4338000000000000
DATA mathConst<>+48(SB)/8, $0x4338000000000000
DATA mathConst<>+56(SB)/8, $0x4338000000000000
DATA mathConst<>+64(SB)/8, $0x3f962e42fee00000
DATA mathConst<>+72(SB)/8, $0x3f962e42fee00000
DATA mathConst<>+80(SB)/8, $0x3f962e42fee00000
DATA mathConst<>+88(SB)/8, $0x3f962e42fee00000
DATA mathConst<>+96(SB)/8, $0x3d9a39ef35793c76
DATA mathConst<>+104(SB)/8, $0x3d9a39ef35793c76
DATA mathConst<>+112(SB)/8, $0x3d9a39ef35793c76
DATA mathConst<>+120(SB)/8, $0x3d9a39ef35793c76
DATA mathConst<>+128(SB)/8, $0x3f81111111111111
DATA mathConst<>+136(SB)/8, $0x3f81111111111111
DATA mathConst<>+144(SB)/8, $0x3f81111111111111
DATA mathConst<>+152(SB)/8, $0x3f81111111111111
DATA mathConst<>+160(SB)/8, $0x3fa5555555555555
DATA mathConst<>+168(SB)/8, $0x3fa5555555555555
DATA mathConst<>+176(SB)/8, $0x3fa5555555555555
DATA mathConst<>+184(SB)/8, $0x3fa5555555555555
DATA mathConst<>+192(SB)/8, $0x3fc5555555555555
DATA mathConst<>+200(SB)/8, $0x3fc5555555555555
DATA mathConst<>+208(SB)/8, $0x3fc5555555555555
DATA mathConst<>+216(SB)/8, $0x3fc5555555555555
DATA mathConst<>+224(SB)/8, $0x3fe0000000000000
DATA mathConst<>+232(SB)/8, $0x3fe0000000000000
DATA mathConst<>+240(SB)/8, $0x3fe0000000000000
DATA mathConst<>+248(SB)/8, $0x3fe0000000000000
DATA mathConst<>+256(SB)/8, $0x3ff0000000000000
DATA mathConst<>+264(SB)/8, $0x3ff0000000000000
DATA mathConst<>+272(SB)/8, $0x3ff0000000000000
DATA mathConst<>+280(SB)/8, $0x3ff0000000000000
DATA mathConst<>+288(SB)/8, $0xc086200000000000
DATA mathConst<>+296(SB)/8, $0xc086200000000000
DATA mathConst<>+304(SB)/8, $0xc086200000000000
DATA mathConst<>+312(SB)/8, $0xc086200000000000
DATA mathConst<>+320(SB)/8, $0x4086280000000000
DATA mathConst<>+328(SB)/8, $0x4086280000000000
DATA mathConst<>+336(SB)/8, $0x4086280000000000
DATA mathConst<>+344(SB)/8, $0x4086280000000000
DATA mathConst<>+352(SB)/8, $0x7ff0000000000000
DATA mathConst<>+360(SB)/8, $0x7ff0000000000000
DATA mathConst<>+368(SB)/8, $0x7ff0000000000000
DATA mathConst<>+376(SB)/8, $0x7ff0000000000000
DATA mathConst<>+384(SB)/8, $0x1f
DATA mathConst<>+392(SB)/8, $0x1f
DATA mathConst<>+400(SB)/8, $0x1f
DATA mathConst<>+408(SB)/8, $0x1f
DATA mathConst<>+416(SB)/8, $0x0
DATA mathConst<>+424(SB)/8, $0x0
DATA mathConst<>+432(SB)/8, $0x0
DATA mathConst<>+440(SB)/8, $0x0
DATA mathConst<>+448(SB)/8, $0x8000000000000000
DATA mathConst<>+456(SB)/8, $0x8000000000000000
DATA mathConst<>+464(SB)/8, $0x8000000000000000
DATA mathConst<>+472(SB)/8, $0x8000000000000000
DATA mathConst<>+480(SB)/8, $0x7fffffffffffffff
DATA mathConst<>+488(SB)/8, $0x7fffffffffffffff
DATA mathConst<>+496(SB)/8, $0x7fffffffffffffff
DATA mathConst<>+504(SB)/8, $0x7fffffffffffffff
DATA mathConst<>+512(SB)/8, $0x4035000000000000
DATA mathConst<>+520(SB)/8, $0x4035000000000000
DATA mathConst<>+528(SB)/8, $0x4035000000000000
DATA mathConst<>+536(SB)/8, $0x4035000000000000
DATA mathConst<>+544(SB)/8, $0x4034000000000000
DATA mathConst<>+552(SB)/8, $0x4034000000000000
DATA mathConst<>+560(SB)/8, $0x4034000000000000
DATA mathConst<>+568(SB)/8, $0x4034000000000000
DATA mathConst<>+576(SB)/8, $0x3f30000000000000
DATA mathConst<>+584(SB)/8, $0x3f30000000000000
DATA mathConst<>+592(SB)/8, $0x3f30000000000000
DATA mathConst<>+600(SB)/8, $0x3f30000000000000
DATA mathConst<>+608(SB)/8, $0x10
GLOBL mathConst<>(SB), RODATA|NOPTR, $616

#define INVLN2X32 mathConst<>+0(SB) // 32/ln2
#define SHIFTER mathConst<>+32(SB) // 1.5·2⁵², whose low bits take k
#define LN2HI mathConst<>+64(SB) // ln2/32, high part
#define LN2LO mathConst<>+96(SB) // ln2/32, low part
#define C120 mathConst<>+128(SB) // 1/120
#define C24 mathConst<>+160(SB) // 1/24
#define C6 mathConst<>+192(SB) // 1/6
#define C2 mathConst<>+224(SB) // 1/2
#define ONE mathConst<>+256(SB) // 1
#define EXPLO mathConst<>+288(SB) // −708, the formula's lower bound
#define EXPHI mathConst<>+320(SB) // 709, its upper bound
#define INF mathConst<>+352(SB) // +Inf
#define IDX mathConst<>+384(SB) // the table index mask
#define ZERO mathConst<>+416(SB) // 0
#define SIGN mathConst<>+448(SB) // the sign bit
#define ABS mathConst<>+480(SB) // all bits but the sign
#define T21 mathConst<>+512(SB) // 21, the clamp of tanh's exponent
#define T20 mathConst<>+544(SB) // 20, above which tanh is ±1
#define TTINY mathConst<>+576(SB) // 2⁻¹², below which tanh x is x
#define BIT4 mathConst<>+608(SB) // 16: the table index's bit 4 (once, for broadcasts)

// EXP sets Y9 = fastExp(Y0) lane by lane, the table's address in R8,
// clobbering Y1–Y8 and Y10: t = x·32/ln2 + shifter, k = t − shifter,
// r = (x − k·ln2Hi) − k·ln2Lo, p = 1 + r(1 + r(1/2 + r(1/6 + r(1/24 +
// r/120)))), then table[k & 31]·p with k >> 5 added to the exponent's
// bits. k's integer is read from t's low bits
// (bits(t) − bits(shifter)), as int64(k) is exact for |k| < 2⁵¹; only bits
// 5 to 16 of it reach the exponent, which a logical shift keeps as the
// arithmetic one does. Lanes outside [−708, 709] get 0, +Inf or their NaN
// by blending, as fastExp's branches give them.
#define EXP \
	VMULPD INVLN2X32, Y0, Y1; \
	VADDPD SHIFTER, Y1, Y1; \
	VSUBPD SHIFTER, Y1, Y2; \
	VMULPD LN2HI, Y2, Y3; \
	VSUBPD Y3, Y0, Y4; \
	VMULPD LN2LO, Y2, Y3; \
	VSUBPD Y3, Y4, Y4; \
	VMULPD C120, Y4, Y3; \
	VADDPD C24, Y3, Y3; \
	VMULPD Y3, Y4, Y3; \
	VADDPD C6, Y3, Y3; \
	VMULPD Y3, Y4, Y3; \
	VADDPD C2, Y3, Y3; \
	VMULPD Y3, Y4, Y3; \
	VADDPD ONE, Y3, Y3; \
	VMULPD Y3, Y4, Y3; \
	VADDPD ONE, Y3, Y3; \
	VPSUBQ SHIFTER, Y1, Y1; \
	VPAND IDX, Y1, Y5; \
	VPCMPEQQ Y6, Y6, Y6; \
	VGATHERQPD Y6, (R8)(Y5*8), Y7; \
	VMULPD Y3, Y7, Y7; \
	VPSRLQ $5, Y1, Y1; \
	VPSLLQ $52, Y1, Y1; \
	VPADDQ Y1, Y7, Y7; \
	VCMPPD $0x1e, EXPHI, Y0, Y8; \
	VBLENDVPD Y8, INF, Y0, Y9; \
	VCMPPD $0x11, EXPLO, Y0, Y8; \
	VBLENDVPD Y8, ZERO, Y9, Y9; \
	VCMPPD $0x1d, EXPLO, Y0, Y8; \
	VCMPPD $0x12, EXPHI, Y0, Y10; \
	VANDPD Y10, Y8, Y8; \
	VBLENDVPD Y8, Y7, Y9, Y9

// The functions take n, a positive multiple of 4, and dst may be src.
// NEXT(size) steps over four values of size bytes and counts them.
#define ARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	MOVQ table+24(FP), R8; \
	SHRQ $2, CX

#define NEXT(size) \
	ADDQ $(4*size), SI; \
	ADDQ $(4*size), DI; \
	DECQ CX

// func expAVX2(dst, src *float64, n int, table *[32]float64)
TEXT ·expAVX2(SB), NOSPLIT, $0-32
	ARGS

expLoop:
	VMOVUPD (SI), Y0
	EXP
	VMOVUPD Y9, (DI)
	NEXT(8)
	JNZ expLoop
	VZEROUPPER
	RET

// func sigmoidF32AVX2(dst, src *float32, n int, table *[32]float64)
//
// dst[i] = float32(1 / (1 + fastExp(−float64(src[i])))).
TEXT ·sigmoidF32AVX2(SB), NOSPLIT, $0-32
	ARGS

sigmoidLoop:
	VCVTPS2PD (SI), Y0
	VXORPD SIGN, Y0, Y0 // −x
	EXP
	VADDPD ONE, Y9, Y9
	VMOVUPD ONE, Y11
	VDIVPD Y9, Y11, Y9  // 1 / (1 + e^−x)
	VCVTPD2PSY Y9, X9
	VMOVUPS X9, (DI)
	NEXT(4)
	JNZ sigmoidLoop
	VZEROUPPER
	RET

// func tanhF32AVX2(dst, src *float32, n int, table *[32]float64)
//
// dst[i] = float32(tanhFast(float64(src[i]))), through tanhFast's e^{2|x|}
// for 2·min(|x|, 21) and its branches by blending.
TEXT ·tanhF32AVX2(SB), NOSPLIT, $0-32
	ARGS

tanhLoop:
	VCVTPS2PD (SI), Y12         // x
	VANDPD ABS, Y12, Y13        // a = |x|
	VANDPD SIGN, Y12, Y14       // x's sign
	VMINPD T21, Y13, Y0         // min(a, 21) (21 for a NaN, blended below)
	VADDPD Y0, Y0, Y0           // 2·min(a, 21)
	EXP
	VSUBPD ONE, Y9, Y10
	VADDPD ONE, Y9, Y11
	VDIVPD Y11, Y10, Y10        // (e − 1) / (e + 1)
	VANDPD ABS, Y10, Y10
	VORPD Y14, Y10, Y10         // with x's sign
	VORPD ONE, Y14, Y15         // ±1
	VCMPPD $0x1e, T20, Y13, Y8  // a > 20
	VBLENDVPD Y8, Y15, Y10, Y10
	VCMPPD $0x11, TTINY, Y13, Y8 // a < 2⁻¹²
	VBLENDVPD Y8, Y12, Y10, Y10
	VCMPPD $0x03, Y12, Y12, Y8  // x is NaN
	VBLENDVPD Y8, Y12, Y10, Y10
	VCVTPD2PSY Y10, X10
	VMOVUPS X10, (DI)
	NEXT(4)
	JNZ tanhLoop
	VZEROUPPER
	RET

// The AVX-512 kernels take eight values at a time, with the same
// operations in the same order as the AVX2 ones (the constants broadcast
// from their first copy), so every result has the same bits: only the
// table lookup differs, from registers instead of a gather (VPERMI2PD
// picks from the table's two halves of 16 by the index's low four bits,
// its bit 4 the half).

// TABLE512 loads the table (its address in R8) into Z24–Z27.
#define TABLE512 \
	VMOVUPD (R8), Z24; \
	VMOVUPD 64(R8), Z25; \
	VMOVUPD 128(R8), Z26; \
	VMOVUPD 192(R8), Z27

// EXP512 sets Z9 = fastExp(Z0) lane by lane, as EXP does, the table in
// Z24–Z27, clobbering Z1–Z8, K1 and K2.
#define EXP512 \
	VMULPD.BCST INVLN2X32, Z0, Z1; \
	VADDPD.BCST SHIFTER, Z1, Z1; \
	VSUBPD.BCST SHIFTER, Z1, Z2; \
	VMULPD.BCST LN2HI, Z2, Z3; \
	VSUBPD Z3, Z0, Z4; \
	VMULPD.BCST LN2LO, Z2, Z3; \
	VSUBPD Z3, Z4, Z4; \
	VMULPD.BCST C120, Z4, Z3; \
	VADDPD.BCST C24, Z3, Z3; \
	VMULPD Z3, Z4, Z3; \
	VADDPD.BCST C6, Z3, Z3; \
	VMULPD Z3, Z4, Z3; \
	VADDPD.BCST C2, Z3, Z3; \
	VMULPD Z3, Z4, Z3; \
	VADDPD.BCST ONE, Z3, Z3; \
	VMULPD Z3, Z4, Z3; \
	VADDPD.BCST ONE, Z3, Z3; \
	VPSUBQ.BCST SHIFTER, Z1, Z1; \
	VMOVDQA64 Z1, Z5; \
	VMOVDQA64 Z1, Z6; \
	VPERMI2PD Z25, Z24, Z5; \
	VPERMI2PD Z27, Z26, Z6; \
	VPTESTMQ.BCST BIT4, Z1, K1; \
	VBLENDMPD Z6, Z5, K1, Z7; \
	VMULPD Z3, Z7, Z7; \
	VPSRLQ $5, Z1, Z1; \
	VPSLLQ $52, Z1, Z1; \
	VPADDQ Z1, Z7, Z7; \
	VCMPPD.BCST $0x1e, EXPHI, Z0, K1; \
	VBLENDMPD.BCST INF, Z0, K1, Z9; \
	VCMPPD.BCST $0x11, EXPLO, Z0, K1; \
	VBLENDMPD.BCST ZERO, Z9, K1, Z9; \
	VCMPPD.BCST $0x1d, EXPLO, Z0, K1; \
	VCMPPD.BCST $0x12, EXPHI, Z0, K2; \
	KANDW K1, K2, K1; \
	VBLENDMPD Z7, Z9, K1, Z9

// ARGS8 is ARGS for kernels that take n, a positive multiple of 8, eight
// values at a time; it loads the table too. NEXT8(size) is NEXT for
// them.
#define ARGS8 \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	MOVQ table+24(FP), R8; \
	SHRQ $3, CX; \
	TABLE512

#define NEXT8(size) \
	ADDQ $(8*size), SI; \
	ADDQ $(8*size), DI; \
	DECQ CX

// func expAVX512(dst, src *float64, n int, table *[32]float64)
TEXT ·expAVX512(SB), NOSPLIT, $0-32
	ARGS8

exp512Loop:
	VMOVUPD (SI), Z0
	EXP512
	VMOVUPD Z9, (DI)
	NEXT8(8)
	JNZ exp512Loop
	VZEROUPPER
	RET

// func sigmoidF32AVX512(dst, src *float32, n int, table *[32]float64)
TEXT ·sigmoidF32AVX512(SB), NOSPLIT, $0-32
	ARGS8

sigmoid512Loop:
	VCVTPS2PD (SI), Z0
	VPXORQ.BCST SIGN, Z0, Z0 // −x
	EXP512
	VADDPD.BCST ONE, Z9, Z9
	VBROADCASTSD ONE, Z11
	VDIVPD Z9, Z11, Z9       // 1 / (1 + e^−x)
	VCVTPD2PS Z9, Y9
	VMOVUPS Y9, (DI)
	NEXT8(4)
	JNZ sigmoid512Loop
	VZEROUPPER
	RET

// func tanhF32AVX512(dst, src *float32, n int, table *[32]float64)
TEXT ·tanhF32AVX512(SB), NOSPLIT, $0-32
	ARGS8

tanh512Loop:
	VCVTPS2PD (SI), Z12           // x
	VPANDQ.BCST ABS, Z12, Z13     // a = |x|
	VPANDQ.BCST SIGN, Z12, Z14    // x's sign
	VMINPD.BCST T21, Z13, Z0      // min(a, 21) (21 for a NaN, blended below)
	VADDPD Z0, Z0, Z0             // 2·min(a, 21)
	EXP512
	VSUBPD.BCST ONE, Z9, Z10
	VADDPD.BCST ONE, Z9, Z11
	VDIVPD Z11, Z10, Z10          // (e − 1) / (e + 1)
	VPANDQ.BCST ABS, Z10, Z10
	VPORQ Z14, Z10, Z10           // with x's sign
	VPORQ.BCST ONE, Z14, Z15      // ±1
	VCMPPD.BCST $0x1e, T20, Z13, K1 // a > 20
	VBLENDMPD Z15, Z10, K1, Z10
	VCMPPD.BCST $0x11, TTINY, Z13, K1 // a < 2⁻¹²
	VBLENDMPD Z12, Z10, K1, Z10
	VCMPPD $0x03, Z12, Z12, K1    // x is NaN
	VBLENDMPD Z12, Z10, K1, Z10
	VCVTPD2PS Z10, Y10
	VMOVUPS Y10, (DI)
	NEXT8(4)
	JNZ tanh512Loop
	VZEROUPPER
	RET
