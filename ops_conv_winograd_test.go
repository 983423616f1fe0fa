package radgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/kernels"
)

// A float32 3×3, stride-1, padded convolution runs by Winograd's algorithm,
// forward and for the input's gradient (the adjoint convolution); its
// values and gradients agree with the float64 product with the column
// matrix to float32 precision, on even and odd planes.
func TestConv2dWinograd(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ batch, cin, cout, h, w int }{
		{2, 5, 6, 9, 7}, {1, 8, 4, 6, 6}, {3, 4, 9, 1, 5}, {2, 16, 12, 14, 14},
	} {
		name := fmt.Sprintf("%+v", c)
		geo := ConvSquare(1, 1).geom(c.h, c.w, 3, 3)
		if !winogradFits(make([]float32, 1), geo, c.cin, c.cout) {
			t.Fatalf("%s: not a Winograd convolution", name)
		}
		x, w, b := rnd(r, c.batch, c.cin, c.h, c.w), rnd(r, c.cout, c.cin, 3, 3), rnd(r, c.cout)
		wt := rnd(r, c.batch, c.cout, c.h, c.w)
		run := func(x, w, b, wt *Tensor) (y *Tensor, grads []*Tensor) {
			for _, in := range []*Tensor{x, w, b} {
				in.SetRequiresGrad(true).ZeroGrad()
			}
			g := NewGraph()
			y = g.Conv2d(x, w, b, ConvSquare(1, 1))
			if err := g.Backward(g.Sum(g.Mul(y, wt))); err != nil {
				t.Fatal(err)
			}
			return y, []*Tensor{x.Grad(), w.Grad(), b.Grad()}
		}
		want, wantG := run(x, w, b, wt)
		got, gotG := run(x.To32(), w.To32(), b.To32(), wt.To32())
		e := relErr(got.Float64s(), want.Float64s())
		eg := 0.0
		for i := range wantG {
			eg = math.Max(eg, relErr(gotG[i].Float64s(), wantG[i].Float64s()))
		}
		t.Logf("%s: forward %.2g, gradients %.2g", name, e, eg)
		if e > 2e-6 {
			t.Errorf("%s: forward relative error %.3g", name, e)
		}
		for i := range wantG {
			if e := relErr(gotG[i].Float64s(), wantG[i].Float64s()); e > 2e-6 {
				t.Errorf("%s: gradient %d relative error %.3g", name, i, e)
			}
		}
	}
}

// The adjoint filters, packed from the forward ones, are those of the
// flipped, transposed weight to rounding.
func TestWinogradAdjointFilters(t *testing.T) {
	const cout, cin = 3, 2
	w := make([]float32, cout*cin*9)
	for i := range w {
		w[i] = float32(math.Sin(float64(i) + 1))
	}
	flipped := make([]float32, len(w)) // (Cin, Cout, 3, 3)
	for o := range cout {
		for c := range cin {
			for t := range 9 {
				flipped[(c*cout+o)*9+8-t] = w[(o*cin+c)*9+t]
			}
		}
	}
	ps := kernels.WinogradFilterStride(cin, cout)
	u, uf := make([]float32, 16*ps), make([]float32, 16*ps)
	kernels.WinogradFilters(u, w, cout, cin, 0, cout)
	kernels.WinogradFilters(uf, flipped, cin, cout, 0, cin) // (16, Cout, Cin), the same stride
	// The adjoint products of one-hot rows read the adjoint filters back.
	v := make([]float32, 16*cout*cout) // (16, T = Cout, Cout)
	for xi := range 16 {
		for o := range cout {
			v[xi*cout*cout+o*cout+o] = 1
		}
	}
	m := make([]float32, 16*cout*cin)
	kernels.WinogradProducts(m, v, u, cout, cin, cout, true)
	for xi := range 16 {
		for i := range cout * cin {
			got, want := m[xi*cout*cin+i], uf[xi*ps+i]
			if d := math.Abs(float64(got - want)); d > 1e-6*(1+math.Abs(float64(want))) {
				t.Fatalf("adjoint filter %d value %d = %v, flipped weight's %v", xi, i, got, want)
			}
		}
	}
}
