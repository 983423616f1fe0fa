package f32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/cpu"
)

// tol is the acceptance bound on ‖C − ref‖/‖ref‖ against float64.
const tol = 1e-5

// guard fills the space around C's window and is checked afterwards.
const guard = float32(-7.25e7)

// kernelSets returns the kernel sets this machine can run, the portable one
// first.
func kernelSets() []*kernelSet {
	sets := []*kernelSet{&goKernels}
	if ks := pickKernels(); ks != &goKernels {
		// The assembly sets below the best one run too (AVX2 on an AVX-512
		// machine).
		restore := cpu.DisableAVX512()
		if lower := pickKernels(); lower != ks && lower != &goKernels {
			sets = append(sets, lower)
		}
		restore()
		sets = append(sets, ks)
	}
	return sets
}

// gemmCase is one product with its operands laid out with padded strides.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	want           []float64 // the reference, once computed
}

// entry draws a matrix entry uniformly from [-1, 2). The nonzero mean keeps
// the products well conditioned, so that ‖Δ‖/‖ref‖ measures the kernels'
// rounding rather than the cancellation in a dot product that happens to
// be near zero (a 1×1×65 product of zero-mean entries can lose a digit to
// that in any summation order).
func entry(rng *rand.Rand) float32 { return float32(3*rng.Float64() - 1) }

func newCase(rng *rand.Rand, transA, transB bool, m, n, k int, alpha, beta float32, pad int) *gemmCase {
	g := &gemmCase{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	g.lda, g.ldb, g.ldc = ca+pad, cb+2*pad, n+3*pad
	fill := func(rows, ld int) []float32 {
		x := make([]float32, rows*ld)
		for i := range x {
			x[i] = entry(rng)
		}
		return x
	}
	g.a = fill(ra, g.lda)
	g.b = fill(rb, g.ldb)
	// C has a guard row after the window and guard columns in each stride.
	g.c = make([]float32, (m+1)*g.ldc)
	for i := range g.c {
		g.c[i] = guard
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			g.c[i*g.ldc+j] = entry(rng)
		}
	}
	_ = rb
	return g
}

func (g *gemmCase) opA(i, p int) float64 {
	if g.transA {
		return float64(g.a[p*g.lda+i])
	}
	return float64(g.a[i*g.lda+p])
}

func (g *gemmCase) opB(p, j int) float64 {
	if g.transB {
		return float64(g.b[j*g.ldb+p])
	}
	return float64(g.b[p*g.ldb+j])
}

// ref returns the float64 product of the case (from its initial C).
func (g *gemmCase) ref() []float64 {
	if g.want != nil {
		return g.want
	}
	c0 := g.c
	r := make([]float64, g.m*g.n)
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			var s float64
			for p := 0; p < g.k; p++ {
				s += g.opA(i, p) * g.opB(p, j)
			}
			s *= float64(g.alpha)
			if g.beta != 0 {
				s += float64(g.beta) * float64(c0[i*g.ldc+j])
			}
			r[i*g.n+j] = s
		}
	}
	g.want = r
	return r
}

