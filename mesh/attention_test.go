package mesh

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// With identity projections and one head, attention is softmax(QKᵀ/√d)V;
// masked keys get weight e^(−1e9) = 0.
func TestAttentionValues(t *testing.T) {
	m := NewMultiHeadAttention(2, 1, 0, rand.New(rand.NewPCG(1, 1)))
	for _, l := range m.Linears {
		radgen.Fill(l.Weight, 0)
		radgen.Fill(l.Bias, 0)
		l.Weight.Data()[0], l.Weight.Data()[3] = 1, 1
	}
	q := radgen.FromFloat32([]float32{1, 0}, 1, 1, 2)
	kv := radgen.FromFloat32([]float32{1, 0, 0, 1, 2, 2}, 1, 3, 2)
	mask := radgen.FromFloat32([]float32{1, 1, 0}, 1, 1, 3)
	out, w := m.ForwardWithWeights(radgen.NoGrad(), q, kv, kv, mask)
	e := math.Exp(1 / math.Sqrt2)
	p0, p1 := e/(e+1), 1/(e+1)
	want := []float64{p0, p1 + 0}
	got := out.Data()
	if math.Abs(float64(got[0])-want[0]) > 1e-6 || math.Abs(float64(got[1])-p1) > 1e-6 {
		t.Fatalf("attention = %v, want [%v %v]", got, p0, p1)
	}
	if w.Data()[2] != 0 {
		t.Fatalf("masked key got weight %v", w.Data()[2])
	}
}

func TestGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	m := NewMultiHeadAttention(4, 2, 0, rng)
	radgen.Promote64(m)
	q := gradcheck.Rand(rng, 1, 2, 3, 4)
	kv := gradcheck.Rand(rng, 1, 2, 5, 4)
	mask := radgen.FromFloat64([]float64{1, 1, 1, 0, 1, 1, 1, 1, 1, 0}, 2, 1, 5)
	gradcheck.Check(t, "multi-head attention", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return m.Forward(g, q, kv, kv, mask)
	}, q, kv, m.Linears[0].Weight, m.Linears[1].Bias, m.Linears[2].Weight, m.Linears[3].Weight)
}
