package radgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/radgen/radgen/internal/kernels"
)

// wgradCase is the data of a weight-gradient check: x (B, Cin, h, w) and
// dY (B, Cout, h, w) in float32, uniform in [−1, 1].
type wgradCase struct {
	batch, cin, cout, h, w int
	x, dy                  []float32
}

func newWgradCase(r *rand.Rand, batch, cin, cout, h, w int) wgradCase {
	c := wgradCase{batch: batch, cin: cin, cout: cout, h: h, w: w}
	c.x, c.dy = make([]float32, batch*cin*h*w), make([]float32, batch*cout*h*w)
	for _, s := range [][]float32{c.x, c.dy} {
		for i := range s {
			s[i] = float32(2*r.Float64() - 1)
		}
	}
	return c
}

func (c wgradCase) shape() convShape {
	return convShape{batch: c.batch, cin: c.cin, cout: c.cout, geo: ConvSquare(1, 1).geom(c.h, c.w, 3, 3)}
}

// direct returns the exact weight gradient (in float64, whose sums of the
// float32 products are exact to 2⁻⁵³ relative) and the magnitudes
// S = Σ |dY|·|x| of its terms.
func (c wgradCase) direct() (dw, mag []float64) {
	dw, mag = make([]float64, c.cout*c.cin*9), make([]float64, c.cout*c.cin*9)
	plane := c.h * c.w
	for b := range c.batch {
		for o := range c.cout {
			dy := c.dy[(b*c.cout+o)*plane:][:plane]
			for ci := range c.cin {
				x := c.x[(b*c.cin+ci)*plane:][:plane]
				for k := range 9 {
					ky, kx := k/3-1, k%3-1
					var s, m float64
					for i := range c.h {
						if i+ky < 0 || i+ky >= c.h {
							continue
						}
						for j := range c.w {
							if j+kx < 0 || j+kx >= c.w {
								continue
							}
							p := float64(dy[i*c.w+j]) * float64(x[(i+ky)*c.w+j+kx])
							s += p
							m += math.Abs(p)
						}
					}
					dw[(o*c.cin+ci)*9+k] += s
					mag[(o*c.cin+ci)*9+k] += m
				}
			}
		}
	}
	return dw, mag
}

// im2col returns the weight gradient by the product with the column
// matrix, as convBackward computes it for other convolutions.
func (c wgradCase) im2col() []float32 {
	s := c.shape()
	n, k := s.pixels(), s.column()
	dw, col := make([]float32, c.cout*k), make([]float32, k*n)
	for b := range c.batch {
		unfold(col, c.x, s, b, 1)
		kernels.Gemm(false, true, c.cout, k, n, 1, c.dy[b*c.cout*n:], n, col, n, 1, dw, k)
	}
	return dw
}

// winograd returns the weight gradient by winogradWeightGrad with images
// transformed in blocks of budget values.
func (c wgradCase) winograd(budget int) []float32 {
	dw := make([]float32, c.cout*c.cin*9)
	winogradWeightGrad(dw, c.dy, c.x, c.batch, c.cin, c.cout, c.h, c.w, budget)
	return dw
}

// wgradErrors returns the largest error of got against the exact gradient
// relative to the gradient's largest entry, and the largest error of an
// entry relative to the magnitudes S of its terms.
func wgradErrors(got []float32, exact, mag []float64) (rel, perTerm float64) {
	var scale, worst float64
	for i, e := range exact {
		d := math.Abs(float64(got[i]) - e)
		if math.IsNaN(d) {
			return math.Inf(1), math.Inf(1)
		}
		scale = math.Max(scale, math.Abs(e))
		worst = math.Max(worst, d)
		switch {
		case mag[i] > 0:
			perTerm = math.Max(perTerm, d/mag[i])
		case d > 0: // a tap that never meets the image (h or w 1)
			perTerm = math.Inf(1)
		}
	}
	return worst / scale, perTerm
}

