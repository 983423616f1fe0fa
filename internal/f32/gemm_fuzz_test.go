package f32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzGemm requires the kernels this build picks (assembly where the CPU has
// it) and the portable Go kernels to agree on fuzzed shapes, transposes,
// scalars, strides and goroutine counts, and the picked kernels to stay
// inside C's window and within tol of the float64 reference.
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
		if e := relErr(got, g.ldc, g.ref(), g.m, g.n); !(e <= tol) {
			t.Fatalf("%s %v procs=%d: ‖Δ‖/‖ref‖ = %.3g", ks.name, g, p, e)
		}
		ref := make([]float64, g.m*g.n)
		for i := 0; i < g.m; i++ {
			for j := 0; j < g.n; j++ {
				ref[i*g.n+j] = float64(want[i*g.ldc+j])
			}
		}
		if e := relErr(got, g.ldc, ref, g.m, g.n); !(e <= tol) || math.IsNaN(e) {
			t.Fatalf("%s vs go %v procs=%d: ‖Δ‖/‖go‖ = %.3g", ks.name, g, p, e)
		}
	})
}