// run computes the case with ks on procs goroutines into a copy of C.
func (g *gemmCase) run(ks *kernelSet, procs int) []float32 {
	c := append([]float32(nil), g.c...)
	gemm(ks, procs, g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	return c
}

func (g *gemmCase) String() string {
	return fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/alpha=%g/beta=%g", g.m, g.n, g.k, g.transA, g.transB, g.alpha, g.beta)
}

// relErr returns ‖c − ref‖/‖ref‖ over C's window (‖·‖ the Frobenius norm; the
// absolute error if ref is 0).
func relErr(c []float32, ldc int, ref []float64, m, n int) float64 {
	var r float64
	for _, x := range ref {
		r += x * x
	}
	if r == 0 {
		return absErr(c, ldc, ref, m, n)
	}
	return absErr(c, ldc, ref, m, n) / math.Sqrt(r)
}

// checkGuards reports writes outside C's m×n window.
func checkGuards(t *testing.T, c []float32, m, n, ldc int) {
	t.Helper()
	for i, v := range c {
		if i/ldc < m && i%ldc < n {
			continue
		}
		if v != guard {
			t.Fatalf("wrote outside C's window at row %d column %d (ldc %d): %g", i/ldc, i%ldc, ldc, v)
		}
	}
}

func (g *gemmCase) check(t *testing.T, ks *kernelSet, procs int) {
	t.Helper()
	a0 := append([]float32(nil), g.a...)
	b0 := append([]float32(nil), g.b...)
	c := g.run(ks, procs)
	if e := relErr(c, g.ldc, g.ref(), g.m, g.n); !(e <= tol) {
		t.Errorf("%s %v procs=%d: ‖Δ‖/‖ref‖ = %.3g > %g", ks.name, g, procs, e, tol)
	}
	checkGuards(t, c, g.m, g.n, g.ldc)
	for i := range a0 {
		if a0[i] != g.a[i] {
			t.Fatalf("%s %v: A modified", ks.name, g)
		}
	}
	for i := range b0 {
		if b0[i] != g.b[i] {
			t.Fatalf("%s %v: B modified", ks.name, g)
		}
	}
}

var oddSizes = []int{1, 7, 63, 65, 511, 513}

// TestGemmShapes covers every combination of the small odd sizes and the
// large ones in each role, all four transpose combinations, and padded
// strides, for each kernel set.
func TestGemmShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var shapes [][3]int
	small := []int{1, 7, 17, 63, 65}
	for _, m := range small {
		for _, n := range small {
			for _, k := range small {
				shapes = append(shapes, [3]int{m, n, k})
			}
		}
	}
	for _, s := range oddSizes[4:] {
		shapes = append(shapes, [3]int{s, 7, 65}, [3]int{7, s, 63}, [3]int{65, 63, s}, [3]int{1, s, s}, [3]int{s, 1, s})
	}
	if !testing.Short() {
		shapes = append(shapes, [3]int{511, 513, 65}, [3]int{513, 65, 511}, [3]int{65, 511, 513}, [3]int{513, 513, 513}, [3]int{16, 513, 511})
	}
	sets := kernelSets()
	for si, s := range shapes {
		for tr := 0; tr < 4; tr++ {
			g := newCase(rng, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], 1, 0, si%3)
			for _, ks := range sets {
				g.check(t, ks, 1+si%2)
			}
		}
	}
}

// TestGemmAlphaBeta covers the scalar cases, including beta = 0 over a C
// full of NaN (which must not propagate), alpha = 0 and k = 0.
func TestGemmAlphaBeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	ab := [][2]float32{{1, 0}, {1, 1}, {-0.5, 0}, {2, -1.5}, {0, 0.5}, {0, 0}, {0.25, float32(math.Copysign(0, -1))}}
	for _, ks := range kernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			for _, s := range [][3]int{{7, 9, 5}, {65, 63, 300}, {13, 40, 0}, {3, 100, 37}, {130, 20, 600}} {
				for tr := 0; tr < 4; tr++ {
					for _, x := range ab {
						g := newCase(rng, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], x[0], x[1], 1)
						g.check(t, ks, 2)
					}
				}
			}
			// beta = 0 must ignore NaN and Inf in C.
			g := newCase(rng, false, true, 33, 35, 70, 1.5, 0, 2)
			for i := 0; i < g.m; i++ {
				for j := 0; j < g.n; j++ {
					g.c[i*g.ldc+j] = float32(math.NaN())
				}
			}
			c := g.run(ks, 2)
			if e := relErr(c, g.ldc, g.ref(), g.m, g.n); !(e <= tol) {
				t.Errorf("beta=0 over NaN: error %g", e)
			}
		})
	}
}

// TestGemmProcs splits products among various numbers of goroutines, which
// the split chooses as grids of tasks.
func TestGemmProcs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, ks := range kernelSets() {
		for _, procs := range []int{1, 2, 3, 4, 6, 7, 16} {
			if testing.Short() && procs%2 == 0 {
				continue
			}
			for _, s := range [][3]int{{200, 190, 150}, {31, 300, 200}, {300, 31, 200}, {17, 1000, 100}, {2000, 20, 60}} {
				g := newCase(rng, procs%2 == 0, procs%3 == 0, s[0], s[1], s[2], 0.5, 1.5, 1)
				g.check(t, ks, procs)
			}
		}
	}
}

