// Command _gen writes internal/f32/gemm_amd64.s, the Go-assembly micro-kernels
// behind f32.Gemm. Run it from internal/f32 with `go run ./_gen` (or through
// go generate); it uses the standard library only.
//
// The kernels are straight-line FMA code, so a small printer is clearer here
// than an assembler DSL: each function below emits one kernel family, and the
// reference loop that the family computes is spelled out in its comment and in
// the pure-Go twin in gemm_kernel_go.go.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
)

type gen struct{ bytes.Buffer }

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.Buffer, format, args...)
	g.WriteByte('\n')
}

// isa describes one vector extension for the rank-1-update kernels.
type isa struct {
	name  string // suffix of the Go function names
	reg   string // register prefix: Y (256-bit) or Z (512-bit)
	lanes int    // float32 lanes per register
	maxMR int    // rows of the largest kernel
	nregs int    // vector registers available
}

var (
	avx2   = isa{name: "AVX2", reg: "Y", lanes: 8, maxMR: 6, nregs: 16}
	avx512 = isa{name: "AVX512", reg: "Z", lanes: 16, maxMR: 12, nregs: 32}
)

// kernel emits gemmKernel{mr}x{nr}{ISA}, which computes one mr×nr tile of C,
// nr = 2·lanes:
//
//	for p := 0; p < k; p++ {           // a is packed k×mr, b has rows bs apart
//		for i := 0; i < mr; i++ {
//			for j := 0; j < nr; j++ {
//				acc[i][j] += a[p*mr+i] * b[p*bs+j]
//			}
//		}
//	}
//	v := acc[i][j]                         if beta == 0 (c is not read)
//	v := beta*c[i*ldc+j] + acc[i][j]       otherwise (one rounding: an FMA)
//	v += bias[j]                           if bias != nil
//	v = max(v, 0)                          if relu (NaN stays NaN)
//	c[i*ldc+j] = v
//
// The bias and ReLU are the epilogue of a fused convolution: they are
// applied to the accumulators before the single store of the tile.
//
// Rows with few accumulators use two alternating sets of them, so that the
// FMA latency does not bound a k step (seqRows in gemm_amd64.go is the
// fewest rows with one set: 4 for AVX2, 7 for AVX-512).
func kernel(g *gen, s isa, mr int) {
	nr := 2 * s.lanes
	name := fmt.Sprintf("gemmKernel%dx%d%s", mr, nr, s.name)
	sets := 1
	if 2*2*mr <= s.nregs-4 && mr <= s.maxMR/2 {
		sets = 2
	}
	acc := func(set, i, v int) string { return fmt.Sprintf("%s%d", s.reg, set*2*mr+2*i+v) }
	b0 := fmt.Sprintf("%s%d", s.reg, s.nregs-4)
	b1 := fmt.Sprintf("%s%d", s.reg, s.nregs-3)
	bc := func(i int) string { return fmt.Sprintf("%s%d", s.reg, s.nregs-2+i%2) }
	vb := 4 * s.lanes // bytes per register

	g.p("// func %s(k int, a, b *float32, bs int, c *float32, ldc int, beta float32, pf int, bias *float32, relu bool)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-73", name)
	g.p("\tMOVQ pf+56(FP), R12")
	g.p("\tMOVQ k+0(FP), CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ b+16(FP), DX")
	g.p("\tMOVQ bs+24(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ c+32(FP), DI")
	g.p("\tMOVQ ldc+40(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tMOVQ DI, R10")
	for i := 0; i < mr; i++ {
		g.p("\tPREFETCHT0 (R10)")
		g.p("\tPREFETCHT0 %d(R10)", 2*vb-4)
		if i < mr-1 {
			g.p("\tADDQ R9, R10")
		}
	}
	for set := 0; set < sets; set++ {
		for i := 0; i < mr; i++ {
			for v := 0; v < 2; v++ {
				r := acc(set, i, v)
				if s.reg == "Z" {
					g.p("\tVPXORD %s, %s, %s", r, r, r)
				} else {
					g.p("\tVXORPS %s, %s, %s", r, r, r)
				}
			}
		}
	}
	step := func(set, aoff int) {
		g.p("\tPREFETCHT0 (DX)(R12*1)")
		g.p("\tVMOVUPS (DX), %s", b0)
		g.p("\tVMOVUPS %d(DX), %s", vb, b1)
		for i := 0; i < mr; i++ {
			off := aoff + 4*i
			g.p("\tVBROADCASTSS %d(SI), %s", off, bc(i))
			g.p("\tVFMADD231PS %s, %s, %s", b0, bc(i), acc(set, i, 0))
			g.p("\tVFMADD231PS %s, %s, %s", b1, bc(i), acc(set, i, 1))
		}
		g.p("\tADDQ R8, DX")
	}
	const unroll = 4
	g.p("\tMOVQ CX, R11")
	g.p("\tANDQ $%d, R11", unroll-1)
	g.p("\tSHRQ $%d, CX", 2)
	g.p("\tJZ %s_tail", name)
	g.p("%s_loop:", name)
	for u := 0; u < unroll; u++ {
		step(u%sets, 4*mr*u)
	}
	g.p("\tADDQ $%d, SI", 4*mr*unroll)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_tail:", name)
	g.p("\tTESTQ R11, R11")
	g.p("\tJZ %s_sum", name)
	g.p("%s_tailloop:", name)
	step(0, 0)
	g.p("\tADDQ $%d, SI", 4*mr)
	g.p("\tDECQ R11")
	g.p("\tJNZ %s_tailloop", name)
	g.p("%s_sum:", name)
	if sets == 2 {
		for i := 0; i < mr; i++ {
			for v := 0; v < 2; v++ {
				g.p("\tVADDPS %s, %s, %s", acc(1, i, v), acc(0, i, v), acc(0, i, v))
			}
		}
	}
	g.p("\tMOVL beta+48(FP), AX")
	g.p("\tANDL $0x7fffffff, AX")
	g.p("\tJZ %s_bias", name)
	g.p("\tVBROADCASTSS beta+48(FP), %s", b0)
	g.p("\tMOVQ DI, R10")
	for i := 0; i < mr; i++ {
		g.p("\tVFMADD231PS (R10), %s, %s", b0, acc(0, i, 0))
		g.p("\tVFMADD231PS %d(R10), %s, %s", vb, b0, acc(0, i, 1))
		if i < mr-1 {
			g.p("\tADDQ R9, R10")
		}
	}
	g.p("%s_bias:", name)
	g.p("\tMOVQ bias+64(FP), AX")
	g.p("\tTESTQ AX, AX")
	g.p("\tJZ %s_relu", name)
	g.p("\tVMOVUPS (AX), %s", b0)
	g.p("\tVMOVUPS %d(AX), %s", vb, b1)
	for i := 0; i < mr; i++ {
		g.p("\tVADDPS %s, %s, %s", b0, acc(0, i, 0), acc(0, i, 0))
		g.p("\tVADDPS %s, %s, %s", b1, acc(0, i, 1), acc(0, i, 1))
	}
	g.p("%s_relu:", name)
	g.p("\tMOVBLZX relu+72(FP), AX")
	g.p("\tTESTL AX, AX")
	g.p("\tJZ %s_store", name)
	if s.reg == "Z" {
		g.p("\tVPXORD %s, %s, %s", b0, b0, b0)
	} else {
		g.p("\tVXORPS %s, %s, %s", b0, b0, b0)
	}
	// max(0, v) with v the second source: a NaN v is returned as is.
	for i := 0; i < mr; i++ {
		for v := 0; v < 2; v++ {
			g.p("\tVMAXPS %s, %s, %s", acc(0, i, v), b0, acc(0, i, v))
		}
	}
	g.p("%s_store:", name)
	for i := 0; i < mr; i++ {
		g.p("\tVMOVUPS %s, (DI)", acc(0, i, 0))
		g.p("\tVMOVUPS %s, %d(DI)", acc(0, i, 1), vb)
		if i < mr-1 {
			g.p("\tADDQ R9, DI")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// dotSignature is the Go signature of the dot kernels' assembly (see
// dotKernel): bias is nil or the bias of the n columns, flags holds
// dotReLU and dotAdd.
const dotSignature = "(k int, a *float32, lda int, b *float32, ldb int, n int, dst *float32, ldd int, bias *float32, flags int)"

// The bits of the dot kernels' flags argument (dotReLU and dotAdd in
// package f32).
const (
	flagReLU = 1
	flagAdd  = 2
)

// dotPrologue emits the header of dot kernel name (see dotKernel for its
// arguments) and loads them: k >> kShift (the kernel's k steps) into BX, a
// into SI and lda, ldb, 3·ldb and ldd in bytes into R10, R11, R12 and R9, b
// into DX, dst into DI and n into R8, as n/4 groups of columns when
// groups4 is set.
func dotPrologue(g *gen, name string, kShift int, groups4 bool) {
	g.p("// func %s%s", name, dotSignature)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	g.p("\tMOVQ k+0(FP), BX")
	g.p("\tSHRQ $%d, BX", kShift)
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ lda+16(FP), R10")
	g.p("\tSHLQ $2, R10")
	g.p("\tMOVQ b+24(FP), DX")
	g.p("\tMOVQ ldb+32(FP), R11")
	g.p("\tSHLQ $2, R11")
	g.p("\tLEAQ (R11)(R11*2), R12")
	g.p("\tMOVQ n+40(FP), R8")
	if groups4 {
		g.p("\tSHRQ $2, R8")
	}
	g.p("\tMOVQ dst+48(FP), DI")
	g.p("\tMOVQ ldd+56(FP), R9")
	g.p("\tSHLQ $2, R9")
}

// epiloguePrelude emits, after a group's k loops, the loads that
// dotStore needs: the flags into AX and, when there is a bias, the
// address of the group's first bias value into CX (bias plus the group's
// offset in dst, which advances with the columns as the bias does); clear
// zeroes a register the loops no longer need, for the ReLU.
func epiloguePrelude(g *gen, name, label, clear string) {
	g.p("\tMOVQ flags+72(FP), AX")
	g.p("\tMOVQ bias+64(FP), CX")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_%s_nobias", name, label)
	g.p("\tADDQ DI, CX")
	g.p("\tSUBQ dst+48(FP), CX")
	g.p("%s_%s_nobias:", name, label)
	g.p("\t%s", clear)
}

// dotStore emits the epilogue of one row of a group, whose sums are in
// register v (X or Y), and stores it at dst: v + bias (CX, when not nil),
// then max(v, 0) + 0 when AX has flagReLU, then v + dst when AX has
// flagAdd, as goDot computes them. VMAXPS returns its second source, v,
// when v is NaN or when both are zeros, and adding +0 turns −0 into +0, so
// the ReLU matches Go's max(v, 0) bit for bit.
func dotStore(g *gen, name, label string, row int, v, zero, dst string) {
	l := fmt.Sprintf("%s_%s_%d", name, label, row)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_bias", l)
	g.p("\tVADDPS (CX), %s, %s", v, v)
	g.p("%s_bias:", l)
	g.p("\tTESTQ $%d, AX", flagReLU)
	g.p("\tJZ %s_relu", l)
	g.p("\tVMAXPS %s, %s, %s", v, zero, v)
	g.p("\tVADDPS %s, %s, %s", zero, v, v)
	g.p("%s_relu:", l)
	g.p("\tTESTQ $%d, AX", flagAdd)
	g.p("\tJZ %s_add", l)
	g.p("\tVADDPS %s, %s, %s", dst, v, v)
	g.p("%s_add:", l)
	g.p("\tVMOVUPS %s, %s", v, dst)
}

// maxDotRows is the most rows of a that one dot kernel takes: three rows of
// four accumulators each fill the sixteen AVX2 registers with one row of a
// each and one row of b.
const maxDotRows = 3

// dot emits gemmDot{mr}x4AVX2, the kernel of the skinny path with Bᵀ stored
// row-major (a weight matrix n×k read once, as in y = x·Wᵀ), over n
// columns in groups of four rows of b:
//
//	for i := 0; i < mr; i++ {
//		for j := 0; j < n; j++ {   // n a positive multiple of 4
//			dst[i*ldd+j] = Σ_{p<k} a[i*lda+p] * b[j*ldb+p]   // k a multiple of 8, k ≥ 8
//		}
//	}
//
// Each dot product sums in eight lanes along k, then adds the lanes.
func dot(g *gen, mr int) {
	const nb = 4
	name := fmt.Sprintf("gemmDot%dx%dAVX2", mr, nb)
	acc := func(i, j int) string { return fmt.Sprintf("Y%d", i*nb+j) }
	breg := func(j int) string { return fmt.Sprintf("Y%d", 8+j) }
	areg := func(i int) string { return fmt.Sprintf("Y%d", 12+i) }
	brow := []string{"(R13)", "(R13)(R11*1)", "(R13)(R11*2)", "(R13)(R12*1)"}
	arow := []string{"(R14)", "(R14)(R10*1)", "(R14)(R10*2)"}
	drow := []string{"(DI)", "(DI)(R9*1)", "(DI)(R9*2)"}

	ahead := []string{"(R15)", "(R15)(R11*1)", "(R15)(R11*2)", "(R15)(R12*1)"}

	dotPrologue(g, name, 3, true)
	g.p("%s_group:", name)
	for i := 0; i < mr; i++ {
		for j := 0; j < nb; j++ {
			g.p("\tVXORPS %s, %s, %s", acc(i, j), acc(i, j), acc(i, j))
		}
	}
	g.p("\tMOVQ SI, R14")
	g.p("\tMOVQ DX, R13")
	// loop emits the k loop, which also prefetches the line at R15 plus
	// each row's offset (see dotAhead).
	loop := func(label string) {
		g.p("%s_%s:", name, label)
		for j := 0; j < nb; j++ {
			g.p("\tPREFETCHNTA %s", ahead[j])
		}
		if mr <= 2 {
			for j := 0; j < nb; j++ {
				g.p("\tVMOVUPS %s, %s", brow[j], breg(j))
			}
			for i := 0; i < mr; i++ {
				g.p("\tVMOVUPS %s, %s", arow[i], areg(i))
				for j := 0; j < nb; j++ {
					g.p("\tVFMADD231PS %s, %s, %s", breg(j), areg(i), acc(i, j))
				}
			}
		} else {
			// Twelve accumulators leave four registers: the rows of a in
			// Y12–Y14 and one row of b at a time in Y15. Every accumulator
			// sums the same products in the same order as above.
			for i := 0; i < mr; i++ {
				g.p("\tVMOVUPS %s, %s", arow[i], areg(i))
			}
			for j := 0; j < nb; j++ {
				g.p("\tVMOVUPS %s, Y15", brow[j])
				for i := 0; i < mr; i++ {
					g.p("\tVFMADD231PS Y15, %s, %s", areg(i), acc(i, j))
				}
			}
		}
		g.p("\tADDQ $32, R14")
		g.p("\tADDQ $32, R13")
		g.p("\tADDQ $32, R15")
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_%s", name, label)
	}
	prefetchedLoops(g, name, "loop", 32, nb, loop)
	epiloguePrelude(g, name, "group", "VXORPS X13, X13, X13")
	for i := 0; i < mr; i++ {
		// Each sum adds the register's halves, then pairs of lanes
		// twice: [s0 s1 s2 s3] gathers four columns' sums in X(i,0).
		x := func(j int) string { return "X" + acc(i, j)[1:] }
		for j := 0; j < nb; j++ {
			g.p("\tVEXTRACTF128 $1, %s, X15", acc(i, j))
			g.p("\tVADDPS %s, X15, %s", x(j), x(j))
		}
		g.p("\tVHADDPS %s, %s, %s", x(1), x(0), x(0))
		g.p("\tVHADDPS %s, %s, %s", x(3), x(2), x(2))
		g.p("\tVHADDPS %s, %s, %s", x(2), x(0), x(0))
		dotStore(g, name, "group", i, x(0), "X13", drow[i])
	}
	g.p("\tLEAQ (DX)(R11*4), DX")
	g.p("\tADDQ $%d, DI", 4*nb)
	g.p("\tDECQ R8")
	g.p("\tJNZ %s_group", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// dot512Cols is the column group of the AVX-512 dot kernels: three rows of
// eight accumulators take 24 of the 32 registers, with three rows of a, one
// row of b and the two permutations of the final sums beside them.
const dot512Cols = 8

// dotAhead is how far ahead, in bytes, each row of b that a dot kernel
// streams (eight at a time in AVX-512, four in AVX2) is prefetched. Rows
// of 2 KB (k = 512) end every 32 steps of an AVX-512 kernel, where the
// hardware prefetcher loses them; the kernels prefetch the next group's
// rows before they get there. PREFETCHNTA keeps the weights, which a
// decoding step reads once, from evicting the step's own values from the
// outer caches.
const dotAhead = 512

// prefetchedLoops emits the k loop of a group of nb rows of b (four or
// eight) in two parts, each a loop(label) of CX steps of step bytes that
// prefetches from R15 (and SI, rows 4–7): the steps before the last
// dotAhead/step (none when k is shorter) prefetch their own rows dotAhead
// bytes on, the last ones the next group's rows from their start. The
// last group of a call prefetches the rows after the call's columns too:
// they are most often the caller's next columns (the next piece of a
// claim, or a helper's next claim), and otherwise a few lines read early.
// BX holds the steps, R13 (and AX) the group's rows at their start, DX
// the group's first row.
func prefetchedLoops(g *gen, name, label string, step, nb int, loop func(label string)) {
	last := func() {
		g.p("\tMOVQ $%d, CX", dotAhead/step)
		g.p("\tCMPQ BX, CX")
		g.p("\tCMOVQLT BX, CX")
	}
	last()
	g.p("\tMOVQ BX, R15")
	g.p("\tSUBQ CX, R15")
	g.p("\tMOVQ R15, CX")
	g.p("\tLEAQ %d(R13), R15", dotAhead)
	if nb > 4 {
		g.p("\tLEAQ %d(AX), SI", dotAhead)
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_%s_next", name, label)
	loop(label)
	g.p("%s_%s_next:", name, label)
	last()
	g.p("\tLEAQ (DX)(R11*%d), R15", nb)
	if nb > 4 {
		g.p("\tLEAQ (R15)(R11*4), SI")
	}
	loop(label + "_tail")
}

// dot512 emits gemmDot{mr}x8AVX512, the AVX-512 kernel of the skinny path
// with Bᵀ stored row-major; it computes what gemmDot{mr}x4AVX2 does (see
// dot) with k a positive multiple of 16 and n of 4, eight rows of b at a
// time and then four:
//
//	for i := 0; i < mr; i++ {
//		for j := 0; j < n; j++ {
//			dst[i*ldd+j] = Σ_{p<k} a[i*lda+p] * b[j*ldb+p]
//		}
//	}
//
// Every dot product sums in sixteen lanes along k, lane l taking the
// products p ≡ l (mod 16) in order, and then adds the lanes in one tree,
// the same for every row and column of every kernel of the family:
//
//	y[l] = x[l] + x[l+8], z[l] = y[l] + y[l+4], w[l] = z[l] + z[l+2], w[0] + w[1]
//
// so that a row's results do not depend on the rows beside it. The tree
// runs on eight (or four) dot products of a row at once: halves of two
// registers are shuffled together before each addition.
func dot512(g *gen, mr int) {
	name := fmt.Sprintf("gemmDot%dx%dAVX512", mr, dot512Cols)
	acc := func(i, j int) string { return fmt.Sprintf("Z%d", i*dot512Cols+j) }
	areg := func(i int) string { return fmt.Sprintf("Z%d", 24+i) }
	const breg, t0, t1, perm0, perm1 = "Z27", "Z28", "Z29", "Z30", "Z31"
	brow := []string{"(R13)", "(R13)(R11*1)", "(R13)(R11*2)", "(R13)(R12*1)", "(AX)", "(AX)(R11*1)", "(AX)(R11*2)", "(AX)(R12*1)"}
	ahead := []string{"(R15)", "(R15)(R11*1)", "(R15)(R11*2)", "(R15)(R12*1)", "(SI)", "(SI)(R11*1)", "(SI)(R11*2)", "(SI)(R12*1)"}
	arow := []string{"(R14)", "(R14)(R10*1)", "(R14)(R10*2)"}
	drow := []string{"(DI)", "(DI)(R9*1)", "(DI)(R9*2)"}

	dotPrologue(g, name, 4, false)
	g.p("\tVMOVUPS dotPerm<>+0(SB), %s", perm0)
	g.p("\tVMOVUPS dotPerm<>+64(SB), %s", perm1)
	group := func(nb int, label string) {
		for i := 0; i < mr; i++ {
			for j := 0; j < nb; j++ {
				g.p("\tVPXORD %s, %s, %s", acc(i, j), acc(i, j), acc(i, j))
			}
		}
		g.p("\tMOVQ a+8(FP), R14")
		g.p("\tMOVQ DX, R13")
		if nb > 4 {
			g.p("\tLEAQ (DX)(R11*4), AX")
		}
		// loop emits the k loop; with prefetch it also prefetches, for
		// each of the eight rows of b, the line at R15 (rows 0–3) or SI
		// (rows 4–7) plus that row's offset.
		loop := func(label string, prefetch bool) {
			g.p("%s_%s:", name, label)
			for i := 0; i < mr; i++ {
				g.p("\tVMOVUPS %s, %s", arow[i], areg(i))
			}
			for j := 0; j < nb; j++ {
				if prefetch {
					g.p("\tPREFETCHNTA %s", ahead[j])
				}
				if mr == 1 {
					g.p("\tVFMADD231PS %s, %s, %s", brow[j], areg(0), acc(0, j))
					continue
				}
				g.p("\tVMOVUPS %s, %s", brow[j], breg)
				for i := 0; i < mr; i++ {
					g.p("\tVFMADD231PS %s, %s, %s", breg, areg(i), acc(i, j))
				}
			}
			g.p("\tADDQ $64, R14")
			g.p("\tADDQ $64, R13")
			if nb > 4 {
				g.p("\tADDQ $64, AX")
			}
			if prefetch {
				g.p("\tADDQ $64, R15")
				g.p("\tADDQ $64, SI")
			}
			g.p("\tDECQ CX")
			g.p("\tJNZ %s_%s", name, label)
		}
		if nb == 4 {
			g.p("\tMOVQ BX, CX")
			loop(label, false)
		} else {
			prefetchedLoops(g, name, label, 64, nb, func(label string) { loop(label, true) })
		}
		epiloguePrelude(g, name, label, fmt.Sprintf("VPXORD %s, %s, %s", breg, breg, breg))
		for i := 0; i < mr; i++ {
			x := func(j int) string { return acc(i, j) }
			// y: the 256-bit halves of pairs, [y_j | y_j+1].
			for j := 0; j < nb; j += 2 {
				g.p("\tVSHUFF32X4 $0x44, %s, %s, %s", x(j+1), x(j), t0)
				g.p("\tVSHUFF32X4 $0xEE, %s, %s, %s", x(j+1), x(j), t1)
				g.p("\tVADDPS %s, %s, %s", t1, t0, x(j))
			}
			// z: the 128-bit quarters of pairs of those, [z_j | z_j+1 | z_j+2 | z_j+3].
			for j := 0; j < nb; j += 4 {
				g.p("\tVSHUFF32X4 $0x88, %s, %s, %s", x(j+2), x(j), t0)
				g.p("\tVSHUFF32X4 $0xDD, %s, %s, %s", x(j+2), x(j), t1)
				g.p("\tVADDPS %s, %s, %s", t1, t0, x(j))
			}
			// w: pairs of lanes in each quarter, quarter q holding
			// [w_q(0), w_q(1), w_q+4(0), w_q+4(1)].
			hi := x(4)
			if nb == 4 {
				hi = x(0)
			}
			g.p("\tVSHUFPS $0x44, %s, %s, %s", hi, x(0), t0)
			g.p("\tVSHUFPS $0xEE, %s, %s, %s", hi, x(0), t1)
			g.p("\tVADDPS %s, %s, %s", t1, t0, x(0))
			// The sums, in column order.
			g.p("\tVPERMPS %s, %s, %s", x(0), perm0, t0)
			g.p("\tVPERMPS %s, %s, %s", x(0), perm1, t1)
			v := "Y"
			if nb == 4 {
				v = "X"
			}
			g.p("\tVADDPS %s%s, %s%s, %s%s", v, t1[1:], v, t0[1:], v, t0[1:])
			dotStore(g, name, label, i, v+t0[1:], v+breg[1:], drow[i])
		}
	}
	g.p("\tSHRQ $3, R8")
	g.p("\tJZ %s_four", name)
	g.p("%s_group:", name)
	group(8, "loop")
	g.p("\tLEAQ (DX)(R11*8), DX")
	g.p("\tADDQ $32, DI")
	g.p("\tDECQ R8")
	g.p("\tJNZ %s_group", name)
	g.p("%s_four:", name)
	g.p("\tMOVQ n+40(FP), R8")
	g.p("\tTESTQ $4, R8")
	g.p("\tJZ %s_done", name)
	group(4, "loop4")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// dotPerm emits the two permutations that gather the final pairs of the
// AVX-512 dot kernels: after the w step, quarter q of a row's register
// holds the pairs of columns q and q+4, so columns 0…7 take lanes 0, 4, 8,
// 12, 2, 6, 10, 14 (and the next lane for the pair's second term).
func dotPerm(g *gen) {
	lanes := []int{0, 4, 8, 12, 2, 6, 10, 14}
	for t := 0; t < 2; t++ {
		for j := 0; j < 16; j++ {
			g.p("DATA dotPerm<>+%d(SB)/4, $%d", 64*t+4*j, lanes[j%8]+t)
		}
	}
	g.p("GLOBL dotPerm<>(SB), RODATA|NOPTR, $128")
	g.p("")
}

// dotWrapper emits the dotKernel entry of assembly kernel name, of mr
// rows: it checks the slices' bounds and passes their first elements.
func dotWrapper(g *gen, name string, mr int) {
	g.p("\tfunc(k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int) {")
	g.p("\t\t_, _, _ = a[%d*lda+k-1], b[(n-1)*ldb+k-1], dst[%d*ldd+n-1]", mr-1, mr-1)
	g.p("\t\tvar bp *float32")
	g.p("\t\tif bias != nil {")
	g.p("\t\t\t_ = bias[n-1]")
	g.p("\t\t\tbp = &bias[0]")
	g.p("\t\t}")
	g.p("\t\t%s(k, &a[0], lda, &b[0], ldb, n, &dst[0], ldd, bp, flags)", name)
	g.p("\t},")
}

// decls writes the Go side: the assembly declarations, bounds-checked slice
// wrappers and the tables that gemm_amd64.go hands to the driver.
func decls() []byte {
	g := new(gen)
	g.p("// Code generated by go run ./_gen; DO NOT EDIT.")
	g.p("")
	g.p("//go:build !purego && !noasm && gc")
	g.p("")
	g.p("package f32")
	g.p("")
	for _, s := range []isa{avx2, avx512} {
		nr := 2 * s.lanes
		for mr := 1; mr <= s.maxMR; mr++ {
			name := fmt.Sprintf("gemmKernel%dx%d%s", mr, nr, s.name)
			g.p("// %s computes a %d×%d tile; see microKernel and goKernel for the loop.", name, mr, nr)
			g.p("//")
			g.p("//go:noescape")
			g.p("func %s(k int, a, b *float32, bs int, c *float32, ldc int, beta float32, pf int, bias *float32, relu bool)", name)
			g.p("")
		}
		g.p("var kernels%s = []microKernel{", s.name)
		for mr := 1; mr <= s.maxMR; mr++ {
			name := fmt.Sprintf("gemmKernel%dx%d%s", mr, nr, s.name)
			g.p("\tfunc(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, pf int, bias []float32, relu bool) {")
			g.p("\t\t_, _, _ = a[%d*k-1], b[(k-1)*bs+%d], c[%d*ldc+%d]", mr, nr-1, mr-1, nr-1)
			g.p("\t\tvar bp *float32")
			g.p("\t\tif bias != nil {")
			g.p("\t\t\t_ = bias[%d]", nr-1)
			g.p("\t\t\tbp = &bias[0]")
			g.p("\t\t}")
			g.p("\t\t%s(k, &a[0], &b[0], bs, &c[0], ldc, beta, pf, bp, relu)", name)
			g.p("\t},")
		}
		g.p("}")
		g.p("")
	}
	for mr := 1; mr <= maxDotRows; mr++ {
		name := fmt.Sprintf("gemmDot%dx4AVX2", mr)
		g.p("// %s computes %d row(s) of dot products, four columns at a time; see dotKernel and goDot for the loop.", name, mr)
		g.p("//")
		g.p("//go:noescape")
		g.p("func %s%s", name, dotSignature)
		g.p("")
	}
	g.p("var dotsAVX2 = []dotKernel{")
	for mr := 1; mr <= maxDotRows; mr++ {
		name := fmt.Sprintf("gemmDot%dx4AVX2", mr)
		dotWrapper(g, name, mr)
	}
	g.p("}")
	g.p("")
	for mr := 1; mr <= maxDotRows; mr++ {
		name := fmt.Sprintf("gemmDot%dx%dAVX512", mr, dot512Cols)
		g.p("// %s computes %d row(s) of dot products, eight columns at a time and k a multiple of 16; see dotKernel, dot512 in ./_gen and goDot for the loop.", name, mr)
		g.p("//")
		g.p("//go:noescape")
		g.p("func %s%s", name, dotSignature)
		g.p("")
	}
	g.p("var dotsAVX512 = []dotKernel{")
	for mr := 1; mr <= maxDotRows; mr++ {
		name := fmt.Sprintf("gemmDot%dx%dAVX512", mr, dot512Cols)
		dotWrapper(g, name, mr)
	}
	g.p("}")
	g.p("")
	g.p("// packRows6AVX2 packs six rows of A; see packPanel.")
	g.p("//")
	g.p("//go:noescape")
	g.p("func packRows6AVX2(k int, a *float32, lda int, dst *float32, ldd int, alpha float32)")
	for _, s := range []isa{avx2, avx512} {
		g.p("")
		g.p("// packCols%d%s copies a strip of B; see packStrip.", 2*s.lanes, s.name)
		g.p("//")
		g.p("//go:noescape")
		g.p("func packCols%d%s(k int, b *float32, ldb int, dst *float32)", 2*s.lanes, s.name)
	}
	for r := 1; r <= 3; r++ {
		name := fmt.Sprintf("gemmAxpy%dAVX2", r)
		g.p("")
		g.p("// %s updates %d rows of C; see axpyKernel and goAxpy for the loop.", name, r)
		g.p("//")
		g.p("//go:noescape")
		g.p("func %s(n int, a, b *float32, ldb int, c *float32, ldc int)", name)
	}
	g.p("")
	g.p("var axpysAVX2 = []axpyKernel{")
	for r := 1; r <= 3; r++ {
		g.p("\tfunc(n int, a, b []float32, ldb int, c []float32, ldc int) {")
		g.p("\t\t_, _, _ = a[%d], b[3*ldb+n-1], c[%d*ldc+n-1]", 4*r-1, r-1)
		g.p("\t\tgemmAxpy%dAVX2(n, &a[0], &b[0], ldb, &c[0], ldc)", r)
		g.p("\t},")
	}
	g.p("}")
	for _, nr := range []int{16, 32} {
		g.p("")
		g.p("// packColsT%dAVX2 packs a strip of Bᵀ; see packB.", nr)
		g.p("//")
		g.p("//go:noescape")
		g.p("func packColsT%dAVX2(k int, b *float32, ldb int, dst *float32)", nr)
	}
	g.p("")
	g.p("// winoIn8AVX2 is the input transform of a Winograd tile; see winoIn and goWinoIn.")
	g.p("//")
	g.p("//go:noescape")
	g.p("func winoIn8AVX2(c int, src *float32, rs, ps int, dst *float32, ds int)")
	g.p("")
	g.p("// winoOut8AVX2 is the output transform of a Winograd tile; see winoOut and goWinoOut.")
	g.p("//")
	g.p("//go:noescape")
	g.p("func winoOut8AVX2(c int, src *float32, ms int, dst *float32, rs, ps int, bias *float32, beta float32, relu bool)")
	src, err := format.Source(g.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	return src
}

// pack emits the packing kernels of the AVX2 and AVX-512 sets:
//
// packRows6AVX2 transposes six rows of A into a panel, eight columns at a
// time (k a positive multiple of 8):
//
//	for i < 6, p < k: dst[p*ldd+i] = alpha * a[i*lda+p]
//
// It writes exactly six floats per p (a 16-byte and an 8-byte store), so a
// panel of twelve rows is two calls, at dst and dst+6, with ldd = 12.
//
// packColsN{AVX2,AVX512} copy a strip of nr = 16 or 32 columns of B (k ≥ 1):
//
//	for p < k, j < nr: dst[p*nr+j] = b[p*ldb+j]
func pack(g *gen) {
	g.p("// func packRows6AVX2(k int, a *float32, lda int, dst *float32, ldd int, alpha float32)")
	g.p("TEXT ·packRows6AVX2(SB), NOSPLIT, $0-44")
	g.p("\tMOVQ k+0(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ lda+16(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tLEAQ (R8)(R8*2), R9")
	g.p("\tLEAQ (R8)(R8*4), R10")
	g.p("\tMOVQ dst+24(FP), DI")
	g.p("\tMOVQ ldd+32(FP), R11")
	g.p("\tSHLQ $2, R11")
	g.p("\tVBROADCASTSS alpha+40(FP), Y15")
	g.p("packRows6AVX2_loop:")
	rows := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)", "(SI)(R8*4)", "(SI)(R10*1)"}
	for i, r := range rows {
		g.p("\tVMULPS %s, Y15, Y%d", r, i)
	}
	// t0..t5 in Y6..Y11: interleave row pairs.
	g.p("\tVUNPCKLPS Y1, Y0, Y6")
	g.p("\tVUNPCKHPS Y1, Y0, Y7")
	g.p("\tVUNPCKLPS Y3, Y2, Y8")
	g.p("\tVUNPCKHPS Y3, Y2, Y9")
	g.p("\tVUNPCKLPS Y5, Y4, Y10")
	g.p("\tVUNPCKHPS Y5, Y4, Y11")
	// s0..s3 (rows 0-3 of columns 0|4, 1|5, 2|6, 3|7) in Y0..Y3,
	// s4..s7 (rows 4-5, two junk lanes) in Y4, Y5, Y12, Y13.
	g.p("\tVSHUFPS $0x44, Y8, Y6, Y0")
	g.p("\tVSHUFPS $0xEE, Y8, Y6, Y1")
	g.p("\tVSHUFPS $0x44, Y9, Y7, Y2")
	g.p("\tVSHUFPS $0xEE, Y9, Y7, Y3")
	g.p("\tVSHUFPS $0x44, Y10, Y10, Y4")
	g.p("\tVSHUFPS $0xEE, Y10, Y10, Y5")
	g.p("\tVSHUFPS $0x44, Y11, Y11, Y12")
	g.p("\tVSHUFPS $0xEE, Y11, Y11, Y13")
	lo := []string{"Y0", "Y1", "Y2", "Y3"}
	hi := []string{"Y4", "Y5", "Y12", "Y13"}
	for p := 0; p < 8; p++ {
		if p < 4 {
			g.p("\tVMOVUPS X%s, (DI)", lo[p][1:])
			g.p("\tVMOVSD X%s, 16(DI)", hi[p][1:])
		} else {
			g.p("\tVEXTRACTF128 $1, %s, (DI)", lo[p-4])
			g.p("\tVEXTRACTF128 $1, %s, X14", hi[p-4])
			g.p("\tVMOVSD X14, 16(DI)")
		}
		g.p("\tADDQ R11, DI")
	}
	g.p("\tADDQ $32, SI")
	g.p("\tDECQ CX")
	g.p("\tJNZ packRows6AVX2_loop")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
	for _, s := range []isa{avx2, avx512} {
		nr := 2 * s.lanes
		name := fmt.Sprintf("packCols%d%s", nr, s.name)
		vb := 4 * s.lanes
		g.p("// func %s(k int, b *float32, ldb int, dst *float32)", name)
		g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
		g.p("\tMOVQ k+0(FP), CX")
		g.p("\tMOVQ b+8(FP), SI")
		g.p("\tMOVQ ldb+16(FP), R8")
		g.p("\tSHLQ $2, R8")
		g.p("\tMOVQ dst+24(FP), DI")
		g.p("%s_loop:", name)
		g.p("\tVMOVUPS (SI), %s0", s.reg)
		g.p("\tVMOVUPS %d(SI), %s1", vb, s.reg)
		g.p("\tVMOVUPS %s0, (DI)", s.reg)
		g.p("\tVMOVUPS %s1, %d(DI)", s.reg, vb)
		g.p("\tADDQ R8, SI")
		g.p("\tADDQ $%d, DI", 2*vb)
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_loop", name)
		g.p("\tVZEROUPPER")
		g.p("\tRET")
		g.p("")
	}
}

// packT emits packColsT{16,32}AVX2, which packs a strip of op(B) = Bᵀ (nr
// rows of B, each a column of op(B)) with 8×8 transposes (k a positive
// multiple of 8):
//
//	for p < k, j < nr: dst[p*nr+j] = b[j*ldb+p]
func packT(g *gen, nr int) {
	name := fmt.Sprintf("packColsT%dAVX2", nr)
	g.p("// func %s(k int, b *float32, ldb int, dst *float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ k+0(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("\tMOVQ b+8(FP), SI")
	g.p("\tMOVQ ldb+16(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tLEAQ (R8)(R8*2), R9")
	g.p("\tLEAQ (R8)(R8*4), R10")
	g.p("\tLEAQ (R9)(R8*4), R11")
	g.p("\tMOVQ dst+24(FP), DI")
	g.p("%s_loop:", name)
	g.p("\tMOVQ SI, BX")
	rows := []string{"(BX)", "(BX)(R8*1)", "(BX)(R8*2)", "(BX)(R9*1)", "(BX)(R8*4)", "(BX)(R10*1)", "(BX)(R9*2)", "(BX)(R11*1)"}
	for grp := 0; grp < nr/8; grp++ {
		for i, r := range rows {
			g.p("\tVMOVUPS %s, Y%d", r, i)
		}
		for i := 0; i < 4; i++ {
			g.p("\tVUNPCKLPS Y%d, Y%d, Y%d", 2*i+1, 2*i, 8+2*i)
			g.p("\tVUNPCKHPS Y%d, Y%d, Y%d", 2*i+1, 2*i, 9+2*i)
		}
		// s0..s7 in Y0..Y7: four rows of one column pair (c | c+4) each.
		g.p("\tVSHUFPS $0x44, Y10, Y8, Y0")
		g.p("\tVSHUFPS $0xEE, Y10, Y8, Y1")
		g.p("\tVSHUFPS $0x44, Y11, Y9, Y2")
		g.p("\tVSHUFPS $0xEE, Y11, Y9, Y3")
		g.p("\tVSHUFPS $0x44, Y14, Y12, Y4")
		g.p("\tVSHUFPS $0xEE, Y14, Y12, Y5")
		g.p("\tVSHUFPS $0x44, Y15, Y13, Y6")
		g.p("\tVSHUFPS $0xEE, Y15, Y13, Y7")
		for c := 0; c < 8; c++ {
			imm := "0x20"
			if c >= 4 {
				imm = "0x31"
			}
			g.p("\tVPERM2F128 $%s, Y%d, Y%d, Y%d", imm, 4+c%4, c%4, 8+c)
		}
		for c := 0; c < 8; c++ {
			g.p("\tVMOVUPS Y%d, %d(DI)", 8+c, 4*(c*nr+8*grp))
		}
		if grp < nr/8-1 {
			g.p("\tLEAQ (BX)(R8*8), BX")
		}
	}
	g.p("\tADDQ $32, SI")
	g.p("\tADDQ $%d, DI", 4*8*nr)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// axpy emits gemmAxpy{r}AVX2, the kernel of products with very few rows
// (decoding one to three sequences) and B read in place: it streams four
// rows of B at a time, front to back, and updates the r rows of C, which
// stay in cache (n a positive multiple of 8):
//
//	for i < r, j < n: c[i*ldc+j] += Σ_{q<4} a[i*4+q] * b[q*ldb+j]
//
// The column blocks are independent, so the out-of-order core overlaps the
// four-FMA chains of consecutive blocks.
func axpy(g *gen, r int) {
	name := fmt.Sprintf("gemmAxpy%dAVX2", r)
	brow := []string{"(DX)", "(DX)(R8*1)", "(DX)(R8*2)", "(DX)(R9*1)"}
	crow := []string{"(DI)", "(DI)(R10*1)", "(DI)(R10*2)"}
	g.p("// func %s(n int, a, b *float32, ldb int, c *float32, ldc int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ n+0(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ b+16(FP), DX")
	g.p("\tMOVQ ldb+24(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tLEAQ (R8)(R8*2), R9")
	g.p("\tMOVQ c+32(FP), DI")
	g.p("\tMOVQ ldc+40(FP), R10")
	g.p("\tSHLQ $2, R10")
	for i := 0; i < 4*r; i++ {
		g.p("\tVBROADCASTSS %d(SI), Y%d", 4*i, i)
	}
	g.p("%s_loop:", name)
	for i := 0; i < r; i++ {
		g.p("\tVMOVUPS %s, Y%d", crow[i], 12+i)
	}
	for q := 0; q < 4; q++ {
		for i := 0; i < r; i++ {
			g.p("\tVFMADD231PS %s, Y%d, Y%d", brow[q], 4*i+q, 12+i)
		}
	}
	for i := 0; i < r; i++ {
		g.p("\tVMOVUPS Y%d, %s", 12+i, crow[i])
	}
	g.p("\tADDQ $32, DX")
	g.p("\tADDQ $32, DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// winoIn emits winoIn8AVX2, the input transform of a Winograd F(2×2, 3×3)
// tile, eight channels at a time (c a positive multiple of 8; see winoIn
// and goWinoIn in winograd.go for the loop): with d[i][j] the 4×4 patch
// at src + i·rs + j·ps,
//
//	t0 = d0 − d2, t1 = d1 + d2, t2 = d2 − d1, t3 = d1 − d3        (rows of d)
//	dst[(4i+0)·ds] = t[i][0] − t[i][2], dst[(4i+1)·ds] = t[i][1] + t[i][2],
//	dst[(4i+2)·ds] = t[i][2] − t[i][1], dst[(4i+3)·ds] = t[i][1] − t[i][3]
func winoIn(g *gen) {
	const name = "winoIn8AVX2"
	g.p("// func %s(c int, src *float32, rs, ps int, dst *float32, ds int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ c+0(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("\tMOVQ src+8(FP), R8")
	g.p("\tMOVQ rs+16(FP), AX")
	g.p("\tSHLQ $2, AX")
	g.p("\tLEAQ (R8)(AX*1), R9")
	g.p("\tLEAQ (R9)(AX*1), R10")
	g.p("\tLEAQ (R10)(AX*1), R11")
	g.p("\tMOVQ ps+24(FP), R12")
	g.p("\tSHLQ $2, R12")
	g.p("\tLEAQ (R12)(R12*2), R13")
	g.p("\tMOVQ dst+32(FP), DI")
	g.p("\tMOVQ ds+40(FP), AX")
	g.p("\tSHLQ $2, AX")
	g.p("\tLEAQ (AX)(AX*2), BX")
	g.p("\tMOVQ AX, DX")
	g.p("\tSHLQ $2, DX")
	g.p("%s_loop:", name)
	g.p("\tMOVQ DI, SI")
	px := func(r string, j int) string {
		return []string{"(" + r + ")", "(" + r + ")(R12*1)", "(" + r + ")(R12*2)", "(" + r + ")(R13*1)"}[j]
	}
	// Row i of t from two rows of d: t = a op b.
	rows := []struct{ a, b, op string }{{"R8", "R10", "VSUBPS"}, {"R9", "R10", "VADDPS"}, {"R10", "R9", "VSUBPS"}, {"R9", "R11", "VSUBPS"}}
	out := []string{"(SI)", "(SI)(AX*1)", "(SI)(AX*2)", "(SI)(BX*1)"}
	for i, r := range rows {
		for j := 0; j < 4; j++ {
			g.p("\tVMOVUPS %s, Y%d", px(r.a, j), j)
			g.p("\t%s %s, Y%d, Y%d", r.op, px(r.b, j), j, j)
		}
		g.p("\tVSUBPS Y2, Y0, Y4")
		g.p("\tVADDPS Y2, Y1, Y5")
		g.p("\tVSUBPS Y1, Y2, Y6")
		g.p("\tVSUBPS Y3, Y1, Y7")
		for j := 0; j < 4; j++ {
			g.p("\tVMOVUPS Y%d, %s", 4+j, out[j])
		}
		if i < 3 {
			g.p("\tADDQ DX, SI")
		}
	}
	for _, r := range []string{"R8", "R9", "R10", "R11", "DI"} {
		g.p("\tADDQ $32, %s", r)
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// winoOut emits winoOut8AVX2, the output transform of a Winograd
// F(2×2, 3×3) tile, eight channels at a time (c a positive multiple of 8;
// see winoOut and goWinoOut in winograd.go): with M[i][j] at
// src + (4i+j)·ms,
//
//	s0 = M0 + M1 + M2, s1 = M1 − M2 − M3                            (rows of M)
//	Y[i][0] = s[i][0] + s[i][1] + s[i][2], Y[i][1] = s[i][1] − s[i][2] − s[i][3]
//	v = Y[i][j] + beta·dst[i·rs + j·ps]   if beta ≠ 0 (an FMA; dst is not read otherwise)
//	v += bias                              if bias != nil
//	dst[i·rs + j·ps] = max(v, 0) if relu, else v (NaN stays NaN)
func winoOut(g *gen) {
	const name = "winoOut8AVX2"
	g.p("// func %s(c int, src *float32, ms int, dst *float32, rs, ps int, bias *float32, beta float32, relu bool)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-61", name)
	g.p("\tMOVQ c+0(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("\tMOVQ src+8(FP), SI")
	g.p("\tMOVQ ms+16(FP), AX")
	g.p("\tSHLQ $2, AX")
	g.p("\tLEAQ (AX)(AX*2), BX")
	g.p("\tMOVQ AX, DX")
	g.p("\tSHLQ $2, DX")
	g.p("\tMOVQ dst+24(FP), DI")
	g.p("\tMOVQ rs+32(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("\tADDQ DI, R9")
	g.p("\tMOVQ ps+40(FP), R10")
	g.p("\tSHLQ $2, R10")
	g.p("\tMOVQ bias+48(FP), R11")
	g.p("\tVBROADCASTSS beta+56(FP), Y15")
	g.p("\tMOVL beta+56(FP), R12")
	g.p("\tANDL $0x7fffffff, R12")
	g.p("\tMOVBLZX relu+60(FP), R13")
	g.p("\tVXORPS Y14, Y14, Y14")
	g.p("%s_loop:", name)
	row := func(r string) []string {
		return []string{"(" + r + ")", "(" + r + ")(AX*1)", "(" + r + ")(AX*2)", "(" + r + ")(BX*1)"}
	}
	// M rows 0, 1, 2 into Y0..Y3, Y4..Y7, Y8..Y11.
	g.p("\tMOVQ SI, R8")
	for i := 0; i < 3; i++ {
		for j, m := range row("R8") {
			g.p("\tVMOVUPS %s, Y%d", m, 4*i+j)
		}
		g.p("\tADDQ DX, R8")
	}
	for j := 0; j < 4; j++ { // s0 = M0 + M1 + M2, s1 = M1 − M2 − M3
		g.p("\tVADDPS Y%d, Y%d, Y%d", 4+j, j, j)
		g.p("\tVADDPS Y%d, Y%d, Y%d", 8+j, j, j)
		g.p("\tVSUBPS Y%d, Y%d, Y%d", 8+j, 4+j, 4+j)
		g.p("\tVSUBPS %s, Y%d, Y%d", row("R8")[j], 4+j, 4+j)
	}
	for i := 0; i < 2; i++ { // Y[i][0] in Y8+2i, Y[i][1] in Y9+2i
		s := 4 * i
		g.p("\tVADDPS Y%d, Y%d, Y%d", s+1, s, 8+2*i)
		g.p("\tVADDPS Y%d, Y%d, Y%d", s+2, 8+2*i, 8+2*i)
		g.p("\tVSUBPS Y%d, Y%d, Y%d", s+2, s+1, 9+2*i)
		g.p("\tVSUBPS Y%d, Y%d, Y%d", s+3, 9+2*i, 9+2*i)
	}
	dst := []string{"(DI)", "(DI)(R10*1)", "(R9)", "(R9)(R10*1)"}
	g.p("\tTESTL R12, R12")
	g.p("\tJZ %s_bias", name)
	for k, d := range dst {
		g.p("\tVFMADD231PS %s, Y15, Y%d", d, 8+k)
	}
	g.p("%s_bias:", name)
	g.p("\tTESTQ R11, R11")
	g.p("\tJZ %s_relu", name)
	g.p("\tVMOVUPS (R11), Y12")
	for k := range dst {
		g.p("\tVADDPS Y12, Y%d, Y%d", 8+k, 8+k)
	}
	g.p("\tADDQ $32, R11")
	g.p("%s_relu:", name)
	g.p("\tTESTL R13, R13")
	g.p("\tJZ %s_store", name)
	for k := range dst {
		g.p("\tVMAXPS Y%d, Y14, Y%d", 8+k, 8+k)
	}
	g.p("%s_store:", name)
	for k, d := range dst {
		g.p("\tVMOVUPS Y%d, %s", 8+k, d)
	}
	for _, r := range []string{"SI", "DI", "R9"} {
		g.p("\tADDQ $32, %s", r)
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

func main() {
	out := flag.String("o", "gemm_amd64.s", "output file")
	goOut := flag.String("go", "gemm_asm_amd64.go", "output file for the Go declarations")
	flag.Parse()
	if err := os.WriteFile(*goOut, decls(), 0o644); err != nil {
		log.Fatal(err)
	}
	g := new(gen)
	g.p("// Code generated by go run ./_gen; DO NOT EDIT.")
	g.p("")
	g.p("//go:build !purego && !noasm && gc")
	g.p("")
	g.p("#include \"textflag.h\"")
	g.p("")
	for mr := 1; mr <= avx2.maxMR; mr++ {
		kernel(g, avx2, mr)
	}
	for mr := 1; mr <= avx512.maxMR; mr++ {
		kernel(g, avx512, mr)
	}
	for mr := 1; mr <= maxDotRows; mr++ {
		dot(g, mr)
	}
	dotPerm(g)
	for mr := 1; mr <= maxDotRows; mr++ {
		dot512(g, mr)
	}
	for r := 1; r <= 3; r++ {
		axpy(g, r)
	}
	pack(g)
	packT(g, 16)
	packT(g, 32)
	winoIn(g)
	winoOut(g)
	if err := os.WriteFile(*out, g.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
