//go:build !purego && !noasm && gc

#include "textflag.h"

// The loops of bnact.go (AVX2), with the bits of the scalar code: the same
// operations in the same order, without fused multiply-adds. The float64
// sums keep 16 lanes, lane j taking the values i ≡ j (mod 16) of a row, as
// the scalar code's lanes do; Go adds the lanes up.

// func bnSumAVX2(acc *[16]float64, x *float32, n int)
//
// acc[i%16] += float64(x[i]) for i < n, n a positive multiple of 16.
TEXT ·bnSumAVX2(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
sumLoop:
	VCVTPS2PD 0(SI), Y4
	VADDPD Y4, Y0, Y0
	VCVTPS2PD 16(SI), Y5
	VADDPD Y5, Y1, Y1
	VCVTPS2PD 32(SI), Y6
	VADDPD Y6, Y2, Y2
	VCVTPS2PD 48(SI), Y7
	VADDPD Y7, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ sumLoop
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func bnSqDevAVX2(acc *[16]float64, x *float32, n int, mu float64)
//
// acc[i%16] += d·d with d = float64(x[i]) − mu, n a positive multiple of 16.
TEXT ·bnSqDevAVX2(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	VBROADCASTSD mu+24(FP), Y8
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
sqLoop:
	VCVTPS2PD 0(SI), Y4
	VSUBPD Y8, Y4, Y4
	VMULPD Y4, Y4, Y4
	VADDPD Y4, Y0, Y0
	VCVTPS2PD 16(SI), Y5
	VSUBPD Y8, Y5, Y5
	VMULPD Y5, Y5, Y5
	VADDPD Y5, Y1, Y1
	VCVTPS2PD 32(SI), Y6
	VSUBPD Y8, Y6, Y6
	VMULPD Y6, Y6, Y6
	VADDPD Y6, Y2, Y2
	VCVTPS2PD 48(SI), Y7
	VSUBPD Y8, Y7, Y7
	VMULPD Y7, Y7, Y7
	VADDPD Y7, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ sqLoop
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func bnNormAVX2(y, x, r *float32, n int, c *[4]float32, flags int)
//
// y[i] = act(((x[i]·is + sh)·gm + bt) + r[i]) for i < n, n a positive
// multiple of 8, c = {is, sh, gm, bt}; r is read only with flags&bnRes and
// act is ReLU (z > 0 ? z : +0, NaN giving +0) only with flags&bnReLU.
TEXT ·bnNormAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ r+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), AX
	MOVQ flags+40(FP), R9
	SHRQ $3, CX
	VBROADCASTSS 0(AX), Y12
	VBROADCASTSS 4(AX), Y13
	VBROADCASTSS 8(AX), Y14
	VBROADCASTSS 12(AX), Y15
	VXORPS Y11, Y11, Y11
normLoop:
	VMOVUPS (SI), Y0
	VMULPS Y12, Y0, Y0
	VADDPS Y13, Y0, Y0
	VMULPS Y14, Y0, Y0
	VADDPS Y15, Y0, Y0
	TESTQ $2, R9
	JZ normNoRes
	VADDPS (DX), Y0, Y0
	ADDQ $32, DX
normNoRes:
	TESTQ $1, R9
	JZ normStore
	VCMPPS $0x1e, Y11, Y0, Y1
	VANDPS Y1, Y0, Y0
normStore:
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ normLoop
	VZEROUPPER
	RET

// func bnSumsAVX2(s, sx *[16]float64, x, dy, y, dr *float32, n int, c *[4]float32, flags int)
//
// For i < n, n a positive multiple of 16, with dz = dy[i] masked to +0
// where y[i] == 0 (flags&bnReLU; y ≠ 0 unordered, as nonzero32) and
// h = x[i]·is + sh (c = {is, sh, …}): dr[i] = dz (flags&bnFresh) or
// dr[i] += dz (with flags&bnRes), s[i%16] += float64(dz),
// sx[i%16] += float64(dz)·float64(h).
TEXT ·bnSumsAVX2(SB), NOSPLIT, $0-72
	MOVQ s+0(FP), R10
	MOVQ sx+8(FP), R11
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DX
	MOVQ y+32(FP), BX
	MOVQ dr+40(FP), DI
	MOVQ n+48(FP), CX
	MOVQ c+56(FP), AX
	MOVQ flags+64(FP), R9
	SHRQ $4, CX
	VBROADCASTSS 0(AX), X12
	VBROADCASTSS 4(AX), X13
	VXORPS X14, X14, X14
	VMOVUPD 0(R10), Y0
	VMOVUPD 32(R10), Y1
	VMOVUPD 64(R10), Y2
	VMOVUPD 96(R10), Y3
	VMOVUPD 0(R11), Y4
	VMOVUPD 32(R11), Y5
	VMOVUPD 64(R11), Y6
	VMOVUPD 96(R11), Y7
sumsLoop:
	VMOVUPS 0(DX), X8
	TESTQ $1, R9
	JZ sumsNoMask0
	VMOVUPS 0(BX), X9
	VCMPPS $4, X14, X9, X9
	VANDPS X9, X8, X8
sumsNoMask0:
	TESTQ $2, R9
	JZ sumsNoRes0
	TESTQ $4, R9
	JZ sumsAdd0
	VMOVUPS X8, 0(DI)
	JMP sumsNoRes0
sumsAdd0:
	VADDPS 0(DI), X8, X9
	VMOVUPS X9, 0(DI)
sumsNoRes0:
	VMOVUPS 0(SI), X10
	VMULPS X12, X10, X10
	VADDPS X13, X10, X10
	VCVTPS2PD X8, Y8
	VADDPD Y8, Y0, Y0
	VCVTPS2PD X10, Y10
	VMULPD Y10, Y8, Y10
	VADDPD Y10, Y4, Y4
	VMOVUPS 16(DX), X8
	TESTQ $1, R9
	JZ sumsNoMask1
	VMOVUPS 16(BX), X9
	VCMPPS $4, X14, X9, X9
	VANDPS X9, X8, X8
sumsNoMask1:
	TESTQ $2, R9
	JZ sumsNoRes1
	TESTQ $4, R9
	JZ sumsAdd1
	VMOVUPS X8, 16(DI)
	JMP sumsNoRes1
sumsAdd1:
	VADDPS 16(DI), X8, X9
	VMOVUPS X9, 16(DI)
sumsNoRes1:
	VMOVUPS 16(SI), X10
	VMULPS X12, X10, X10
	VADDPS X13, X10, X10
	VCVTPS2PD X8, Y8
	VADDPD Y8, Y1, Y1
	VCVTPS2PD X10, Y10
	VMULPD Y10, Y8, Y10
	VADDPD Y10, Y5, Y5
	VMOVUPS 32(DX), X8
	TESTQ $1, R9
	JZ sumsNoMask2
	VMOVUPS 32(BX), X9
	VCMPPS $4, X14, X9, X9
	VANDPS X9, X8, X8
sumsNoMask2:
	TESTQ $2, R9
	JZ sumsNoRes2
	TESTQ $4, R9
	JZ sumsAdd2
	VMOVUPS X8, 32(DI)
	JMP sumsNoRes2
sumsAdd2:
	VADDPS 32(DI), X8, X9
	VMOVUPS X9, 32(DI)
sumsNoRes2:
	VMOVUPS 32(SI), X10
	VMULPS X12, X10, X10
	VADDPS X13, X10, X10
	VCVTPS2PD X8, Y8
	VADDPD Y8, Y2, Y2
	VCVTPS2PD X10, Y10
	VMULPD Y10, Y8, Y10
	VADDPD Y10, Y6, Y6
	VMOVUPS 48(DX), X8
	TESTQ $1, R9
	JZ sumsNoMask3
	VMOVUPS 48(BX), X9
	VCMPPS $4, X14, X9, X9
	VANDPS X9, X8, X8
sumsNoMask3:
	TESTQ $2, R9
	JZ sumsNoRes3
	TESTQ $4, R9
	JZ sumsAdd3
	VMOVUPS X8, 48(DI)
	JMP sumsNoRes3
sumsAdd3:
	VADDPS 48(DI), X8, X9
	VMOVUPS X9, 48(DI)
sumsNoRes3:
	VMOVUPS 48(SI), X10
	VMULPS X12, X10, X10
	VADDPS X13, X10, X10
	VCVTPS2PD X8, Y8
	VADDPD Y8, Y3, Y3
	VCVTPS2PD X10, Y10
	VMULPD Y10, Y8, Y10
	VADDPD Y10, Y7, Y7
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, BX
	ADDQ $64, DI
	DECQ CX
	JNZ sumsLoop
	VMOVUPD Y0, 0(R10)
	VMOVUPD Y1, 32(R10)
	VMOVUPD Y2, 64(R10)
	VMOVUPD Y3, 96(R10)
	VMOVUPD Y4, 0(R11)
	VMOVUPD Y5, 32(R11)
	VMOVUPD Y6, 64(R11)
	VMOVUPD Y7, 96(R11)
	VZEROUPPER
	RET

// func bnDxAVX2(dx, x, dy, y *float32, n int, c *[4]float32, k *[3]float64, flags int)
//
// For i < n, n a positive multiple of 4, with dz and h as in bnSumsAVX2
// and k = {k, mdy, mdyx}: g = float32(k·((float64(dz) − mdy) −
// float64(h)·mdyx)), dx[i] = g (flags&bnFresh) or dx[i] += g.
TEXT ·bnDxAVX2(SB), NOSPLIT, $0-64
	MOVQ dx+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dy+16(FP), DX
	MOVQ y+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	MOVQ k+48(FP), R8
	MOVQ flags+56(FP), R9
	SHRQ $2, CX
	VBROADCASTSS 0(AX), X12
	VBROADCASTSS 4(AX), X13
	VXORPS X14, X14, X14
	VBROADCASTSD 0(R8), Y5
	VBROADCASTSD 8(R8), Y6
	VBROADCASTSD 16(R8), Y7
dxLoop:
	VMOVUPS (DX), X0
	TESTQ $1, R9
	JZ dxNoMask
	VMOVUPS (BX), X1
	VCMPPS $4, X14, X1, X1
	VANDPS X1, X0, X0
dxNoMask:
	VMOVUPS (SI), X2
	VMULPS X12, X2, X2
	VADDPS X13, X2, X2
	VCVTPS2PD X0, Y0
	VSUBPD Y6, Y0, Y0
	VCVTPS2PD X2, Y2
	VMULPD Y7, Y2, Y2
	VSUBPD Y2, Y0, Y0
	VMULPD Y0, Y5, Y0
	VCVTPD2PSY Y0, X0
	TESTQ $4, R9
	JNZ dxStore
	VADDPS (DI), X0, X0
dxStore:
	VMOVUPS X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DX
	ADDQ $16, BX
	ADDQ $16, DI
	DECQ CX
	JNZ dxLoop
	VZEROUPPER
	RET