// TestGemmSkinny covers the decoding shapes (m ≤ skinnyRows, and around
// skinnyDotRows) with wide B,
// both layouts of B and both ways of running (one goroutine or several).
func TestGemmSkinny(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	sets := kernelSets()
	rows := []int{skinnyDotRows - 1, skinnyDotRows, skinnyDotRows + 1}
	for m := 1; m <= skinnyRows+1; m++ {
		rows = append(rows, m)
	}
	for _, m := range rows {
		for _, nk := range [][2]int{{1000, 700}, {33, 9}, {64, 256}, {1023, 1025}, {3, 2}} {
			big := nk[0]*nk[1] > 1<<19
			if testing.Short() && (big || m%4 == 3) || big && m%5 != 1 && m%3 != 0 {
				continue
			}
			for tr := 0; tr < 4; tr++ {
				g := newCase(rng, tr&1 != 0, tr&2 != 0, m, nk[0], nk[1], 1.25, float32(tr%2), m%3)
				for _, ks := range sets {
					g.check(t, ks, 1+m%2)
				}
			}
		}
	}
}

func TestGemmPublic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	g := newCase(rng, true, false, 70, 90, 110, 1, 0.5, 1)
	c := append([]float32(nil), g.c...)
	Gemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	if e := relErr(c, g.ldc, g.ref(), g.m, g.n); !(e <= tol) {
		t.Errorf("error %g", e)
	}
	checkGuards(t, c, g.m, g.n, g.ldc)
}

// TestGemmCPUPaths checks that the cpu hooks steer the kernel choice.
func TestGemmCPUPaths(t *testing.T) {
	best := pickKernels()
	restore := cpu.DisableAVX2FMA()
	if pickKernels() != &goKernels {
		t.Errorf("with AVX2 disabled, got %s kernels", pickKernels().name)
	}
	restore()
	if pickKernels() != best {
		t.Errorf("restore: got %s kernels, want %s", pickKernels().name, best.name)
	}
	t.Logf("kernels here: %s", best.name)
}

func TestGemmPanics(t *testing.T) {
	x := make([]float32, 100)
	for name, f := range map[string]func(){
		"negative": func() { Gemm(false, false, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2) },
		"lda":      func() { Gemm(false, false, 2, 2, 3, 1, x, 2, x, 2, 0, x, 2) },
		"ldc":      func() { Gemm(false, false, 2, 3, 2, 1, x, 2, x, 3, 0, x, 2) },
		"shortA":   func() { Gemm(true, false, 2, 2, 60, 1, x, 2, x, 2, 0, x, 2) },
		"shortC":   func() { Gemm(false, false, 60, 2, 1, 1, x, 1, x, 2, 0, x, 2) },
		"stride":   func() { GemmStrided(false, false, 2, 2, 2, 2, 1, x, 2, -1, x, 2, 0, 0, x, 2, 4) },
		"batch":    func() { GemmStrided(false, false, 30, 2, 2, 2, 1, x, 2, 4, x, 2, 0, 0, x, 2, 4) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				} else if s, ok := r.(string); !ok || s[:5] != "f32: " {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			f()
		}()
	}
}

