package f32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// packedRef returns f(A·op(B) + beta·C0 + bias) in float64 for the case g
// (alpha 1, A not transposed).
func packedRef(g *gemmCase, bias []float32, relu bool) []float64 {
	r := append([]float64(nil), g.ref()...)
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			v := r[i*g.n+j]
			if bias != nil {
				v += float64(bias[j])
			}
			if relu {
				v = math.Max(v, 0)
			}
			r[i*g.n+j] = v
		}
	}
	return r
}

// TestGemmPacked checks the fused product against float64 over the shapes
// of both modes (many rows; few rows with the columns shared out), edge
// strips, every epilogue and beta, on each kernel set and several numbers
// of goroutines.
func TestGemmPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	shapes := [][3]int{
		{1, 1, 1}, {7, 17, 5}, {13, 40, 70}, {98, 64, 300}, {98, 200, 33},
		{150, 33, 9}, {392, 48, 260}, {700, 35, 129}, {31, 300, 200}, {6, 16, 8},
		{1200, 20, 50}, {2000, 24, 40},
	}
	for _, ks := range kernelSets() {
		for si, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for ei, ep := range []struct {
				bias, relu bool
				beta       float32
			}{{false, false, 0}, {true, false, 0}, {true, true, 0}, {false, true, 1}, {true, true, 1}, {true, false, -0.5}} {
				transB := (si+ei)%2 == 1
				g := newCase(rng, false, transB, m, n, k, 1, ep.beta, 1+ei%2)
				var bias []float32
				if ep.bias {
					bias = make([]float32, n)
					for j := range bias {
						bias[j] = entry(rng) - 1
					}
				}
				pb := packBWith(ks, transB, k, n, g.b, g.ldb)
				for _, procs := range []int{1, 2, 3} {
					c := append([]float32(nil), g.c...)
					gemmPacked(procs, m, g.a, g.lda, pb, g.beta, c, g.ldc, bias, ep.relu)
					want := packedRef(g, bias, ep.relu)
					if e := relErr(c, g.ldc, want, m, n); !(e <= tol) {
						t.Errorf("%s %v bias=%v relu=%v procs=%d: ‖Δ‖/‖ref‖ = %.3g", ks.name, g, ep.bias, ep.relu, procs, e)
					}
					checkGuards(t, c, m, n, g.ldc)
				}
			}
		}
	}
}

// TestGemmPackedEdges covers k = 0, the ReLU of a NaN, beta = 0 over NaN,
// the public entry point and its panics.
func TestGemmPackedEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	// k = 0: C = f(beta·C + bias).
	c := []float32{1, -2, 3, -4}
	GemmPacked(2, nil, 1, PackB(false, 0, 2, nil, 2), 2, c, 2, []float32{0.5, 0.5}, true)
	if want := []float32{2.5, 0, 6.5, 0}; fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("k = 0: %v, want %v", c, want)
	}
	// A NaN stays NaN through the ReLU, and beta = 0 ignores NaN in C.
	for _, ks := range kernelSets() {
		g := newCase(rng, false, false, 20, 37, 30, 1, 0, 1)
		g.a[3*g.lda+2] = float32(math.NaN())
		for i := range g.c {
			g.c[i] = float32(math.NaN())
		}
		pb := packBWith(ks, false, g.k, g.n, g.b, g.ldb)
		gemmPacked(2, g.m, g.a, g.lda, pb, 0, g.c, g.ldc, nil, true)
		for i := 0; i < g.m; i++ {
			for j := 0; j < g.n; j++ {
				if v := g.c[i*g.ldc+j]; (i == 3) != math.IsNaN(float64(v)) || v < 0 {
					t.Fatalf("%s: C[%d][%d] = %v", ks.name, i, j, v)
				}
			}
		}
	}
	pb := PackB(true, 4, 3, make([]float32, 12), 4)
	if pb.K() != 4 || pb.N() != 3 {
		t.Errorf("PackB: %d×%d", pb.K(), pb.N())
	}
	for name, f := range map[string]func(){
		"short A":    func() { GemmPacked(2, make([]float32, 7), 4, pb, 0, make([]float32, 6), 3, nil, false) },
		"short C":    func() { GemmPacked(2, make([]float32, 8), 4, pb, 0, make([]float32, 5), 3, nil, false) },
		"short bias": func() { GemmPacked(2, make([]float32, 8), 4, pb, 0, make([]float32, 6), 3, []float32{1}, false) },
		"bad lda":    func() { GemmPacked(2, make([]float32, 8), 3, pb, 0, make([]float32, 6), 3, nil, false) },
		"short B":    func() { PackB(false, 4, 3, make([]float32, 11), 3) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestGemmPackedRowsIndependent requires each row of C to come out the same,
// bit for bit, whatever its place among the rows and however many rows
// there are: the features of an image must not depend on the other images
// of its batch.
func TestGemmPackedRowsIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	const n, k = 40, 300
	for _, ks := range kernelSets() {
		g := newCase(rng, false, false, 50, n, k, 1, 0, 0)
		pb := packBWith(ks, false, k, n, g.b, g.ldb)
		bias := make([]float32, n)
		for j := range bias {
			bias[j] = entry(rng)
		}
		for _, beta := range []float32{0, 1} {
			want := append([]float32(nil), g.c...)
			gemmPacked(1, g.m, g.a, g.lda, pb, beta, want, g.ldc, bias, true)
			for _, s := range [][2]int{{49, 50}, {47, 50}, {1, 3}, {5, 9}, {10, 12}, {0, 1}, {0, 2}, {0, 17}, {3, 50}} {
				lo, hi := s[0], s[1]
				c := append([]float32(nil), g.c...)
				gemmPacked(2, hi-lo, g.a[lo*g.lda:], g.lda, pb, beta, c[lo*g.ldc:], g.ldc, bias, true)
				for i := lo; i < hi; i++ {
					for j := 0; j < n; j++ {
						if got, w := c[i*g.ldc+j], want[i*g.ldc+j]; math.Float32bits(got) != math.Float32bits(w) {
							t.Fatalf("%s beta=%g rows [%d, %d): C[%d][%d] = %v, all rows give %v", ks.name, beta, lo, hi, i, j, got, w)
						}
					}
				}
			}
		}
	}
}
