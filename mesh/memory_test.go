package mesh

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// m2NaiveAttention is M²'s ScaledDotProductAttention(Memory) written as
// loops in float64: the oracle for the tensor implementation.
func m2NaiveAttention(a *ScaledDotProductAttention, q, k, v, mask *radgen.Tensor) []float64 {
	b, nq, nk, d := q.Dim(0), q.Dim(1), k.Dim(1), q.Dim(2)
	h, dk, dv, m := a.Heads, a.DK, a.DV, a.Slots()
	lin := func(l *radgen.Linear, x []float64) []float64 {
		w, bias := l.Weight.Float64s(), l.Bias.Float64s()
		out, in := l.Weight.Dim(0), l.Weight.Dim(1)
		y := make([]float64, out)
		for o := range out {
			y[o] = bias[o]
			for i := range in {
				y[o] += w[o*in+i] * x[i]
			}
		}
		return y
	}
	qv, kv, vv := q.Float64s(), k.Float64s(), v.Float64s()
	var mk, mv, md []float64
	if m > 0 {
		mk, mv = a.MemK.Float64s(), a.MemV.Float64s()
	}
	if mask != nil {
		md = mask.Float64s()
	}
	out := make([]float64, 0, b*nq*d)
	for bi := range b {
		keys := make([][]float64, 0, nk+m)
		vals := make([][]float64, 0, nk+m)
		for j := range nk {
			keys = append(keys, lin(a.FCK, kv[(bi*nk+j)*d:(bi*nk+j+1)*d]))
			vals = append(vals, lin(a.FCV, vv[(bi*nk+j)*d:(bi*nk+j+1)*d]))
		}
		for s := range m {
			kr, vr := make([]float64, h*dk), make([]float64, h*dv)
			for i := range kr {
				kr[i] = math.Sqrt(float64(dk)) * mk[s*h*dk+i]
			}
			for i := range vr {
				vr[i] = math.Sqrt(float64(m)) * mv[s*h*dv+i]
			}
			keys, vals = append(keys, kr), append(vals, vr)
		}
		for qi := range nq {
			qp := lin(a.FCQ, qv[(bi*nq+qi)*d:(bi*nq+qi+1)*d])
			ctx := make([]float64, h*dv)
			for hd := range h {
				sc := make([]float64, nk+m)
				mx := math.Inf(-1)
				for j := range nk + m {
					if j < nk && md != nil {
						mb := 0
						if mask.Dim(0) > 1 {
							mb = bi
						}
						mq := 0
						if mask.Dim(2) > 1 {
							mq = qi
						}
						if md[(mb*mask.Dim(2)+mq)*nk+j] == 0 {
							sc[j] = math.Inf(-1)
							continue
						}
					}
					for i := range dk {
						sc[j] += qp[hd*dk+i] * keys[j][hd*dk+i]
					}
					sc[j] /= math.Sqrt(float64(dk))
					mx = math.Max(mx, sc[j])
				}
				var z float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					z += sc[j]
				}
				for j := range sc {
					for i := range dv {
						ctx[hd*dv+i] += sc[j] / z * vals[j][hd*dv+i]
					}
				}
			}
			out = append(out, lin(a.FCO, ctx)...)
		}
	}
	return out
}

func m2Randomize(m radgen.Module, rng *rand.Rand, s float64) {
	m.VisitParams(func(_ string, t *radgen.Tensor) { radgen.Uniform(t, rng, s) })
}

func TestMemoryAttentionMatchesLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		name          string
		d, dk, dv, h  int
		slots, nq, nk int
		masked        bool
	}{
		{"plain", 6, 3, 3, 2, 0, 3, 4, false},
		{"plain-masked", 6, 3, 2, 2, 0, 3, 4, true},
		{"memory", 6, 3, 3, 2, 5, 3, 4, false},
		{"memory-masked-dk≠dv", 8, 2, 3, 3, 4, 2, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a *ScaledDotProductAttention
			if tc.slots > 0 {
				a = NewMemoryAttention(tc.d, tc.dk, tc.dv, tc.h, tc.slots, rng)
			} else {
				a = NewScaledDotProductAttention(tc.d, tc.dk, tc.dv, tc.h, rng)
			}
			m2Randomize(a, rng, 0.7)
			radgen.Promote64(a)
			q := gradcheck.Rand(rng, 1, 2, tc.nq, tc.d)
			kv := gradcheck.Rand(rng, 1, 2, tc.nk, tc.d)
			var mask *radgen.Tensor
			if tc.masked {
				// Padding keys 1 and 3 of study 1, nothing of study 0
				// (zero = masked).
				md := make([]float64, 2*tc.nk)
				for i := range md {
					md[i] = 1
				}
				md[tc.nk+1], md[tc.nk+3] = 0, 0
				mask = radgen.FromFloat64(md, 2, 1, 1, tc.nk)
			}
			got := a.Forward(radgen.NoGrad(), q, kv, kv, mask).Data64()
			want := m2NaiveAttention(a, q, kv, kv, mask)
			var worst float64
			for i := range want {
				worst = math.Max(worst, math.Abs(got[i]-want[i]))
			}
			if worst > 1e-12 {
				t.Fatalf("max |Δ| = %.3g against the loop oracle", worst)
			}
		})
	}
}

