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
	k, v := a.MemoryScales()
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

func TestMaskRules(t *testing.T) {
	in := radgen.FromFloat32([]float32{
		0, 0, 0, // zero row
		1, -1, 0, // sums to zero, not a zero row
		1, 2, 3,
	}, 1, 3, 3)
	got := ZeroRowMask(in).Data()
	if got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("zero-row mask %v, want [0 1 1] (zero = masked)", got)
	}
	// After the norm: an all-zero LayerNorm input normalises to zeros and
	// is masked; a generic row is not.
	ln := NewLayerNorm(16)
	pre := radgen.Zeros(1, 2, 16)
	for i := range 16 {
		pre.Data()[16+i] = float32(i*i%7) + 0.25
	}
	got = AfterNormMask(pre, ln).Data()
	if got[0] != 0 || got[1] != 1 {
		t.Fatalf("after-norm mask %v, want [0 1] (zero = masked)", got)
	}
	e := &MemoryEncoder{Padding: PadNone}
	if e.Mask(in, pre) != nil {
		t.Fatal("PadNone gave a mask")
	}
}

// Every element is summed once, whatever the cascade does, and the
// torchMomentsAcc agree with a float64 computation.
func TestTorchKernelsCoverEveryElement(t *testing.T) {
	for _, n := range []int{1, 7, 8, 31, 32, 64, 65, 100, 512, 513, 2048, 4097} {
		x := make([]float32, n)
		var want float64
		for i := range x {
			x[i] = float32(i%97 + 1)
			want += float64(x[i])
		}
		if got := torchSum(x); float64(got) != want {
			t.Fatalf("torchSum of %d integers = %v, want %v", n, got, want)
		}
		mean, variance := torchMoments(x)
		var m, v float64
		for _, e := range x {
			m += float64(e)
		}
		m /= float64(n)
		for _, e := range x {
			v += (float64(e) - m) * (float64(e) - m)
		}
		v /= float64(n)
		if math.Abs(float64(mean)-m) > 1e-5*math.Abs(m) || math.Abs(float64(variance)-v) > 1e-4*math.Max(v, 1) {
			t.Fatalf("torchMoments of %d: (%v, %v), want (%v, %v)", n, mean, variance, m, v)
		}
	}
	for x, want := range map[int]int{0: 1, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 16: 4, 17: 5} {
		if got := torchCeilLog2(x); got != want {
			t.Fatalf("torchCeilLog2(%d) = %d, want %d", x, got, want)
		}
	}
}

func TestEncoderShapesAndNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	e := NewMemoryEncoder(EncoderConfig{DIn: 10, D: 8, DK: 2, DV: 2, Heads: 4, DFF: 16, Layers: 3, Slots: 5}, rng)
	levels, mask := e.Forward(radgen.NoGrad(), gradcheck.Rand(rng, 1, 2, 7, 10).To32())
	if s := levels.Shape(); len(s) != 4 || s[0] != 2 || s[1] != 3 || s[2] != 7 || s[3] != 8 {
		t.Fatalf("levels %v, want [2 3 7 8]", s)
	}
	if s := mask.Shape(); len(s) != 4 || s[3] != 7 {
		t.Fatalf("mask %v", s)
	}
	names := map[string][]int{}
	for _, p := range radgen.Params(e) {
		names[p.Name] = p.Tensor.Shape()
	}
	for name, shape := range map[string][]int{
		"fc.weight":                            {8, 10},
		"layer_norm.weight":                    {8},
		"layers.2.mhatt.attention.m_k":         {1, 5, 8},
		"layers.0.mhatt.attention.fc_o.bias":   {8},
		"layers.1.mhatt.layer_norm.bias":       {8},
		"layers.1.pwff.fc1.weight":             {16, 8},
		"layers.2.pwff.layer_norm.weight":      {8},
		"layers.0.mhatt.attention.fc_q.weight": {8, 8},
	} {
		got, ok := names[name]
		if !ok || len(got) != len(shape) {
			t.Errorf("%s: %v, want %v", name, got, shape)
			continue
		}
		for i := range got {
			if got[i] != shape[i] {
				t.Errorf("%s: %v, want %v", name, got, shape)
			}
		}
	}
}

// Level i of the stacked output is the output of layer i.
func TestEncoderLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	e := NewMemoryEncoder(EncoderConfig{DIn: 5, D: 4, DK: 2, DV: 2, Heads: 2, DFF: 8, Layers: 2, Slots: 3}, rng)
	in := gradcheck.Rand(rng, 1, 1, 3, 5).To32()
	g := radgen.NoGrad()
	levels := e.ForwardMasked(g, in, nil).Data()
	x := e.Embed(g, in)
	for i, l := range e.Layers {
		x = l.Forward(g, x, nil)
		for j, v := range x.Data() {
			if levels[i*12+j] != v {
				t.Fatalf("level %d element %d: %v, want %v", i, j, levels[i*12+j], v)
			}
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

	layer := NewAttentionLayer(att, 0)
	m2Randomize(layer.Norm, rng, 1)
	radgen.Promote64(layer)
	gradcheck.Check(t, "post-norm attention layer", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return layer.Forward(g, q, kv, kv, mask)
	}, q, kv, layer.Norm.Weight, layer.Norm.Bias, att.MemV)

	ff := NewPositionWiseFeedForward(6, 7, 0, rng)
	radgen.Promote64(ff)
	gradcheck.Check(t, "position-wise feed-forward", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return ff.Forward(g, q)
	}, q, ff.FC1.Weight, ff.FC1.Bias, ff.FC2.Weight, ff.Norm.Weight)

	enc := NewMemoryEncoder(EncoderConfig{DIn: 5, D: 4, DK: 2, DV: 2, Heads: 2, DFF: 6, Layers: 2, Slots: 3}, rng)
	radgen.Promote64(enc)
	in := gradcheck.Rand(rng, 1, 2, 5, 5)
	gradcheck.Check(t, "memory-augmented encoder", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return enc.ForwardMasked(g, in, mask)
	}, in, enc.FC.Weight, enc.Layers[0].MHAtt.Attention.MemK, enc.Layers[1].MHAtt.Attention.MemV, enc.Layers[1].PWFF.FC2.Weight)
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
