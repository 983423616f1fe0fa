package f32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzGemm requires the kernels this build picks (assembly where the CPU has
// it) and the portable Go kernels to agree on fuzzed shapes, transposes,
// scalars, strides and goroutine counts, both to stay within tol of the
// float64 reference, and the picked kernels to stay inside C's window.
//
// Fuzzed shapes include tiny products whose one entry is a sum that cancels
// to near zero, whose relative error no float32 summation can bound; so the
// errors here are measured against the size of the terms, ‖|alpha|·|op(A)|·
// |op(B)| + |beta|·|C|‖, the bound that GEMM's rounding obeys (TestGemm*
// check ‖Δ‖/‖ref‖ itself, on well-conditioned data).
func FuzzGemm(f *testing.F) {
	f.Add(uint16(7), uint16(9), uint16(5), uint8(0), uint8(0), int8(2), int8(0), uint8(1), uint64(1))
	f.Add(uint16(1), uint16(513), uint16(65), uint8(1), uint8(3), int8(-1), int8(1), uint8(2), uint64(2))
	f.Add(uint16(65), uint16(63), uint16(511), uint8(2), uint8(1), int8(4), int8(-3), uint8(3), uint64(3))
	f.Add(uint16(16), uint16(100), uint16(300), uint8(3), uint8(2), int8(1), int8(2), uint8(4), uint64(4))
	f.Add(uint16(150), uint16(17), uint16(8), uint8(1), uint8(0), int8(3), int8(0), uint8(2), uint64(5))
	f.Fuzz(func(t *testing.T, m, n, k uint16, trans, pad uint8, alpha, beta int8, procs uint8, seed uint64) {
		// Keep each case small enough for the float64 reference.
		m, n, k = m%300, n%300, k%600
		if int(m)*int(n)*int(k) > 4<<20 {
			t.Skip()
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		g := newCase(rng, trans&1 != 0, trans&2 != 0, int(m), int(n), int(k), float32(alpha)/2, float32(beta)/2, int(pad%5))
		p := 1 + int(procs%8)
		ks := pickKernels()
		got := g.run(ks, p)
		want := g.run(&goKernels, 1)
		checkGuards(t, got, g.m, g.n, g.ldc)
		scale := g.termNorm()
		for _, x := range []struct {
			name string
			c    []float32
			ref  []float64
		}{
			{ks.name + " vs float64", got, g.ref()},
			{"go vs float64", want, g.ref()},
			{ks.name + " vs go", got, widen(want, g.m, g.n, g.ldc)},
		} {
			if e := absErr(x.c, g.ldc, x.ref, g.m, g.n) / scale; !(e <= tol) {
				t.Fatalf("%s, %v procs=%d: ‖Δ‖/‖|terms|‖ = %.3g", x.name, g, p, e)
			}
		}
	})
}

// termNorm returns ‖|alpha|·|op(A)|·|op(B)| + |beta|·|C|‖ (1 if that is 0).
func (g *gemmCase) termNorm() float64 {
	var s float64
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			var t float64
			for p := 0; p < g.k; p++ {
				t += math.Abs(g.opA(i, p) * g.opB(p, j))
			}
			t = math.Abs(float64(g.alpha))*t + math.Abs(float64(g.beta)*float64(g.c[i*g.ldc+j]))
			s += t * t
		}
	}
	if s == 0 {
		return 1
	}
	return math.Sqrt(s)
}

// widen copies C's window into a dense float64 matrix.
func widen(c []float32, m, n, ldc int) []float64 {
	r := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			r[i*n+j] = float64(c[i*ldc+j])
		}
	}
	return r
}

// absErr returns ‖c − ref‖ over C's window.
func absErr(c []float32, ldc int, ref []float64, m, n int) float64 {
	var d float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			e := float64(c[i*ldc+j]) - ref[i*n+j]
			d += e * e
		}
	}
	return math.Sqrt(d)
}
