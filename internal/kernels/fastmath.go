package kernels

import "math"

// The exponential of the kernels (softmaxes, sigmoid gates, tanh): 2^(k/32)
// from a 32-entry table times a degree-5 polynomial, in float64, to a
// relative error below 10⁻¹⁴, so that float32 results are those of math.Exp
// at a fraction of its cost (a decoding step computes tens of thousands),
// and float64 ones, which gradient checks run, are as good as the checks'
// finite differences need. Float64 tanh keeps math.Tanh. Where the CPU
// has AVX2, the softmaxes take it four values at a time (expBlock), eight
// with AVX-512 (its table lookup from registers, not a gather), and the
// float32 sigmoid and tanh are assembly as a whole (sigmoidHead,
// tanhHead), with the same bits as the scalar code's on every path.

var exp2Table = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return t
}()

// fastExp returns e^x for −708 ≤ x ≤ 709 (normal float64 results), 0 or +Inf
// beyond, and NaN for NaN.
func fastExp(x float64) float64 {
	const (
		invLn2x32 = 32 / math.Ln2
		ln2Hi     = 0x1.62e42fee00000p-6  // ln2/32 in two parts, the high one with
		ln2Lo     = 0x1.a39ef35793c76p-38 // trailing zeros so that k·ln2Hi is exact
		shifter   = 0x1.8p52
	)
	switch {
	case x < -708:
		return 0
	case x > 709:
		return math.Inf(1)
	case x != x:
		return x
	}
	// The conversions round every product before its sum, so that no
	// build fuses them (GOAMD64=v3 may): expAVX2 computes the same bits.
	t := float64(x*invLn2x32) + shifter // x·32/ln2 rounded to an integer k, in t's low bits
	k := t - shifter
	r := (x - float64(k*ln2Hi)) - float64(k*ln2Lo) // |r| ≤ ln2/64
	p := float64(r*(1.0/120)) + 1.0/24
	p = float64(r*p) + 1.0/6
	p = float64(r*p) + 1.0/2
	p = float64(r*p) + 1
	p = float64(r*p) + 1 // 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r/120))))
	ki := int64(k)
	return math.Float64frombits(math.Float64bits(exp2Table[ki&31]*p) + uint64(ki>>5)<<52)
}

// tanhFast returns tanh x to float32 precision: for 2⁻¹² ≤ |x| ≤ 20,
// (e − 1)/(e + 1) with e = e^{2|x|}, and the sign of x.
func tanhFast(x float64) float64 {
	a := math.Abs(x)
	switch {
	case a < 0x1p-12:
		return x // tanh x = x(1 − x²/3 + …): exact in float32
	case a > 20:
		return math.Copysign(1, x)
	}
	e := fastExp(2 * a)
	return math.Copysign((e-1)/(e+1), x)
}

// sigmoid returns 1 / (1 + e^−x).
func sigmoid(x float64) float64 { return 1 / (1 + fastExp(-x)) }

// mathBlock is how many values the kernels of this file widen to float64
// at a time. They convert a block into a stack array, then run a block
// function over the array, instead of converting value by value: a float32 to
// float64 conversion writes only the low half of its register, and when
// that register is the one the previous value's result came back in,
// every iteration waits for the whole of the one before (the loop ran 4 to
// 5 times slower that way).
const mathBlock = 64

// widen sets b[i] = float64(x[i]) − m for the first len(b) values of x,
// subtracting in T as the kernels' callers did before widening.
func widen[T Float](b []float64, x []T, m T) {
	for i := range b {
		b[i] = float64(x[i] - m)
	}
}
