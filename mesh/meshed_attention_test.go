package mesh

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// Eq. 6 by hand: with zero gate weights and biases b_i, α_i = σ(b_i), so
// M = Σ σ(b_i)·C_i / √N.
func TestMeshGatesByHand(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	l := NewMeshedCrossAttention(NewScaledDotProductAttention(2, 1, 1, 2, rng), 2, 3, rng)
	biases := []float64{0, 1, -2}
	for i, a := range l.Gates {
		radgen.Fill(a.Weight, 0)
		radgen.Fill(a.Bias, biases[i])
	}
	s := radgen.FromFloat32([]float32{9, 9}, 1, 1, 2)
	cs := []*radgen.Tensor{
		radgen.FromFloat32([]float32{1, 2}, 1, 1, 2),
		radgen.FromFloat32([]float32{3, -1}, 1, 1, 2),
		radgen.FromFloat32([]float32{0.5, 4}, 1, 1, 2),
	}
	got := l.Combine(radgen.NoGrad(), s, cs).Data()
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for j := range 2 {
		var want float64
		for i, c := range cs {
			want += sig(biases[i]) * float64(c.Data()[j])
		}
		want /= math.Sqrt(3) // the published code's np.sqrt(3)
		if math.Abs(float64(got[j])-want) > 1e-6 {
			t.Fatalf("M[%d] = %v, want %v", j, got[j], want)
		}
	}
}

// The gates read [Y; C_i]: a weight on the Y half only changes α_i by the
// query, checked against Eq. 8 evaluated by hand.
func TestMeshGateInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	l := NewMeshedCrossAttention(NewScaledDotProductAttention(1, 1, 1, 1, rng), 1, 1, rng)
	l.Gates[0].Weight.Data()[0], l.Gates[0].Weight.Data()[1] = 0.5, -0.25 // W [y; c]
	radgen.Fill(l.Gates[0].Bias, 0.1)
	s := radgen.FromFloat32([]float32{2}, 1, 1, 1)
	c := radgen.FromFloat32([]float32{4}, 1, 1, 1)
	got := l.Combine(radgen.NoGrad(), s, []*radgen.Tensor{c}).Data()[0]
	want := 4 / (1 + math.Exp(-(0.5*2 - 0.25*4 + 0.1)))
	if math.Abs(float64(got)-want) > 1e-6 {
		t.Fatalf("M = %v, want %v", got, want)
	}
}

// Names are the published decoder layer's: enc_att.* and fc_alpha1.* …
func TestMeshedCrossAttentionNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	m := NewMeshedCrossAttention(NewMultiHeadAttention(4, 2, 0, rng), 4, 2, rng)
	var names []string
	for _, p := range radgen.Params(m) {
		names = append(names, p.Name)
	}
	want := []string{"enc_att.linears.0.weight", "enc_att.linears.0.bias", "enc_att.linears.1.weight", "enc_att.linears.1.bias",
		"enc_att.linears.2.weight", "enc_att.linears.2.bias", "enc_att.linears.3.weight", "enc_att.linears.3.bias",
		"fc_alpha1.weight", "fc_alpha1.bias", "fc_alpha2.weight", "fc_alpha2.bias"}
	if len(names) != len(want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("names %v, want %v", names, want)
		}
	}
	if m.Gates[1].Weight.Dim(0) != 4 || m.Gates[1].Weight.Dim(1) != 8 {
		t.Fatalf("gate %v, want 2D → D", m.Gates[1].Weight.Shape())
	}
}

