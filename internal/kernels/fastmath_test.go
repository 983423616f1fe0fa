package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The float32 kernels' exponential, sigmoid and tanh agree with the math
// package's to float32 precision.
func TestFastMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	xs := []float64{0, -0, 1, -1, 1e-10, -1e-10, 88.7, -103.9, -109, 89.9, -96.21884, 96.2, math.Ln2 / 64, -math.Ln2 / 64}
	for range 200000 {
		xs = append(xs, (rng.Float64()*2-1)*100, rng.NormFloat64(), rng.NormFloat64()*1e-3)
	}
	ulp := func(v float32) float64 {
		return float64(math.Nextafter32(float32(math.Abs(float64(v))), 2) - float32(math.Abs(float64(v))))
	}
	got, want := make([]float32, 1), make([]float32, 1)
	for _, x := range xs {
		if got, want := fastExp(x), math.Exp(x); math.Abs(got-want) > 1e-14*want {
			t.Fatalf("fastExp(%v) = %v, want %v", x, got, want)
		}
		f := []float32{float32(x)}
		Sigmoid(got, f)
		if w := float32(1 / (1 + math.Exp(-float64(f[0])))); math.Abs(float64(got[0]-w)) > ulp(w) {
			t.Fatalf("Sigmoid(%v) = %v, want %v", f[0], got[0], w)
		}
		Tanh(got, f)
		if w := float32(math.Tanh(float64(f[0]))); math.Abs(float64(got[0]-w)) > ulp(w) {
			t.Fatalf("Tanh(%v) = %v, want %v", f[0], got[0], w)
		}
	}
	for _, x := range []float64{-708, 709, -700.5, 708.9} {
		if got, want := fastExp(x), math.Exp(x); math.Abs(got-want) > 1e-14*want {
			t.Fatalf("fastExp(%v) = %v, want %v", x, got, want)
		}
	}
	if fastExp(-800) != 0 || !math.IsInf(fastExp(800), 1) || !math.IsNaN(fastExp(math.NaN())) {
		t.Fatal("fastExp out of range")
	}
	nan := float32(math.NaN())
	Tanh(got, []float32{nan})
	if got[0] == got[0] {
		t.Fatal("Tanh(NaN) is not NaN")
	}
	Sigmoid(got, []float32{float32(math.Inf(-1))})
	Sigmoid(want, []float32{float32(math.Inf(1))})
	if got[0] != 0 || want[0] != 1 {
		t.Fatal("Sigmoid(±Inf)")
	}
	row := []float32{1, 2, float32(math.Inf(-1)), -3, 0.5}
	ref := make([]float64, len(row))
	var s float64
	for i, v := range row {
		ref[i] = math.Exp(float64(v - 2))
		s += ref[i]
	}
	out := make([]float32, len(row))
	Softmax(out, row, len(row))
	for i := range row {
		if math.Abs(float64(out[i])-ref[i]/s) > 1e-7 {
			t.Fatalf("Softmax: %v, want %v", out, ref)
		}
	}
}

// The kernels that widen values a block at a time give every value of a
// slice longer than a block, of any length, in place or not, what they
// give it alone.
func TestFastMathBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{1, mathBlock - 1, mathBlock, mathBlock + 1, 3*mathBlock + 5} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 4)
		}
		for name, f := range map[string]func(dst, x []float32){"Tanh": Tanh[float32], "Sigmoid": Sigmoid[float32]} {
			got := make([]float32, n)
			f(got, x)
			inPlace := append([]float32(nil), x...)
			f(inPlace, inPlace)
			one := make([]float32, 1)
			for i, v := range x {
				f(one, []float32{v})
				if got[i] != one[0] || inPlace[i] != one[0] {
					t.Fatalf("%s over %d values: [%d] = %v (in place %v), alone %v", name, n, i, got[i], inPlace[i], one[0])
				}
			}
		}
		sm, lsm := make([]float32, n), make([]float32, n)
		Softmax(sm, x, n)
		LogSoftmax(lsm, x, n)
		m := slices.Max(x)
		var s float64
		for _, v := range x {
			s += math.Exp(float64(v - m))
		}
		for i, v := range x {
			p := math.Exp(float64(v-m)) / s
			if math.Abs(float64(sm[i])-p) > 1e-6*p+1e-12 {
				t.Fatalf("Softmax over %d values: [%d] = %v, want %v", n, i, sm[i], p)
			}
			if lp := float64(v-m) - math.Log(s); math.Abs(float64(lsm[i])-lp) > 1e-5 {
				t.Fatalf("LogSoftmax over %d values: [%d] = %v, want %v", n, i, lsm[i], lp)
			}
		}
	}
}
