package m2

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
	"github.com/radgen/radgen/mesh"
)

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
	ln := mesh.NewLayerNorm(16)
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

func TestGradientsM2Layers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	mask := radgen.FromFloat64([]float64{1, 1, 0, 1, 1, 1, 1, 0, 0, 1}, 2, 1, 1, 5) // zero = masked

	att := mesh.NewMemoryAttention(6, 2, 3, 2, 4, rng)
	m2Randomize(att, rng, 0.5)
	radgen.Promote64(att)
	q := gradcheck.Rand(rng, 1, 2, 3, 6)
	kv := gradcheck.Rand(rng, 1, 2, 5, 6)
	// The attention itself is checked in package mesh; from here on, M²'s
	// layers around it.
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
