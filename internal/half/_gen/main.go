// Command _gen writes internal/half/half_amd64.s and half_asm_amd64.go, the
// Go-assembly kernels of package half. Run it from internal/half with
// `go run ./_gen` (or through go generate); it uses the standard library
// only.
//
// The kernels are straight-line AVX2/FMA/F16C code, so a small printer is
// clearer than an assembler DSL: each function below emits one kernel
// family, and the loop that the family computes is spelled out in its
// comment and in the pure-Go twin in kernel_go.go.
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

// elem is the storage of a weight matrix.
type elem struct {
	name  string // suffix of the Go function names
	gotyp string // Go element type
	size  int    // bytes per element
	panel bool   // groups of four rows interleaved in blocks of eight columns
}

// f16: binary16 panels, [group][k/8][4][8], read as one stream. (Float32
// weights go through internal/f32's dot kernels, f32.Dots.)
var f16 = elem{name: "F16", gotyp: "uint16", size: 2, panel: true}

// prefetch is how far ahead the panel kernels prefetch their stream, in
// bytes: the hardware prefetchers alone keep too few lines in flight for a
// core to stream at full speed when three rows of x share each weight.
const prefetch = 2048

// load emits the load of eight consecutive weights at addr into the
// float32 lanes of reg: a conversion from half precision (F16C) or a plain
// load.
func (e elem) load(g *gen, addr, reg string) {
	if e.size == 2 {
		g.p("\tVCVTPH2PS %s, %s", addr, reg)
	} else {
		g.p("\tVMOVUPS %s, %s", addr, reg)
	}
}

