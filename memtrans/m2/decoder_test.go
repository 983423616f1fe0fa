package m2

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

func TestDecoderMasks(t *testing.T) {
	dec := &MeshedDecoder{Pad: 1, PosEmb: radgen.Zeros(10, 2)}
	pad, pos, self := dec.Masks([]int{2, 5, 1, 2, 1, 1}, 2, 3)
	wantPad := []float32{1, 1, 0, 1, 0, 0}
	wantPos := []int{1, 2, 0, 1, 0, 0}
	for i := range wantPad {
		if pad.Data()[i] != wantPad[i] || pos[i] != wantPos[i] {
			t.Fatalf("pad %v positions %v, want %v %v", pad.Data(), pos, wantPad, wantPos)
		}
	}
	want := []float32{ // zero = masked
		1, 0, 0, // study 0: causal
		1, 1, 0,
		1, 1, 0, // key 2 is padding
		1, 0, 0, // study 1: keys 1 and 2 are padding
		1, 0, 0,
		1, 0, 0,
	}
	for i, v := range self.Data() {
		if v != want[i] {
			t.Fatalf("self mask %v, want %v", self.Data(), want)
		}
	}
}

func m2SmallDecoder(rng *rand.Rand) *MeshedDecoder {
	dec := NewMeshedDecoder(DecoderConfig{Vocab: 7, MaxLen: 6, Pad: 1, D: 4, DK: 2, DV: 2, Heads: 2, DFF: 6, Layers: 2, Levels: 3}, rng)
	for _, l := range dec.Layers {
		for _, a := range l.Mesh.Gates {
			radgen.Uniform(a.Bias, rng, 0.5)
		}
	}
	return dec
}

// A later token never changes an earlier position's output; a padding
// position outputs log_softmax(fc(0)), uniform.
func TestDecoderCausalAndPadding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	dec := m2SmallDecoder(rng)
	levels := gradcheck.Rand(rng, 1, 1, 3, 5, 4).To32()
	g := radgen.NoGrad()
	a := dec.Forward(g, []int{2, 4, 5, 6}, 1, 4, levels, nil).Data()
	b := dec.Forward(g, []int{2, 4, 3, 1}, 1, 4, levels, nil).Data()
	for i := range 2 * 7 {
		if a[i] != b[i] {
			t.Fatalf("position %d changed with later tokens: %v vs %v", i/7, a[i], b[i])
		}
	}
	if a[2*7] == b[2*7] {
		t.Fatal("position 2 ignored its own token")
	}
	uniform := -math.Log(7)
	for v := range 7 {
		if math.Abs(float64(b[3*7+v])-uniform) > 1e-6 {
			t.Fatalf("padding position log-prob %v, want %v", b[3*7+v], uniform)
		}
	}
}

func TestGradientsMeshedDecoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	dec := m2SmallDecoder(rng)
	radgen.Promote64(dec)
	levels := gradcheck.Rand(rng, 1, 2, 3, 5, 4)
	encMask := radgen.FromFloat64([]float64{0, 0, 0, 1, 0, 0, 1, 0, 0, 0}, 2, 1, 1, 5)
	tokens := []int{2, 5, 3, 1, 2, 4, 6, 6}
	l := dec.Layers[0]
	gradcheck.Check(t, "meshed decoder", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return dec.Forward(g, tokens, 2, 4, levels, encMask)
	}, levels, dec.WordEmb, dec.FC.Weight, l.Mesh.Gates[0].Weight, l.Mesh.Gates[2].Bias, l.EncAtt().Attention.FCK.Weight,
		l.SelfAtt.Attention.FCV.Weight, l.SelfAtt.Norm.Weight, dec.Layers[1].PWFF.FC1.Weight)

	y := gradcheck.Rand(rng, 1, 2, 3, 4)
	pad := radgen.FromFloat64([]float64{1, 1, 0, 1, 0, 0}, 2, 3, 1)
	self := radgen.FromFloat64([]float64{0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1}, 2, 1, 3, 3)
	gradcheck.Check(t, "meshed layer", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return l.Forward(g, y, levels, pad, self, encMask)
	}, y, levels, l.Mesh.Gates[1].Weight, l.EncAtt().Norm.Bias)
}
