package mesh

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// naiveBilinear computes Eqs. 4–8 with plain loops from a's weights.
func naiveBilinear(a *BilinearAttention, q, k, v, mask []float64, b, tq, tk int) (out, alpha []float64) {
	c := a.Config
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
	relu := func(x []float64) []float64 {
		for i := range x {
			x[i] = math.Max(0, x[i])
		}
		return x
	}
	out = make([]float64, b*tq*c.DBilinear)
	alpha = make([]float64, b*tq*tk)
	for bi := range b {
		for i := range tq {
			qi := q[(bi*tq+i)*c.DQuery : (bi*tq+i+1)*c.DQuery]
			qk, qv := relu(lin(a.QueryKey, qi)), relu(lin(a.QueryValue, qi))
			scores := make([]float64, tk)
			mids := make([][]float64, tk)
			bvs := make([][]float64, tk)
			for j := range tk {
				kk := relu(lin(a.Key, k[(bi*tk+j)*c.DKey:(bi*tk+j+1)*c.DKey]))
				vv := relu(lin(a.Value, v[(bi*tk+j)*c.DValue:(bi*tk+j+1)*c.DValue]))
				bk, bv := make([]float64, c.DBilinear), make([]float64, c.DBilinear)
				for d := range bk {
					bk[d], bv[d] = kk[d]*qk[d], vv[d]*qv[d]
				}
				mids[j] = relu(lin(a.Mid, bk))
				bvs[j] = bv
				scores[j] = lin(a.Spatial, mids[j])[0]
				if mask != nil && mask[bi*tk+j] == 0 {
					scores[j] = -1e9
				}
			}
			mx := math.Inf(-1)
			for _, s := range scores {
				mx = math.Max(mx, s)
			}
			var z float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - mx)
				z += scores[j]
			}
			avg := make([]float64, c.DMid)
			n := 0
			for j := range tk {
				if mask == nil || mask[bi*tk+j] != 0 {
					n++
					for d := range avg {
						avg[d] += mids[j][d]
					}
				}
			}
			for d := range avg {
				avg[d] /= float64(n)
			}
			beta := lin(a.Channel, avg)
			o := out[(bi*tq+i)*c.DBilinear : (bi*tq+i+1)*c.DBilinear]
			for j := range tk {
				p := scores[j] / z
				alpha[(bi*tq+i)*tk+j] = p
				for d := range o {
					o[d] += p * bvs[j][d]
				}
			}
			for d := range o {
				o[d] *= 1 / (1 + math.Exp(-beta[d]))
			}
		}
	}
	return out, alpha
}

func TestBilinearMatchesLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := BilinearConfig{DQuery: 5, DKey: 4, DValue: 3, DBilinear: 6, DMid: 7}
	a := NewBilinearAttention(c, rng)
	radgen.Promote64(a)
	b, tq, tk := 2, 3, 4
	q := gradcheck.Rand(rng, 1, b, tq, c.DQuery)
	k := gradcheck.Rand(rng, 1, b, tk, c.DKey)
	v := gradcheck.Rand(rng, 1, b, tk, c.DValue)
	maskv := []float64{1, 0, 1, 1, 1, 1, 0, 0}
	mask := radgen.FromFloat64(maskv, b, 1, tk)
	for _, m := range []struct {
		name string
		t    *radgen.Tensor
		v    []float64
	}{{"unmasked", nil, nil}, {"masked", mask, maskv}} {
		out, alpha := a.ForwardWithWeights(radgen.NoGrad(), q, k, v, m.t)
		wantOut, wantAlpha := naiveBilinear(a, q.Data64(), k.Data64(), v.Data64(), m.v, b, tq, tk)
		for i, w := range wantOut {
			if d := math.Abs(out.Data64()[i] - w); d > 1e-12 {
				t.Fatalf("%s: out[%d] = %v, want %v", m.name, i, out.Data64()[i], w)
			}
		}
		for i, w := range wantAlpha {
			if d := math.Abs(alpha.Data64()[i] - w); d > 1e-12 {
				t.Fatalf("%s: alpha[%d] = %v, want %v", m.name, i, alpha.Data64()[i], w)
			}
		}
		if m.v != nil {
			// Masked keys get no weight; each row of α sums to one.
			for bi := range b {
				for i := range tq {
					var s float64
					for j := range tk {
						p := alpha.At(bi, i, j)
						s += p
						if maskv[bi*tk+j] == 0 && p != 0 {
							t.Fatalf("masked key (%d, %d) has weight %v", bi, j, p)
						}
					}
					if math.Abs(s-1) > 1e-12 {
						t.Fatalf("row (%d, %d) of α sums to %v", bi, i, s)
					}
				}
			}
		}
	}
}

func TestBilinearFullyMaskedRowIsUniform(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := BilinearConfig{DQuery: 3, DKey: 3, DValue: 3, DBilinear: 4, DMid: 2}
	a := NewBilinearAttention(c, rng)
	q := radgen.FromFloat32([]float32{1, 2, 3, 0.5, -1, 2}, 1, 2, 3)
	kv := radgen.FromFloat32([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1}, 1, 3, 3)
	mask := radgen.FromFloat32([]float32{0, 0, 0, 1, 1, 0}, 1, 2, 3) // row 0 fully masked
	_, alpha := a.ForwardWithWeights(radgen.NoGrad(), q, kv, kv, mask)
	for j := range 3 {
		if math.Abs(alpha.At(0, 0, j)-1.0/3) > 1e-6 {
			t.Fatalf("fully masked row: α = %v, want 1/3 each", alpha.Data()[:3])
		}
	}
	if alpha.At(0, 1, 2) != 0 {
		t.Fatalf("masked key got weight %v", alpha.At(0, 1, 2))
	}
}

func TestBilinearGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := BilinearConfig{DQuery: 4, DKey: 3, DValue: 5, DBilinear: 4, DMid: 3}
	a := NewBilinearAttention(c, rng)
	radgen.Promote64(a)
	q := gradcheck.Rand(rng, 1, 2, 3, 4)
	k := gradcheck.Rand(rng, 1, 2, 4, 3)
	v := gradcheck.Rand(rng, 1, 2, 4, 5)
	// A causal mask, as the decoder's masked EBA uses (Tq = Tk would be
	// needed for self-attention; here it only exercises the masked mean).
	mask := radgen.FromFloat64([]float64{
		1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0,
		1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}, 2, 3, 4)
	wrt := []*radgen.Tensor{q, k, v}
	for _, p := range radgen.Params(a) {
		wrt = append(wrt, p.Tensor)
	}
	for _, m := range []*radgen.Tensor{nil, mask} {
		gradcheck.Check(t, "bilinear attention", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
			return a.Forward(g, q, k, v, m)
		}, wrt...)
	}
}

func TestBilinearPanicsOnShape(t *testing.T) {
	a := NewBilinearAttention(BilinearConfig{DQuery: 2, DKey: 2, DValue: 2, DBilinear: 2, DMid: 2}, rand.New(rand.NewPCG(1, 1)))
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic for a query of the wrong width")
		}
	}()
	a.Forward(radgen.NoGrad(), radgen.Zeros(1, 1, 3), radgen.Zeros(1, 2, 2), radgen.Zeros(1, 2, 2), nil)
}
