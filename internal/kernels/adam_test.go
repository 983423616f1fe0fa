package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA32 computes x·y + z exactly with big.Float and rounds once to
// float32. (float32(math.FMA(x, y, z)) would round twice, first to float64:
// the very error FMA32 avoids.)
func exactFMA32(x, y, z float32) float32 {
	if math.IsNaN(float64(x)) || math.IsNaN(float64(y)) || math.IsNaN(float64(z)) ||
		math.IsInf(float64(x), 0) || math.IsInf(float64(y), 0) || math.IsInf(float64(z), 0) {
		return float32(float64(x)*float64(y) + float64(z))
	}
	var a, b, c big.Float
	a.SetPrec(400).SetFloat64(float64(x))
	b.SetPrec(400).SetFloat64(float64(y))
	c.SetPrec(400).SetFloat64(float64(z))
	a.Mul(&a, &b).Add(&a, &c)
	f, _ := a.Float32()
	return f
}

func TestFMA32IsCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(x, y, z float32) {
		t.Helper()
		got, want := FMA32(x, y, z), exactFMA32(x, y, z)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g (%#x), want %g (%#x)", x, y, z, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for i := range 200000 {
		x := float32(rng.NormFloat64())
		y := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		z := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(80)-40)))
		if i%3 == 0 {
			z = -float32(float64(x) * float64(y)) // heavy cancellation
		}
		check(x, y, z)
	}
	// Cases where rounding the float64 sum to float32 would round twice
	// wrongly: z = a·2^k with an odd last bit, x·y = 2^k·(2^-24 − 2^-70), so
	// the exact sum lies just below the float32 tie a + ulp/2 while its
	// float64 rounding is the tie itself, which ties-to-even would round up.
	for range 20000 {
		a := float32(1 + rng.Float64())
		if math.Float32bits(a)&1 == 0 {
			a = math.Nextafter32(a, 2)
		}
		scale := float32(math.Ldexp(1, rng.IntN(40)-20))
		x := float32(1+math.Ldexp(1, -23)) * scale
		y := float32(math.Ldexp(1-math.Ldexp(1, -23), -24))
		check(x, y, a*scale)
		check(-x, y, -a*scale)
		check(x, -y, -a*scale)
		if float32(float64(x)*float64(y)+float64(a*scale)) == exactFMA32(x, y, a*scale) {
			t.Fatalf("case (%g, %g, %g) does not exercise double rounding", x, y, a*scale)
		}
	}
	// 2³⁰+2⁷ + (2⁶ − 2⁻³⁴): the float64 sum rounds onto a float32 tie, which
	// rounding to even would resolve upwards.
	check(1+float32(math.Exp2(-20)), 64*(1-float32(math.Exp2(-20))), float32(math.Exp2(30)+128))
	// Results in float32's subnormal range, where ties sit at other bits.
	for range 20000 {
		x := float32(rng.NormFloat64() * 1e-20)
		y := float32(rng.NormFloat64() * 1e-19)
		z := float32(rng.NormFloat64() * 1e-39)
		check(x, y, z)
	}
	check(float32(math.Inf(1)), 1, 0)
	check(float32(math.NaN()), 1, 0)
	check(0, 0, -0)
	check(1e-30, 1e-30, 0)
	check(math.MaxFloat32, 2, -math.MaxFloat32)
}

// adamWithFMA32 is Adam with FMA32 called where Adam writes it out.
func adamWithFMA32(k *AdamConsts, p, g, m, v, vmax []float32) {
	for i := range p {
		gi := g[i]
		if k.Decoupled {
			p[i] = float32(p[i] * k.Decay)
		} else if k.WD != 0 {
			gi = FMA32(p[i], k.WD, gi)
		}
		mi := FMA32(gi, k.OneMinusB1, float32(m[i]*k.Beta1))
		vi := float32(v[i]*k.Beta2) + float32(float32(k.OneMinusB2*gi)*gi)
		m[i], v[i] = mi, vi
		if vmax != nil {
			vi = max(vmax[i], vi)
			vmax[i] = vi
		}
		denom := float32(float32(math.Sqrt(float64(vi)))/k.BC2Sqrt) + k.Eps
		p[i] += float32(k.NegStepLen*mi) / denom
	}
}