// TestGemmStrided checks batches against a loop of single products: attention
// shapes run in parallel over the batch, a shared (stride 0) A or B, and a
// shared C accumulated in order.
func TestGemmStrided(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	type shape struct {
		batch, m, n, k int
		transB         bool
		sA, sB, sC     int // 0: shared; else the gap added after each matrix
	}
	for _, s := range []shape{
		{12, 49, 49, 64, true, 3, 5, 7},    // attention scores Q·Kᵀ per head
		{12, 49, 64, 49, false, 1, 1, 1},   // attention output P·V
		{5, 60, 70, 80, false, 0, 2, 2},    // shared A
		{4, 33, 65, 17, true, 2, 0, 1},     // shared B
		{3, 7, 9, 11, false, 1, 1, 0},      // shared C, accumulated
		{2, 300, 260, 200, false, 1, 1, 1}, // large: parallel inside
		{1, 5, 6, 7, false, 1, 1, 1},
		{3, 4, 5, 0, false, 1, 1, 1}, // k = 0: C = beta·C
	} {
		rows, cols := s.k, s.n
		if s.transB {
			rows, cols = s.n, s.k
		}
		lda, ldb, ldc := s.k+1, cols+2, s.n+1
		stride := func(size, gap int) int {
			if gap == 0 {
				return 0
			}
			return size + gap
		}
		strideA, strideB, strideC := stride(s.m*lda, s.sA), stride(rows*ldb, s.sB), stride(s.m*ldc, s.sC)
		alloc := func(stride, size int) []float32 {
			x := make([]float32, (s.batch-1)*stride+size)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			return x
		}
		a, b, c := alloc(strideA, s.m*lda), alloc(strideB, rows*ldb), alloc(strideC, s.m*ldc)
		for _, ks := range kernelSets() {
			want := append([]float32(nil), c...)
			for i := 0; i < s.batch; i++ {
				gemm(ks, 1, false, s.transB, s.m, s.n, s.k, 0.5, a[i*strideA:], lda, b[i*strideB:], ldb, 0.75, want[i*strideC:], ldc)
			}
			got := append([]float32(nil), c...)
			restore := forceKernels(ks)
			GemmStrided(false, s.transB, s.batch, s.m, s.n, s.k, 0.5, a, lda, strideA, b, ldb, strideB, 0.75, got, ldc, strideC)
			restore()
			var d, r float64
			for i := range want {
				e := float64(got[i] - want[i])
				d += e * e
				r += float64(want[i]) * float64(want[i])
			}
			if e := math.Sqrt(d / r); !(e <= tol) {
				t.Errorf("%s %+v: ‖Δ‖/‖ref‖ = %g", ks.name, s, e)
			}
		}
	}
}

// TestGemmEmpty checks that empty operands are accepted where they are not
// read: k = 0 with nil A and B scales C by beta.
func TestGemmEmpty(t *testing.T) {
	c := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	GemmStrided(false, true, 3, 2, 2, 0, 1, nil, 1, 5, nil, 1, 5, 2, c, 2, 4)
	for i, v := range c {
		if v != 2*float32(i+1) {
			t.Fatalf("c[%d] = %g, want %g", i, v, 2*float32(i+1))
		}
	}
	Gemm(false, false, 0, 5, 5, 1, nil, 5, make([]float32, 25), 5, 0, nil, 5)
	Gemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2)
	if c[0] != 0 || c[3] != 0 || c[4] != 10 {
		t.Fatalf("k = 0, beta = 0: C = %v", c[:5])
	}
}

// forceKernels makes pickKernels return ks (one of the sets this machine
// runs) by switching CPU features off.
func forceKernels(ks *kernelSet) (restore func()) {
	switch {
	case ks == &goKernels:
		return cpu.DisableAVX2FMA()
	case pickKernels() != ks:
		return cpu.DisableAVX512()
	}
	return func() {}
}