// dot emits dot{r}{E}, r rows of x against groups of four rows of W:
//
//	for j := 0; j < n; j++ {            // n a positive multiple of 4
//		for i := 0; i < r; i++ {
//			y[i*ldy+j] = Σ_{p<k} x[i*ldx+p] * W[j][p]   // k a positive multiple of 8
//		}
//	}
//
// where W[j][p] is w[j*ldw+p] for float32 rows, and the binary16 value
// w[(j/4)*4*ldw + (p/8)*32 + (j%4)*8 + p%8] widened to float32 for panels
// (ldw ≥ k, a multiple of 8).
//
// Each group of four rows of W is read once, front to back (as four
// sequential streams, or one for a panel), and meets the r rows of x (which
// stay in L1) in r×4 vector accumulators; a group's sums are reduced across
// the lanes and stored as four consecutive floats of each row of y. With one
// row the k loop alternates two sets of accumulators, so that eight FMA
// chains hide the FMA latency.
func dot(g *gen, e elem, r int) {
	name := fmt.Sprintf("dot%d%s", r, e.name)
	sets := 1
	if r == 1 {
		sets = 2
	}
	acc := func(set, i, j int) string { return fmt.Sprintf("Y%d", set*4*r+i*4+j) }
	nacc := sets * 4 * r
	xreg := func(i int) string { return fmt.Sprintf("Y%d", nacc+i) }
	wreg := fmt.Sprintf("Y%d", nacc+r)
	wrow := []string{"(R13)", "(R13)(R11*1)", "(R13)(R11*2)", "(R13)(R12*1)"}
	xrow := []string{"(R14)", "(R14)(R10*1)", "(R14)(R10*2)"}
	yrow := []string{"(DI)", "(DI)(R9*1)", "(DI)(R9*2)"}
	wstep := 8 * e.size
	if e.panel {
		wrow = []string{"(R13)", "16(R13)", "32(R13)", "48(R13)"}
		wstep = 4 * 8 * e.size
	}

	g.p("// func %s(k int, x *float32, ldx int, w *%s, ldw int, n int, y *float32, ldy int)", name, e.gotyp)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.p("\tMOVQ k+0(FP), BX")
	g.p("\tSHRQ $3, BX")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ ldx+16(FP), R10")
	g.p("\tSHLQ $2, R10")
	g.p("\tMOVQ w+24(FP), DX")
	g.p("\tMOVQ ldw+32(FP), R11")
	if e.size == 2 {
		g.p("\tSHLQ $1, R11")
	} else {
		g.p("\tSHLQ $2, R11")
	}
	g.p("\tLEAQ (R11)(R11*2), R12")
	g.p("\tMOVQ n+40(FP), R8")
	g.p("\tSHRQ $2, R8")
	g.p("\tMOVQ y+48(FP), DI")
	g.p("\tMOVQ ldy+56(FP), R9")
	g.p("\tSHLQ $2, R9")
	g.p("%s_group:", name)
	for set := 0; set < sets; set++ {
		for i := 0; i < r; i++ {
			for j := 0; j < 4; j++ {
				a := acc(set, i, j)
				g.p("\tVXORPS %s, %s, %s", a, a, a)
			}
		}
	}
	g.p("\tMOVQ SI, R14")
	g.p("\tMOVQ DX, R13")
	g.p("\tMOVQ BX, CX")
	step := func(set int) {
		for i := 0; i < r; i++ {
			g.p("\tVMOVUPS %s, %s", xrow[i], xreg(i))
		}
		if e.panel {
			g.p("\tPREFETCHT0 %d(R13)", prefetch)
		}
		for j := 0; j < 4; j++ {
			e.load(g, wrow[j], wreg)
			for i := 0; i < r; i++ {
				g.p("\tVFMADD231PS %s, %s, %s", wreg, xreg(i), acc(set, i, j))
			}
		}
		g.p("\tADDQ $32, R14")
		g.p("\tADDQ $%d, R13", wstep)
	}
	if sets == 2 {
		// An odd number of steps: one with the first set, then pairs.
		g.p("\tBTQ $0, CX")
		g.p("\tJCC %s_pairs", name)
		step(0)
		g.p("%s_pairs:", name)
		g.p("\tSHRQ $1, CX")
		g.p("\tJZ %s_reduce", name)
		g.p("%s_loop:", name)
		step(0)
		step(1)
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_loop", name)
		g.p("%s_reduce:", name)
		for i := 0; i < r; i++ {
			for j := 0; j < 4; j++ {
				g.p("\tVADDPS %s, %s, %s", acc(1, i, j), acc(0, i, j), acc(0, i, j))
			}
		}
	} else {
		g.p("%s_loop:", name)
		step(0)
		g.p("\tDECQ CX")
		g.p("\tJNZ %s_loop", name)
	}
	// Reduce row i's four accumulators a0..a3 to [Σa0, Σa1, Σa2, Σa3]:
	// two horizontal adds pair them up within each 128-bit lane, a third
	// sums the pairs, and the two lanes are added.
	t0, t1 := xreg(0), wreg
	for i := 0; i < r; i++ {
		g.p("\tVHADDPS %s, %s, %s", acc(0, i, 1), acc(0, i, 0), t0)
		g.p("\tVHADDPS %s, %s, %s", acc(0, i, 3), acc(0, i, 2), t1)
		g.p("\tVHADDPS %s, %s, %s", t1, t0, t0)
		x0, x1 := "X"+t0[1:], "X"+t1[1:]
		g.p("\tVEXTRACTF128 $1, %s, %s", t0, x1)
		g.p("\tVADDPS %s, %s, %s", x0, x1, x1)
		g.p("\tVMOVUPS %s, %s", x1, yrow[i])
	}
	g.p("\tADDQ $16, DI")
	g.p("\tLEAQ (DX)(R11*4), DX")
	g.p("\tDECQ R8")
	g.p("\tJNZ %s_group", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// encode emits encodeF16C: dst[i] = binary16(src[i]) rounded to nearest
// even, for n a positive multiple of 8.
func encode(g *gen) {
	g.p("// func encodeF16C(dst *uint16, src *float32, n int)")
	g.p("TEXT ·encodeF16C(SB), NOSPLIT, $0-24")
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ src+8(FP), SI")
	g.p("\tMOVQ n+16(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("encodeF16C_loop:")
	g.p("\tVMOVUPS (SI), Y0")
	g.p("\tVCVTPS2PH $0, Y0, X1")
	g.p("\tVMOVUPS X1, (DI)")
	g.p("\tADDQ $32, SI")
	g.p("\tADDQ $16, DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ encodeF16C_loop")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// decode emits decodeF16C: dst[i] = float32(src[i]), exactly, for n a
// positive multiple of 8.
func decode(g *gen) {
	g.p("// func decodeF16C(dst *float32, src *uint16, n int)")
	g.p("TEXT ·decodeF16C(SB), NOSPLIT, $0-24")
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ src+8(FP), SI")
	g.p("\tMOVQ n+16(FP), CX")
	g.p("\tSHRQ $3, CX")
	g.p("decodeF16C_loop:")
	g.p("\tVCVTPH2PS (SI), Y0")
	g.p("\tVMOVUPS Y0, (DI)")
	g.p("\tADDQ $16, SI")
	g.p("\tADDQ $32, DI")
	g.p("\tDECQ CX")
	g.p("\tJNZ decodeF16C_loop")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

const maxRows = 3

// decls returns the Go declarations of the assembly.
func decls() []byte {
	g := new(gen)
	g.p("// Code generated by go run ./_gen; DO NOT EDIT.")
	g.p("")
	g.p("//go:build !purego && !noasm && gc")
	g.p("")
	g.p("package half")
	g.p("")
	for _, e := range []elem{f16} {
		for r := 1; r <= maxRows; r++ {
			name := fmt.Sprintf("dot%d%s", r, e.name)
			g.p("// %s computes %d row(s) of y = x·wᵀ over groups of four rows of w; see dotGo.", name, r)
			g.p("//")
			g.p("//go:noescape")
			g.p("func %s(k int, x *float32, ldx int, w *%s, ldw int, n int, y *float32, ldy int)", name, e.gotyp)
			g.p("")
		}
		g.p("// dot%s calls dot{r}%s, 1 ≤ r ≤ %d (a switch, not a table of functions:", e.name, e.name, maxRows)
		g.p("// the pointers passed to a function value escape).")
		g.p("func dot%s(r, k int, x *float32, ldx int, w *%s, ldw int, n int, y *float32, ldy int) {", e.name, e.gotyp)
		g.p("\tswitch r {")
		for r := 1; r <= maxRows; r++ {
			g.p("\tcase %d:", r)
			g.p("\t\tdot%d%s(k, x, ldx, w, ldw, n, y, ldy)", r, e.name)
		}
		g.p("\tdefault:")
		g.p("\t\tpanic(\"half: no kernel for that many rows\")")
		g.p("\t}")
		g.p("}")
		g.p("")
	}
	g.p("// encodeF16C converts n floats (a positive multiple of 8) to binary16, rounding to nearest even.")
	g.p("//")
	g.p("//go:noescape")
	g.p("func encodeF16C(dst *uint16, src *float32, n int)")
	g.p("")
	g.p("// decodeF16C converts n binary16 values (a positive multiple of 8) to float32.")
	g.p("//")
	g.p("//go:noescape")
	g.p("func decodeF16C(dst *float32, src *uint16, n int)")
	src, err := format.Source(g.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	return src
}

func main() {
	out := flag.String("o", "half_amd64.s", "output file")
	goOut := flag.String("go", "half_asm_amd64.go", "output file for the Go declarations")
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
	for _, e := range []elem{f16} {
		for r := 1; r <= maxRows; r++ {
			dot(g, e, r)
		}
	}
	encode(g)
	decode(g)
	if err := os.WriteFile(*out, g.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
