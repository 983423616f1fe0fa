package f32

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGemmPackedAdd requires the product with a residual of its own to
// equal, bit for bit, the residual copied into C and GemmPacked with
// beta = 1, over both modes, deep products (several blocks of k), edge
// strips and both epilogues, on each kernel set and several numbers of
// goroutines; the residual is not written and C outside its window is not
// touched.
func TestGemmPackedAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	shapes := [][3]int{{1, 1, 1}, {7, 17, 5}, {98, 64, 300}, {392, 48, 260}, {31, 300, 700}, {1200, 20, 50}, {5, 9, 0}}
	for _, ks := range kernelSets() {
		for si, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			g := newCase(rng, false, si%2 == 1, m, n, k, 1, 1, 1+si%2)
			pb := packBWith(ks, g.transB, k, n, g.b, g.ldb)
			ldr := n + si%3
			r := make([]float32, max(0, (m-1)*ldr+n))
			for i := range r {
				r[i] = entry(rng) - 1
			}
			r0 := slices.Clone(r)
			bias := make([]float32, n)
			for j := range bias {
				bias[j] = entry(rng) - 1
			}
			for _, relu := range []bool{false, true} {
				for _, procs := range []int{1, 2, 3} {
					want := slices.Clone(g.c)
					copyTile(want, g.ldc, r, ldr, m, n)
					gemmPacked(procs, m, g.a, g.lda, pb, 1, want, g.ldc, bias, relu)
					got := slices.Clone(g.c)
					for i := range got { // C's old values are never read
						if i/g.ldc < m && i%g.ldc < n {
							got[i] = float32(math.NaN())
						}
					}
					gemmPackedRes(procs, m, g.a, g.lda, pb, 0, r, ldr, got, g.ldc, bias, relu)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %v relu=%v procs=%d: C[%d] = %g, want %g", ks.name, s, relu, procs, i, got[i], want[i])
						}
					}
					checkGuards(t, got, m, n, g.ldc)
					if !slices.Equal(r, r0) {
						t.Fatalf("%s %v: the residual was written", ks.name, s)
					}
				}
			}
		}
	}
	// The public entry point, and its panics.
	c := make([]float32, 4)
	GemmPackedAdd(2, []float32{1, 2}, 1, PackB(false, 1, 2, []float32{1, 1}, 2), []float32{1, 2, 3, 4}, 2, c, 2, nil, false)
	if want := []float32{2, 3, 5, 6}; !slices.Equal(c, want) {
		t.Errorf("GemmPackedAdd = %v, want %v", c, want)
	}
	for name, f := range map[string]func(){
		"nil residual": func() {
			GemmPackedAdd(1, []float32{1}, 1, PackB(false, 1, 1, []float32{1}, 1), nil, 1, c, 1, nil, false)
		},
		"short residual": func() {
			GemmPackedAdd(2, []float32{1, 1}, 1, PackB(false, 1, 2, []float32{1, 1}, 2), c[:3], 2, c, 2, nil, false)
		},
	} {
		func() {
			defer func() {
				if e := recover(); e == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestWinogradOutputAdd requires the output transform with a residual of
// its own to equal, bit for bit, the residual copied into y and
// WinogradOutput with beta = 1, with border tiles (odd planes).
func TestWinogradOutputAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 32))
	for _, s := range [][4]int{{1, 1, 1, 3}, {2, 4, 4, 16}, {1, 5, 7, 9}, {2, 7, 7, 40}} {
		b, h, w, c := s[0], s[1], s[2], s[3]
		nt := WinogradTiles(b, h, w)
		m := make([]float32, 16*nt*c)
		for i := range m {
			m[i] = float32(rng.NormFloat64())
		}
		res, bias := make([]float32, b*h*w*c), make([]float32, c)
		for i := range res {
			res[i] = float32(rng.NormFloat64())
		}
		for i := range bias {
			bias[i] = float32(rng.NormFloat64())
		}
		for _, relu := range []bool{false, true} {
			want := slices.Clone(res)
			WinogradOutput(want, m, b, h, w, c, bias, 1, relu, 0, nt)
			got := make([]float32, len(res))
			for i := range got {
				got[i] = float32(math.NaN()) // never read
			}
			WinogradOutputAdd(got, res, m, b, h, w, c, bias, relu, 0, nt/2)
			WinogradOutputAdd(got, res, m, b, h, w, c, bias, relu, nt/2, nt)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v relu=%v: y[%d] = %g, want %g", s, relu, i, got[i], want[i])
				}
			}
		}
	}
}