// The weight's gradient of a float32 3×3, stride-1, padded convolution by
// Winograd's transposed F(2×2, 3×3) agrees with the exact sum and with the
// product with the column matrix, on odd and even planes, batches of
// several images, channel counts that are not multiples of eight, and
// images transformed in one block or in several.
//
// Tolerance. Each entry of dW sums K = B·h·w products of float32 values;
// S = Σ|dY|·|x| is the magnitude of its terms and u = 2⁻²⁴. The product
// with the column matrix rounds each running sum once: within K·u·S in the
// worst case, about u·S for random signs (partial sums of random-signed
// terms stay well below S). Winograd's sums add K/4 products of
// transformed values, each a sum of up to four values (rounded, 2u on each
// side), and the result takes up to four more additions and exact
// halvings; each of its terms is a sum of up to 16 direct products with
// weights of at most 1, so their magnitudes come to a few S. The test
// allows 16·u·S per entry (measured: about 2u·S; the column matrix about
// u·S) and, relative to the gradient's largest entry, four times the
// column matrix's error plus 8u.
func TestWinogradWeightGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 3))
	const u = 0x1p-24
	for _, c := range []struct{ batch, cin, cout, h, w, budget int }{
		{2, 5, 6, 9, 7, colBudget},
		{3, 4, 9, 1, 5, colBudget},
		{2, 13, 11, 8, 10, colBudget},
		{1, 8, 4, 6, 6, colBudget},
		{4, 20, 12, 11, 14, colBudget},
		{2, 37, 70, 24, 22, colBudget},      // 264 tiles: deeper than one block of the product
		{3, 9, 7, 13, 12, 1},                // one image per block
		{5, 12, 10, 7, 9, 16 * 20 * 22 * 2}, // two images per block, the last alone
	} {
		name := fmt.Sprintf("%+v", c)
		wc := newWgradCase(r, c.batch, c.cin, c.cout, c.h, c.w)
		if !winogradFits(wc.x, wc.shape().geo, c.cin, c.cout) {
			t.Fatalf("%s: not a Winograd convolution", name)
		}
		exact, mag := wc.direct()
		got, ref := wc.winograd(c.budget), wc.im2col()
		rel, per := wgradErrors(got, exact, mag)
		refRel, refPer := wgradErrors(ref, exact, mag)
		t.Logf("%s: Winograd %.2g of the largest entry, %.2gu·S; im2col %.2g, %.2gu·S",
			name, rel, per/u, refRel, refPer/u)
		if per > 16*u {
			t.Errorf("%s: error %.3gu of its terms' magnitude S, beyond 16u", name, per/u)
		}
		if rel > 4*refRel+8*u {
			t.Errorf("%s: error %.3g of the largest entry, the column matrix's %.3g", name, rel, refRel)
		}
	}
}

// The weight's gradient by Winograd does not depend on the number of
// goroutines: its sums run over the tiles in a fixed order, in one block
// of images or in several.
func TestWinogradWeightGradThreads(t *testing.T) {
	// Large enough for the products and the transforms to be shared out
	// (2·Cout·Cin·T ≥ 2²¹ with T = 2·32·32 tiles).
	wc := newWgradCase(rand.New(rand.NewPCG(30, 4)), 2, 20, 36, 63, 64)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, budget := range []int{colBudget, 16 * 32 * 32 * (20 + 36)} {
		var want []float32
		for _, procs := range []int{1, 4, 2} {
			runtime.GOMAXPROCS(procs)
			got := wc.winograd(budget)
			if want == nil {
				want = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("budget %d, GOMAXPROCS %d: dW[%d] = %v, with one goroutine %v", budget, procs, i, got[i], want[i])
				}
			}
		}
	}
}

// Conv2d's backward computes the weight's gradient by Winograd where the
// batch has enough tiles, agreeing with float64's product with the column
// matrix, and adds it to the gradient already there.
func TestConv2dWinogradWeightGradAdds(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 5))
	const batch, cin, cout, h, w = 2, 6, 5, 16, 15
	if n := kernels.WinogradTiles(batch, h, w); n < winogradGradTiles {
		t.Fatalf("%d tiles: the weight's gradient would not run by Winograd", n)
	}
	x, wt, w64 := rnd(r, batch, cin, h, w), rnd(r, batch, cout, h, w), rnd(r, cout, cin, 3, 3)
	grad := func(x, w, wt *Tensor) *Tensor {
		g := NewGraph()
		y := g.Conv2d(x, w, nil, ConvSquare(1, 1))
		if err := g.Backward(g.Sum(g.Mul(y, wt))); err != nil {
			t.Fatal(err)
		}
		return w.Grad()
	}
	want := grad(x, w64, wt).Float64s()
	w32 := w64.To32().SetRequiresGrad(true)
	x32, wt32 := x.To32(), wt.To32()
	first := grad(x32, w32, wt32).Float64s()
	if e := relErr(first, want); e > 2e-6 {
		t.Errorf("dW relative error %.3g", e)
	}
	second := grad(x32, w32, wt32).Float64s()
	for i := range want {
		want[i] *= 2
	}
	if e := relErr(second, want); e > 2e-6 {
		t.Errorf("dW after two passes: relative error %.3g", e)
	}
}

// BenchmarkConvWeightGrad times the weight gradient of ResNet-101's 3×3,
// stride-1 convolutions (batch 4 of 224² images, and 8 for the last
// stage, from which Winograd's takes over) by the column matrix and by
// Winograd.
func BenchmarkConvWeightGrad(b *testing.B) {
	r := rand.New(rand.NewPCG(30, 6))
	for _, l := range []struct {
		name         string
		batch, c, hw int
	}{{"layer1", 4, 64, 56}, {"layer2", 4, 128, 28}, {"layer3", 4, 256, 14}, {"layer4", 4, 512, 7}, {"layer4-batch8", 8, 512, 7}} {
		wc := newWgradCase(r, l.batch, l.c, l.c, l.hw, l.hw)
		b.Run(l.name+"/im2col", func(b *testing.B) {
			for range b.N {
				wc.im2col()
			}
		})
		b.Run(l.name+"/winograd", func(b *testing.B) {
			for range b.N {
				wc.winograd(colBudget)
			}
		})
	}
}