// TestAxpyKernels checks the few-row kernels against goAxpy, including a
// stride of 0 (one row of B for all four coefficients).
func TestAxpyKernels(t *testing.T) {
	ks := pickKernels()
	if ks.axpy == nil {
		t.Skip("no axpy kernels in this build")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for r := 1; r <= len(ks.axpy); r++ {
		for _, n := range []int{8, 16, 24, 808} {
			for _, ldb := range []int{0, n + 5} {
				ldc := n + 3
				a := make([]float32, 4*r)
				b := make([]float32, 3*ldb+n)
				c := make([]float32, (r-1)*ldc+n)
				for _, x := range [][]float32{a, b, c} {
					for i := range x {
						x[i] = entry(rng)
					}
				}
				want := append([]float32(nil), c...)
				ks.axpy[r-1](n, a, b, ldb, c, ldc)
				goAxpy(r)(n, a, b, ldb, want, ldc)
				for i := range c {
					if d := math.Abs(float64(c[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("r=%d n=%d ldb=%d: c[%d] = %g, want %g", r, n, ldb, i, c[i], want[i])
					}
				}
			}
		}
	}
}

// TestDotKernels checks the skinny path's dot kernels of every set here
// against goDot, over column counts that end in whole groups and in a group
// of four (the AVX-512 kernels take eight columns at a time), and requires
// each row of an r-row kernel to equal, bit for bit, what the one-row
// kernel returns for it: a row's results must not depend on its batch.
func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tested := false
	for _, ks := range kernelSets() {
		if ks.dot == nil {
			continue
		}
		tested = true
		for r := 1; r <= len(ks.dot); r++ {
			for _, k := range []int{ks.dotK, 2 * ks.dotK, 3 * ks.dotK, 800} {
				for _, n := range []int{4, 8, 12, 20, 36} {
					lda, ldb, ldd := k+3, k+5, n+1
					a := make([]float32, r*lda)
					b := make([]float32, n*ldb)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					for i := range b {
						b[i] = float32(rng.NormFloat64())
					}
					got, want, one := make([]float32, r*ldd), make([]float32, r*ldd), make([]float32, ldd)
					ks.dot[r-1](k, a, lda, b, ldb, n, got, ldd, nil, 0)
					goDot(r)(k, a, lda, b, ldb, n, want, ldd, nil, 0)
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Sqrt(float64(k)) {
							t.Fatalf("%s r=%d k=%d n=%d: dst[%d] = %g, want %g", ks.name, r, k, n, i, got[i], want[i])
						}
					}
					for i := 0; i < r; i++ {
						ks.dot[0](k, a[i*lda:], lda, b, ldb, n, one, ldd, nil, 0)
						for j := 0; j < n; j++ {
							if got[i*ldd+j] != one[j] {
								t.Fatalf("%s r=%d k=%d n=%d: row %d column %d = %g, but %g computed alone", ks.name, r, k, n, i, j, got[i*ldd+j], one[j])
							}
						}
					}
					checkDotEpilogues(t, ks, r, k, n, a, lda, b, ldb, got, ldd, rng)
				}
			}
		}
	}
	if !tested {
		t.Skip("no dot kernels in this build")
	}
}

// checkDotEpilogues requires ks's r-row dot kernel to store its sums
// (sums, computed without an epilogue) through every epilogue exactly as
// Epilogue.apply does: bias or not, ReLU or not, added to dst or not.
func checkDotEpilogues(t *testing.T, ks *kernelSet, r, k, n int, a []float32, lda int, b []float32, ldb int, sums []float32, ldd int, rng *rand.Rand) {
	t.Helper()
	bias, old := make([]float32, n), make([]float32, r*ldd)
	for j := range bias {
		bias[j] = float32(rng.NormFloat64())
	}
	for i := range old {
		old[i] = float32(rng.NormFloat64())
	}
	got := make([]float32, r*ldd)
	for flags := 0; flags < 4; flags++ {
		for _, bs := range [][]float32{nil, bias} {
			ep := Epilogue{Bias: bs, ReLU: flags&dotReLU != 0, Add: flags&dotAdd != 0}
			copy(got, old)
			ks.dot[r-1](k, a, lda, b, ldb, n, got, ldd, bs, ep.flags())
			for i := 0; i < r; i++ {
				for j := 0; j < n; j++ {
					at := i*ldd + j
					want := ep.apply(sums[at], j, old[at])
					if math.Float32bits(got[at]) != math.Float32bits(want) {
						t.Fatalf("%s r=%d k=%d n=%d %+v: dst[%d][%d] = %g, want %g", ks.name, r, k, n, ep, i, j, got[at], want)
					}
				}
			}
		}
	}
}

// TestDotKernelNaN requires the dot kernels' ReLU to keep a NaN, as Go's
// max does, and to store +0 for negative sums.
func TestDotKernelNaN(t *testing.T) {
	for _, ks := range kernelSets() {
		if ks.dot == nil {
			continue
		}
		k, n := ks.dotK, 8
		a, b := make([]float32, 3*k), make([]float32, n*k)
		for i := range b {
			b[i] = -1
		}
		for i := range a {
			a[i] = 1
		}
		a[k] = float32(math.NaN()) // row 1 sums to NaN, rows 0 and 2 to −k
		for r := 1; r <= len(ks.dot); r++ {
			dst := make([]float32, r*n)
			ks.dot[r-1](k, a, k, b, k, n, dst, n, nil, dotReLU)
			for i, v := range dst {
				if i/n == 1 {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("%s r=%d: ReLU(NaN) = %g, want NaN", ks.name, r, v)
					}
				} else if math.Float32bits(v) != 0 {
					t.Fatalf("%s r=%d: ReLU(%d) = %g (bits %#x), want +0", ks.name, r, -k, v, math.Float32bits(v))
				}
			}
		}
	}
}