// Step over levels projected once gives Forward of each row's query, for
// either attention of the family as C, over three levels and one, with an
// encoder mask, a padding row, and rows grouped by study and gathered; its
// probabilities are each level's Attend.
func TestMeshedCrossAttentionStepMatchesForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for name, levels := range map[string]int{"3-levels": 3, "1-level": 1} {
			for _, memory := range []bool{false, true} {
				t.Run(dev.String()+"/"+name+map[bool]string{false: "/multi-head", true: "/m2-memory"}[memory], func(t *testing.T) {
					rng := rand.New(rand.NewPCG(4, 4))
					const d, b, regions = 8, 2, 5
					var att IncrementalAttention = NewMultiHeadAttention(d, 2, 0, rng)
					if memory {
						att = NewMemoryAttention(d, 3, 2, 2, 3, rng)
					}
					m := NewMeshedCrossAttention(att, d, levels, rng)
					randomizeVectors(m, rng)
					if err := radgen.ToDevice(m, dev); err != nil {
						t.Fatal(err)
					}
					x := randInput(rng, b, levels, regions, d)
					encMask := radgen.Zeros(b, 1, 1, regions)
					radgen.Fill(encMask, 1)
					encMask.Data()[regions+3], encMask.Data()[regions+4] = 0, 0 // zero = masked: study 1's last two regions
					g := radgen.NoGrad()
					src := m.Project(g, x.To(dev), encMask.To(dev))
					if src.Studies() != b || src.Levels() != levels || src.Width() != regions {
						t.Fatalf("source of %d studies × %d levels × %d, want %d × %d × %d", src.Studies(), src.Levels(), src.Width(), b, levels, regions)
					}
					for _, study := range [][]int{{0, 1}, {0, 0, 1, 1}, {1, 0, 0}} {
						r := len(study)
						y := randInput(rng, r, d)
						pad := radgen.Zeros(r, 1)
						radgen.Fill(pad, 1)
						pad.Data()[r-1] = 0 // the last row is <pad>
						out, probs := m.Step(g, y.To(dev), pad.To(dev), src, study, true)
						if probs.Dim(0) != r || probs.Dim(1) != levels {
							t.Fatalf("probabilities %v, want (%d, %d, h, N')", probs.Shape(), r, levels)
						}
						for k, st := range study {
							lv := g.Slice(x, 0, st, st+1).To(dev)
							mk := g.Slice(encMask, 0, st, st+1).To(dev)
							pk := g.Reshape(g.Slice(pad, 0, k, k+1), 1, 1, 1).To(dev)
							want := m.Forward(g, rowOf(g, y, k).To(dev), lv, mk, pk)
							if w := worstDiff(t, rowOf(g, out, k), want); w > 1e-5 {
								t.Fatalf("rows %v, row %d: |Δ| = %g", study, k, w)
							}
							for l := range levels {
								one := att.ProjectMasked(g, g.Reshape(g.Slice(lv, 1, l, l+1), 1, regions, d), mk)
								_, wantP := att.Attend(g, g.Reshape(rowOf(g, y, k), 1, d).To(dev), one, []int{0}, true)
								h, w := wantP.Dim(1), wantP.Dim(2)
								gotP := g.Reshape(g.Slice(g.Slice(probs, 0, k, k+1), 1, l, l+1), 1, h, w)
								if dd := worstDiff(t, gotP, wantP); dd > 1e-6 {
									t.Fatalf("rows %v, row %d, level %d: |Δ weights| = %g", study, k, l, dd)
								}
							}
						}
					}
				})
			}
		}
	}
}

func TestGradientsMeshedCrossAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	m := NewMeshedCrossAttention(NewMemoryAttention(4, 2, 2, 2, 3, rng), 4, 3, rng)
	randomizeVectors(m, rng)
	radgen.Promote64(m)
	y := gradcheck.Rand(rng, 1, 2, 3, 4)
	levels := gradcheck.Rand(rng, 1, 2, 3, 5, 4)
	encMask := radgen.FromFloat64([]float64{1, 1, 1, 0, 1, 1, 0, 1, 1, 1}, 2, 1, 1, 5)
	pad := radgen.FromFloat64([]float64{1, 1, 0, 1, 0, 0}, 2, 3, 1)
	att := m.Attention.(*ScaledDotProductAttention)
	gradcheck.Check(t, "meshed cross-attention", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return m.Forward(g, y, levels, encMask, pad)
	}, y, levels, m.Gates[0].Weight, m.Gates[2].Bias, att.FCQ.Weight, att.MemK)
}