// The memory columns are never masked: a query whose real keys are all
// masked still attends the slots (and the result is finite); without slots
// the same mask gives a uniform average (see TestFullyMaskedRowIsDefined).
func TestMemoryColumnsNeverMasked(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	a := NewMemoryAttention(4, 2, 2, 2, 3, rng)
	x := gradcheck.Rand(rng, 1, 1, 3, 4).To32()
	mask := radgen.Zeros(1, 1, 1, 3) // every real key masked
	out, w := a.ForwardWithWeights(radgen.NoGrad(), x, x, x, mask)
	for _, v := range out.Data() {
		if math.IsNaN(float64(v)) {
			t.Fatal("memory attention with every real key masked gave NaN")
		}
	}
	// Weights (1, h, 3, 3+3): the real columns are exactly zero.
	wd := w.Data()
	for r := range 2 * 3 {
		var s float32
		for j := range 6 {
			if j < 3 && wd[r*6+j] != 0 {
				t.Fatalf("masked key %d has weight %v", j, wd[r*6+j])
			}
			s += wd[r*6+j]
		}
		if math.Abs(float64(s-1)) > 1e-6 {
			t.Fatalf("row %d sums to %v", r, s)
		}
	}
	plain := NewScaledDotProductAttention(4, 2, 2, 2, rng)
	y := plain.Forward(radgen.NoGrad(), x, x, x, mask).Data()
	if math.IsNaN(float64(y[0])) || math.IsInf(float64(y[0]), 0) {
		t.Fatalf("fully masked plain attention = %v, want a uniform average", y[0])
	}
}

func TestMemoryScales(t *testing.T) {
	a := NewMemoryAttention(8, 16, 4, 2, 40, rand.New(rand.NewPCG(1, 2)))
	k, v := a.memoryScales()
	if k != 4 || math.Abs(v-math.Sqrt(40)) > 1e-15 {
		t.Fatalf("scales %v, %v; want √16 = 4 and √40", k, v)
	}
	if a.MemK.Dim(1) != 40 || a.MemK.Dim(2) != 32 || a.MemV.Dim(2) != 8 {
		t.Fatalf("slot shapes %v %v", a.MemK.Shape(), a.MemV.Shape())
	}
}

func TestLayerNormIsTorch(t *testing.T) {
	ln := NewLayerNorm(4)
	y := ln.Forward(radgen.NoGrad(), radgen.FromFloat32([]float32{1, 2, 3, 4}, 1, 4)).Data()
	// Biased variance 1.25, eps 1e-5 inside the square root.
	s := math.Sqrt(1.25 + 1e-5)
	for i, x := range []float64{1, 2, 3, 4} {
		if want := (x - 2.5) / s; math.Abs(float64(y[i])-want) > 1e-6 {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func TestGradientsM2Modules(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	mask := radgen.FromFloat64([]float64{1, 1, 0, 1, 1, 1, 1, 0, 0, 1}, 2, 1, 1, 5) // zero = masked

	att := NewMemoryAttention(6, 2, 3, 2, 4, rng)
	m2Randomize(att, rng, 0.5)
	radgen.Promote64(att)
	q := gradcheck.Rand(rng, 1, 2, 3, 6)
	kv := gradcheck.Rand(rng, 1, 2, 5, 6)
	gradcheck.Check(t, "memory attention", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return att.Forward(g, q, kv, kv, mask)
	}, q, kv, att.MemK, att.MemV, att.FCQ.Weight, att.FCK.Bias, att.FCV.Weight, att.FCO.Weight)
}

// A row whose every key is masked is defined: it attends uniformly, with
// no NaN, and rows with a key left are as with −∞.
func TestFullyMaskedRowIsDefined(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := NewScaledDotProductAttention(8, 4, 4, 2, rng)
	x := radgen.Zeros(1, 2, 8)
	for i := range x.Data() {
		x.Data()[i] = float32(rng.NormFloat64())
	}
	mask := radgen.FromFloat32([]float32{0, 0, 1, 0}, 1, 1, 2, 2) // zero = masked: query 0 both keys, query 1 key 1
	out := a.Forward(radgen.NoGrad(), x, x, x, mask)
	for i, v := range out.Data() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("output %d is %v", i, v)
		}
	}
	// Query 1 attends key 0 alone: its output is that of an unmasked
	// attention over key 0 only.
	one := a.Forward(radgen.NoGrad(), g1(x, 1), g1(x, 0), g1(x, 0), nil)
	for j := range 8 {
		if d := math.Abs(float64(out.Data()[8+j] - one.Data()[j])); d > 1e-6 {
			t.Fatalf("query 1, dim %d: %v, attending key 0 alone gives %v", j, out.Data()[8+j], one.Data()[j])
		}
	}
}

// g1 returns position p of x (1, T, D) as (1, 1, D).
func g1(x *radgen.Tensor, p int) *radgen.Tensor { return radgen.NoGrad().Slice(x, 1, p, p+1) }