// TestSelfCheck runs the start-up check of every kernel set here, and makes
// sure that it rejects a kernel that is slightly wrong.
func TestSelfCheck(t *testing.T) {
	for _, ks := range kernelSets() {
		if !selfCheck(ks) {
			t.Errorf("%s: self-check failed", ks.name)
		}
	}
	bad := goKernels
	bad.name = "bad"
	bad.kern = append([]microKernel(nil), goKernels.kern...)
	good := bad.kern[2]
	bad.kern[2] = func(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, pf int, bias []float32, relu bool) {
		good(k, a, b, bs, c, ldc, beta, pf, bias, relu)
		c[ldc+1]++
	}
	if selfCheck(&bad) {
		t.Error("self-check accepted a wrong 3-row kernel")
	}
	// A dot kernel wrong in the sixth column only (the second half of the
	// AVX-512 kernels' group of eight).
	for _, ks := range kernelSets() {
		if ks.dot == nil {
			continue
		}
		badDot := *ks
		badDot.dot = append([]dotKernel(nil), ks.dot...)
		goodDot := badDot.dot[len(badDot.dot)-1]
		badDot.dot[len(badDot.dot)-1] = func(k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int) {
			goodDot(k, a, lda, b, ldb, n, dst, ldd, bias, flags)
			if n > 5 {
				dst[ldd+5]++
			}
		}
		if selfCheck(&badDot) {
			t.Errorf("%s: self-check accepted a wrong dot kernel", ks.name)
		}
		// One that forgets the ReLU.
		badDot.dot[len(badDot.dot)-1] = func(k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int) {
			goodDot(k, a, lda, b, ldb, n, dst, ldd, bias, flags&^dotReLU)
		}
		if selfCheck(&badDot) {
			t.Errorf("%s: self-check accepted a dot kernel without its ReLU", ks.name)
		}
	}
}

// genericKernel is microKernel's reference loop for any tile size.
func genericKernel(r, nr int) microKernel {
	return func(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, _ int, bias []float32, relu bool) {
		acc := make([]float32, r*nr)
		for p := 0; p < k; p++ {
			for i := 0; i < r; i++ {
				for j := 0; j < nr; j++ {
					acc[i*nr+j] += a[p*r+i] * b[p*bs+j]
				}
			}
		}
		for i := 0; i < r; i++ {
			for j := 0; j < nr; j++ {
				v := acc[i*nr+j]
				if beta != 0 {
					v += beta * c[i*ldc+j]
				}
				c[i*ldc+j] = epilogue(v, bias, j, relu)
			}
		}
	}
}

// TestGemmGeometry runs the driver with the AVX-512 set's tile (12×32) and
// block sizes, and with the packing kernels of this build, on loop kernels:
// it covers the driver's side of a kernel set that this CPU may not run.
func TestGemmGeometry(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, tile := range [][2]int{{12, 32}, {6, 16}, {1, 8}} {
		mr, nr := tile[0], tile[1]
		ks := &kernelSet{name: fmt.Sprintf("loop%dx%d", mr, nr), mr: mr, nr: nr, mc: 144, kc: 192, nc: 4064}
		for r := 1; r <= mr; r++ {
			ks.kern = append(ks.kern, genericKernel(r, nr))
		}
		if mr%6 == 0 {
			ks.packRows6 = pickKernels().packRows6
		}
		for _, s := range [][3]int{{150, 70, 200}, {13, 33, 9}, {300, 97, 40}, {12, 32, 8}} {
			for tr := 0; tr < 4; tr++ {
				g := newCase(rng, tr&1 != 0, tr&2 != 0, s[0], s[1], s[2], 1.5, 0.5, 1)
				g.check(t, ks, 1+tr%3)
			}
		}
	}
}

