package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/cpu"
)

// expBlock gives fastExp's bits, and the float32 Sigmoid and Tanh those of
// the scalar sigmoid and tanhFast of the widened value, for every value,
// on every kernel path: random values over the whole range and beyond it,
// the bounds of the exponential's formula and of tanh's branches, the
// values where k changes, signed zeros, infinities and NaN, in blocks of
// every length and alignment, in place and not.
func TestFastMathMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	xs := []float64{0, math.Copysign(0, -1), 1, -1, -708, 709, math.Nextafter(-708, -1000), math.Nextafter(709, 1000),
		-745, 710, -1e300, 1e300, math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -5e-324, math.Ln2 / 64, -math.Ln2 / 64,
		20, -20, math.Nextafter(20, 21), 21, 22, 0x1p-12, -0x1p-12, math.Nextafter(0x1p-12, 0), 354, 355}
	for j := -64; j <= 64; j++ { // around the points where x·32/ln2 rounds to the next k
		b := (float64(j) + 0.5) * math.Ln2 / 32
		xs = append(xs, b, math.Nextafter(b, 1000), math.Nextafter(b, -1000), b/2, -b/2)
	}
	for range 300000 {
		switch rng.IntN(4) {
		case 0:
			xs = append(xs, (rng.Float64()*2-1)*720)
		case 1:
			xs = append(xs, rng.NormFloat64()*8)
		case 2:
			xs = append(xs, rng.NormFloat64()*1e-3)
		default:
			xs = append(xs, math.Float64frombits(rng.Uint64()))
		}
	}
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b }
	want := make([]float64, len(xs))
	for i, x := range xs {
		want[i] = fastExp(x)
	}
	var xs32 []float32
	for _, x := range xs {
		if v := float32(x); !math.IsInf(float64(v), 0) || math.IsInf(x, 0) {
			xs32 = append(xs32, v)
		}
	}
	// The float32 kernels' reference: the scalar function of the widened
	// value, narrowed.
	want32 := func(f func(float64) float64) []float32 {
		w := make([]float32, len(xs32))
		for i, x := range xs32 {
			w[i] = float32(f(float64(x)))
		}
		return w
	}
	wantSigmoid, wantTanh := want32(sigmoid), want32(tanhFast)
	check := func(t *testing.T) {
		got := make([]float64, len(xs))
		sig, th := make([]float32, len(xs32)), make([]float32, len(xs32))
		for start := 0; start < len(xs); {
			n := min(1+rng.IntN(70), len(xs)-start)
			expBlock(got[start:start+n], xs[start:start+n])
			start += n
		}
		for start := 0; start < len(xs32); {
			n := min(1+rng.IntN(150), len(xs32)-start)
			Sigmoid(sig[start:start+n], xs32[start:start+n])
			Tanh(th[start:start+n], xs32[start:start+n])
			start += n
		}
		inPlace := append([]float64(nil), xs...)
		expBlock(inPlace, inPlace)
		for i, x := range xs {
			if !same(got[i], want[i]) || !same(inPlace[i], want[i]) {
				t.Fatalf("expBlock of %v = %v (in place %v), fastExp %v", x, got[i], inPlace[i], want[i])
			}
		}
		inPlace32 := append([]float32(nil), xs32...)
		Tanh(inPlace32, inPlace32)
		for i, x := range xs32 {
			if !same(float64(sig[i]), float64(wantSigmoid[i])) {
				t.Fatalf("Sigmoid(%v) = %v, scalar %v", x, sig[i], wantSigmoid[i])
			}
			if !same(float64(th[i]), float64(wantTanh[i])) || !same(float64(inPlace32[i]), float64(wantTanh[i])) {
				t.Fatalf("Tanh(%v) = %v (in place %v), scalar %v", x, th[i], inPlace32[i], wantTanh[i])
			}
		}
	}
	t.Run(cpu.Path(), check)
	if cpu.HasAVX512() {
		restore := cpu.DisableAVX512()
		t.Run(cpu.Path(), check)
		restore()
	}
	if cpu.HasAVX2FMA() {
		restore := cpu.DisableAVX2FMA()
		defer restore()
		t.Run(cpu.Path(), check)
	}
}

// BenchmarkFastMath times the float32 transcendental kernels a decoding
// step runs, per value, on a relational memory's worth of values.
func BenchmarkFastMath(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, dst := make([]float32, 4608), make([]float32, 4608)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 2)
	}
	for _, k := range []struct {
		name string
		f    func()
	}{
		{"Tanh", func() { Tanh(dst, x) }},
		{"Sigmoid", func() { Sigmoid(dst, x) }},
		{"Softmax", func() { Softmax(dst, x, 96) }},
		{"LogSoftmax", func() { LogSoftmax(dst, x, 768) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				k.f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/value")
		})
	}
}