// Adam's written-out fused adds are FMA32's, bit for bit, on operands
// built to land on float32 ties (and in the subnormal range) as well as on
// ordinary ones.
func TestAdamFusedAddsAreFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 20000
	mk := func() []float32 { return make([]float32, n) }
	p, g, m, v, vm := mk(), mk(), mk(), mk(), mk()
	for i := range n {
		p[i] = float32(rng.NormFloat64() * 0.1)
		g[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6)-5)))
		m[i] = float32(rng.NormFloat64() * 1e-3)
		v[i] = float32(math.Abs(rng.NormFloat64()) * 1e-6)
		vm[i] = v[i]
		a := float32(1 + rng.Float64()) // odd last bit, as in the FMA32 test
		if math.Float32bits(a)&1 == 0 {
			a = math.Nextafter32(a, 2)
		}
		switch i % 4 {
		case 1: // a tie for the weight decay's add with WD = tie
			p[i], g[i] = float32(1+math.Ldexp(1, -23)), a
		case 3: // a tie for the first moment's add with OneMinusB1 = tie, Beta1 = 1
			g[i], m[i] = float32(1+math.Ldexp(1, -23)), a
		case 2: // subnormal moments
			m[i], g[i] = float32(rng.NormFloat64()*1e-39), float32(rng.NormFloat64()*1e-39)
		}
	}
	tie := float32(math.Ldexp(1-math.Ldexp(1, -23), -24))
	for _, k := range []AdamConsts{
		{WD: tie, Beta1: 0.9, OneMinusB1: float32(1 - 0.9), Beta2: 0.999, OneMinusB2: float32(1 - 0.999), BC2Sqrt: 0.0447, Eps: 1e-8, NegStepLen: -0.01, AMSGrad: true},
		{Beta1: 1, OneMinusB1: tie, Beta2: 0.999, OneMinusB2: float32(1 - 0.999), BC2Sqrt: 1, Eps: 1e-8, NegStepLen: -1e-3},
		{Beta1: 0.5, OneMinusB1: 0.5, Beta2: 0.999, OneMinusB2: float32(1 - 0.999), BC2Sqrt: 1, Eps: 1e-8, NegStepLen: -1e-3},
		{Decoupled: true, Decay: float32(1 - 1e-4), Beta1: 0.9, OneMinusB1: float32(1 - 0.9), Beta2: 0.99, OneMinusB2: float32(1 - 0.99), BC2Sqrt: 0.1, Eps: 1e-8, NegStepLen: -1e-3},
	} {
		c := func(x []float32) []float32 { return append([]float32(nil), x...) }
		p1, g1, m1, v1, vm1 := c(p), c(g), c(m), c(v), c(vm)
		p2, m2, v2, vm2 := c(p), c(m), c(v), c(vm)
		var vmax1, vmax2 []float32
		if k.AMSGrad {
			vmax1, vmax2 = vm1, vm2
		}
		for range 3 {
			Adam(&k, p1, g1, m1, v1, vmax1)
			adamWithFMA32(&k, p2, g1, m2, v2, vmax2)
		}
		for i := range n {
			for _, pair := range [][2]float32{{p1[i], p2[i]}, {m1[i], m2[i]}, {v1[i], v2[i]}, {vm1[i], vm2[i]}} {
				if math.Float32bits(pair[0]) != math.Float32bits(pair[1]) {
					t.Fatalf("%+v [%d]: Adam %g, with FMA32 %g", k, i, pair[0], pair[1])
				}
			}
		}
	}
}