// TestGemmAllocs checks that products small enough for one goroutine
// allocate nothing once the packing buffers are pooled: decoding calls Gemm
// on every step.
func TestGemmAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(10, 10))
	for _, s := range []struct {
		transA, transB bool
		m, n, k        int
	}{
		{false, true, 4, 512, 256},  // dot products with a weight stored n×k
		{false, false, 1, 512, 255}, // axpy
		{true, false, 3, 100, 30},   // axpy, A transposed
		{false, false, 8, 64, 64},   // B in place
		{false, true, 200, 40, 30},  // packed
		{true, false, 3, 5, 7},
	} {
		g := newCase(rng, s.transA, s.transB, s.m, s.n, s.k, 1.5, 0.5, 1)
		c := append([]float32(nil), g.c...)
		allocs := testing.AllocsPerRun(50, func() {
			Gemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per call", g, allocs)
		}
	}
	a, b, c := make([]float32, 4*6*5), make([]float32, 4*5*7), make([]float32, 4*6*7)
	allocs := testing.AllocsPerRun(50, func() {
		GemmStrided(false, false, 4, 6, 7, 5, 1, a, 5, 30, b, 7, 35, 0, c, 7, 0)
	})
	if allocs != 0 {
		t.Errorf("GemmStrided with a shared C: %v allocations per call", allocs)
	}
}

// TestHelpersLate checks the back-off of the skinny pool: products run on
// the caller alone for helperBackoff after the caller blocked for a
// helper, and are shared again after that.
func TestHelpersLate(t *testing.T) {
	saved := lastBlock.Load()
	defer lastBlock.Store(saved)
	lastBlock.Store(0)
	if helpersLate() {
		t.Error("late with no block")
	}
	lastBlock.Store(int64(max(time.Since(clock0), 1)))
	if !helpersLate() {
		t.Error("not late right after a block")
	}
	const block = time.Second
	for _, c := range []struct {
		after time.Duration
		late  bool
	}{{0, true}, {helperBackoff / 2, true}, {helperBackoff, false}, {time.Minute, false}} {
		if got := lateAt(block, block+c.after); got != c.late {
			t.Errorf("%v after a block: late = %v, want %v", c.after, got, c.late)
		}
	}
}

// Dots computes what Gemm computes for C = A·Bᵀ, on every kernel path.
func TestDots(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, sz := range [][3]int{{1, 4, 8}, {3, 37, 19}, {2, 64, 512}, {3, 5, 0}, {5, 13, 33}} {
		m, n, k := sz[0], sz[1], sz[2]
		a, b := make([]float32, m*k+1), make([]float32, n*k+1)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		got, want := make([]float32, m*n), make([]float32, m*n)
		for i := range got {
			got[i] = float32(math.NaN()) // Dots writes every value
		}
		ld := max(k, 1)
		Dots(m, n, k, a, ld, b, ld, got, n, Epilogue{})
		Gemm(false, true, m, n, k, 1, a, ld, b, ld, 0, want, n)
		for i, v := range want {
			if math.Abs(float64(got[i]-v)) > 1e-4*(1+math.Abs(float64(v))) {
				t.Fatalf("%v: c[%d] = %v, want %v", sz, i, got[i], v)
			}
		}
		// Through every epilogue, on the kernels' path and Go's (k below
		// or not a multiple of the kernels' step, columns past the groups
		// of four), each value is the plain product's through Epilogue.apply.
		sums := append([]float32(nil), got...)
		bias, old := make([]float32, n), make([]float32, m*n)
		for j := range bias {
			bias[j] = float32(r.NormFloat64())
		}
		for i := range old {
			old[i] = float32(r.NormFloat64())
		}
		for flags := 0; flags < 4; flags++ {
			for _, bs := range [][]float32{nil, bias} {
				ep := Epilogue{Bias: bs, ReLU: flags&dotReLU != 0, Add: flags&dotAdd != 0}
				copy(got, old)
				Dots(m, n, k, a, ld, b, ld, got, n, ep)
				for i, v := range got {
					if w := ep.apply(sums[i], i%n, old[i]); math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("%v %+v: c[%d] = %v, want %v", sz, ep, i, v, w)
					}
				}
			}
		}
	}
}
