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
		// Channels first, as the graph's tensors are.
		x, dy := small(c.b*c.cin*c.h*c.w), small(c.b*c.cout*c.h*c.w)
		plane, per := c.h*c.w, WinogradTiles(1, c.h, c.w)
		nt := c.b * per
		dx, dy1 := WinogradGradStride(c.cin, nt), WinogradGradStride(c.cout, nt)
		vx, vy := make([]float32, 16*dx), make([]float32, 16*dy1)
		tmp := make([]float32, c.w)
		for b := range c.b {
			for ci := range c.cin {
				WinogradInputPlane(vx[ci*nt+b*per:], dx, x[(b*c.cin+ci)*plane:][:plane], c.h, c.w, tmp)
			}
			for o := range c.cout {
				WinogradGradPlane(vy[o*nt+b*per:], dy1, dy[(b*c.cout+o)*plane:][:plane], c.h, c.w, tmp)
			}
		}
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
								want += dy[(b*c.cout+o)*plane+i*c.w+j] * x[(b*c.cin+ci)*plane+(i+ky)*c.w+j+kx]
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
// ResNet layer3 convolution (256 channels, 14×14, batch 4): the input and
// output-gradient planes, the final Gᵀ·M·G, and the forward's filters.
func BenchmarkWinogradTransforms(b *testing.B) {
	const n, h, c = 4, 14, 256
	plane, per := h*h, WinogradTiles(1, h, h)
	nt := n * per
	ds := WinogradGradStride(c, nt)
	x, v := make([]float32, n*c*plane), make([]float32, 16*ds)
	m, dw := make([]float32, 16*WinogradFilterStride(c, c)), make([]float32, c*c*9)
	w, tmp := make([]float32, c*c*9), make([]float32, h)
	b.Run("InputPlanes", func(b *testing.B) {
		for range b.N {
			for p := range n * c {
				WinogradInputPlane(v[(p%c)*nt+(p/c)*per:], ds, x[p*plane:][:plane], h, h, tmp)
			}
		}
	})
	b.Run("GradPlanes", func(b *testing.B) {
		for range b.N {
			for p := range n * c {
				WinogradGradPlane(v[(p%c)*nt+(p/c)*per:], ds, x[p*plane:][:plane], h, h, tmp)
			}
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
