package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The weight's gradient by the transposed F(2×2, 3×3) is the correlation
// of the input with the output's gradient exactly: on small integers every
// transformed value, product and sum is exact in float32 (the halvings of
// Gᵀ give quarters), so any slip in the transforms, the edges of odd
// planes or the layouts shows as a difference, whatever its size.
func TestWinogradWeightGradExact(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	for _, c := range []struct{ b, h, w, cin, cout int }{
		{1, 2, 2, 1, 1}, {1, 1, 1, 2, 3}, {2, 3, 5, 3, 2}, {3, 6, 4, 9, 10}, {2, 7, 7, 17, 5},
	} {
		name := fmt.Sprintf("%+v", c)
		small := func(n int) []float32 {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(r.IntN(9) - 4)
			}
			return s
		}
		// Channels last, as the transforms read them.
		x, dy := small(c.b*c.h*c.w*c.cin), small(c.b*c.h*c.w*c.cout)
		nt := WinogradTiles(c.b, c.h, c.w)
		vx, vy := make([]float32, 16*nt*c.cin), make([]float32, 16*nt*c.cout)
		WinogradInput(vx, x, c.b, c.h, c.w, c.cin, 0, nt)
		WinogradGradTiles(vy, dy, c.b, c.h, c.w, c.cout, 0, nt/2) // in two ranges
		WinogradGradTiles(vy, dy, c.b, c.h, c.w, c.cout, nt/2, nt)
		m := make([]float32, 16*WinogradFilterStride(c.cin, c.cout))
		WinogradGradProducts(m, vy, vx, nt, c.cin, c.cout, false)
		got := make([]float32, c.cout*c.cin*9)
		for i := range got { // added to
			got[i] = 1
		}
		WinogradWeightGrad(got, m, c.cout, c.cin, 0, c.cout)
		for o := range c.cout {
			for ci := range c.cin {
				for k := range 9 {
					ky, kx := k/3-1, k%3-1
					want := float32(1)
					for b := range c.b {
						for i := range c.h {
							for j := range c.w {
								if i+ky < 0 || i+ky >= c.h || j+kx < 0 || j+kx >= c.w {
									continue
								}
								want += dy[((b*c.h+i)*c.w+j)*c.cout+o] * x[((b*c.h+i+ky)*c.w+j+kx)*c.cin+ci]
							}
						}
					}
					if g := got[(o*c.cin+ci)*9+k]; g != want {
						t.Fatalf("%s: dW[%d][%d][%d] = %v, want %v", name, o, ci, k, g, want)
					}
				}
			}
		}
	}
}

// BenchmarkWinogradTransforms times the weight gradient's transforms on a
// ResNet layer3 convolution (256 channels, 14×14, batch 4): the output
// gradient's tiles and the final Gᵀ·M·G.
func BenchmarkWinogradTransforms(b *testing.B) {
	const n, h, c = 4, 14, 256
	nt := WinogradTiles(n, h, h)
	dy, vy := make([]float32, n*h*h*c), make([]float32, 16*nt*c)
	m, dw := make([]float32, 16*WinogradFilterStride(c, c)), make([]float32, c*c*9)
	w := make([]float32, c*c*9)
	b.Run("GradTiles", func(b *testing.B) {
		for range b.N {
			WinogradGradTiles(vy, dy, n, h, h, c, 0, nt)
		}
	})
	b.Run("Input", func(b *testing.B) {
		for range b.N {
			WinogradInput(vy, dy, n, h, h, c, 0, nt)
		}
	})
	b.Run("WeightGrad", func(b *testing.B) {
		for range b.N {
			WinogradWeightGrad(dw, m, c, c, 0, c)
		}
	})
	b.Run("Filters", func(b *testing.B) {
		for range b.N {
			WinogradFilters(m, w, c, c, 0, c)
		}
	})
}
