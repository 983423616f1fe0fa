package optim

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/radgen/radgen"
)

func TestClipGradValue(t *testing.T) {
	nan := float32(math.NaN())
	a := param("a", make([]float32, 6), []float32{0.05, -0.05, 0.2, -3, 0.1, nan})
	b := param("b", []float32{1}, nil) // no gradient: skipped
	ClipGradValue([]radgen.Named{a, b}, 0.1)
	got := a.Tensor.Grad().Data()
	want := []float32{0.05, -0.05, 0.1, -0.1, 0.1, nan}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Errorf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got[2] != float32(0.1) {
		t.Errorf("bound is %v, want float32(0.1)", got[2])
	}
	if b.Tensor.Grad() != nil {
		t.Errorf("a gradient appeared")
	}
}

func TestClipGradNorm(t *testing.T) {
	// Per-tensor 2-norms 5 and 12, global norm 13.
	a := param("a", make([]float32, 2), []float32{3, 4})
	b := param("b", make([]float32, 1), []float32{-12})
	c := param("c", make([]float32, 1), nil)
	ps := []radgen.Named{a, b, c}
	norm, err := ClipGradNorm(ps, 1, 2)
	if err != nil || norm != 13 {
		t.Fatalf("norm %v, %v; want 13", norm, err)
	}
	coef := float32(1) / (float32(13) + float32(1e-6))
	want := []float32{3 * coef, 4 * coef}
	if !slices.Equal(a.Tensor.Grad().Data(), want) || b.Tensor.Grad().Data()[0] != -12*coef {
		t.Errorf("clipped to %v %v, want %v %v", a.Tensor.Grad().Data(), b.Tensor.Grad().Data(), want, -12*coef)
	}
	// Now the norm is just under 1, well under 2: nothing changes.
	before := slices.Clone(a.Tensor.Grad().Data())
	norm, err = ClipGradNorm(ps, 2, 2)
	if err != nil || math.Abs(norm-1) > 1e-6 {
		t.Fatalf("second norm %v, %v", norm, err)
	}
	if !slices.Equal(before, a.Tensor.Grad().Data()) {
		t.Errorf("a gradient under the bound changed")
	}
}

func TestClipGradNormTypes(t *testing.T) {
	mk := func() []radgen.Named {
		return []radgen.Named{param("a", make([]float32, 3), []float32{1, -2, 2}), param("b", make([]float32, 1), []float32{-4})}
	}
	for _, tc := range []struct {
		p, want float64
	}{
		{1, 9},                  // (1+2+2) + 4
		{math.Inf(1), 4},        // largest |g|
		{3, math.Cbrt(17 + 64)}, // per-tensor (1+8+8)^(1/3), then combined
		{2, math.Sqrt(9 + 16)},  // 3 and 4
		{0.5, math.Pow(math.Pow(math.Pow(1+2*math.Sqrt2, 2), 0.5)+2, 2)}, // p < 1 is allowed, as in torch
	} {
		ps := mk()
		norm, err := ClipGradNorm(ps, 100, tc.p)
		if err != nil || math.Abs(norm-tc.want) > 1e-5*tc.want {
			t.Errorf("p=%v: norm %v, %v; want %v", tc.p, norm, err, tc.want)
		}
		ps = mk()
		if _, err := ClipGradNorm(ps, 0.5, tc.p); err != nil {
			t.Fatal(err)
		}
		coef := float32(0.5) / (float32(tc.want) + float32(1e-6))
		if got := ps[1].Tensor.Grad().Data()[0]; math.Abs(float64(got-(-4*coef))) > 1e-6 {
			t.Errorf("p=%v: clipped -4 to %v, want %v", tc.p, got, -4*coef)
		}
	}
}

func TestClipGradNormNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		a := param("a", make([]float32, 2), []float32{1, bad})
		b := param("b", make([]float32, 1), []float32{5})
		norm, err := ClipGradNorm([]radgen.Named{a, b}, 1, 2)
		if !errors.Is(err, ErrNonFiniteNorm) {
			t.Errorf("%v: error %v, want ErrNonFiniteNorm", bad, err)
		}
		if !math.IsNaN(norm) && !math.IsInf(norm, 1) {
			t.Errorf("%v: norm %v", bad, norm)
		}
		if b.Tensor.Grad().Data()[0] != 5 {
			t.Errorf("gradients changed despite the error")
		}
	}
	if _, err := ClipGradNorm(nil, -1, 2); !errors.Is(err, ErrConfig) {
		t.Errorf("negative max norm: %v", err)
	}
	if _, err := ClipGradNorm(nil, 1, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("norm type 0: %v", err)
	}
	if n, err := ClipGradNorm(nil, 1, 2); n != 0 || err != nil {
		t.Errorf("no gradients: %v, %v", n, err)
	}
}

func TestClipFloat64Gradients(t *testing.T) {
	x := radgen.Zeros64(3).SetRequiresGrad(true)
	x.SetGrad(radgen.FromFloat64([]float64{0.5, -0.05, 3}, 3))
	y := radgen.Zeros64(1).SetRequiresGrad(true)
	y.SetGrad(radgen.FromFloat64([]float64{-4}, 1))
	ps := []radgen.Named{{Name: "x", Tensor: x}, {Name: "y", Tensor: y}}
	ClipGradValue(ps, 0.1)
	if got := x.Grad().Data64(); !slices.Equal(got, []float64{0.1, -0.05, 0.1}) {
		t.Errorf("clipped float64 values %v", got)
	}
	x.SetGrad(radgen.FromFloat64([]float64{3, 0, 0}, 3))
	y.SetGrad(radgen.FromFloat64([]float64{4}, 1))
	norm, err := ClipGradNorm(ps, 1, 2)
	if err != nil || norm != 5 {
		t.Fatalf("norm %v, %v", norm, err)
	}
	if got := y.Grad().Data64()[0]; got != 4*(1/(5+1e-6)) {
		t.Errorf("clipped %v, want %v", got, 4*(1/(5+1e-6)))
	}
}

func TestSetGradNilAndDtype(t *testing.T) {
	p := radgen.NewParam(2)
	p.SetGrad(radgen.Zeros(2))
	p.SetGrad(nil)
	if p.Grad() != nil {
		t.Errorf("SetGrad(nil) kept the gradient")
	}
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("SetGrad of a float64 gradient on a float32 tensor did not panic")
		}
	}()
	p.SetGrad(radgen.Zeros64(2))
}
