package mesh

// Expert bilinear attention of METransformer (Wang, Liu, Wang and Zhou,
// "METransformer: Radiology Report Generation by Transformer with Multiple
// Learnable Expert Tokens", CVPR 2023), which takes its bilinear attention
// block from X-Linear (Pan, Yao, Li and Mei, "X-Linear Attention Networks for
// Image Captioning", CVPR 2020). Equation numbers are those of the seed notes
// (shared/seeds/003), in order of appearance: Eq. 4 the low-rank bilinear
// pooling, Eqs. 5–6 the spatial attention, Eq. 7 the channel attention,
// Eq. 8 the output. No official METransformer code exists; where the notes
// leave a choice open, the choice is stated beside the code.

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// BilinearConfig holds the sizes of a [BilinearAttention].
type BilinearConfig struct {
	DQuery    int     // D_q: width of the queries (the expert tokens in the encoder)
	DKey      int     // D_k: width of the keys
	DValue    int     // D_v: width of the values
	DBilinear int     // D_B: width of the bilinear space and of the output
	DMid      int     // D_mid: width of the squeeze layer that feeds both attentions
	Dropout   float64 // on the spatial attention weights, in training
}

// BilinearAttention is expert bilinear attention (EBA). For a query q_i and
// keys and values k_j, v_j it computes
//
//	B_k[i,j] = ReLU(W_k k_j) ⊙ ReLU(W_qk q_i)               (Eq. 4)
//	B_v[i,j] = ReLU(W_v v_j) ⊙ ReLU(W_qv q_i)               (Eq. 4)
//	B_mid[i,j] = ReLU(W_Bk B_k[i,j])                         (Eq. 5)
//	α_s[i,·] = softmax_j(W_s B_mid[i,j])                     (Eq. 6, spatial)
//	β_c[i] = sigmoid(W_c mean_j B_mid[i,j])                  (Eq. 7, channel / squeeze-excitation)
//	out_i = β_c[i] ⊙ Σ_j α_s[i,j] B_v[i,j]                   (Eq. 8)
//
// Every projection is a Linear with a bias: query_key (W_qk), key (W_k),
// query_value (W_qv), value (W_v), mid (W_Bk), spatial (W_s, D_mid → 1)
// and channel (W_c). The notes write σ = ReLU for the pooling; X-Linear
// uses ELU there and adds a group norm, which are not taken. The block has
// one head (X-Linear splits the channels into heads; the notes do not).
//
// The zero value is not usable; build one with [NewBilinearAttention]. A
// BilinearAttention is safe for concurrent use by NoGrad graphs.
type BilinearAttention struct {
	Config     BilinearConfig
	QueryKey   *radgen.Linear // W_qk: D_q → D_B
	Key        *radgen.Linear // W_k: D_k → D_B
	QueryValue *radgen.Linear // W_qv: D_q → D_B
	Value      *radgen.Linear // W_v: D_v → D_B
	Mid        *radgen.Linear // W_Bk: D_B → D_mid
	Spatial    *radgen.Linear // W_s: D_mid → 1
	Channel    *radgen.Linear // W_c: D_mid → D_B
}

// NewBilinearAttention returns a block with Xavier-uniform weights and
// PyTorch-default biases drawn from rng. It panics on a non-positive size.
func NewBilinearAttention(c BilinearConfig, rng *rand.Rand) *BilinearAttention {
	if c.DQuery <= 0 || c.DKey <= 0 || c.DValue <= 0 || c.DBilinear <= 0 || c.DMid <= 0 {
		panic(fmt.Sprintf("mesh: bilinear attention sizes %+v", c))
	}
	lin := func(in, out int) *radgen.Linear {
		l := radgen.NewLinear(in, out, true, rng)
		radgen.XavierUniform(l.Weight, rng)
		return l
	}
	return &BilinearAttention{
		Config:     c,
		QueryKey:   lin(c.DQuery, c.DBilinear),
		Key:        lin(c.DKey, c.DBilinear),
		QueryValue: lin(c.DQuery, c.DBilinear),
		Value:      lin(c.DValue, c.DBilinear),
		Mid:        lin(c.DBilinear, c.DMid),
		Spatial:    lin(c.DMid, 1),
		Channel:    lin(c.DMid, c.DBilinear),
	}
}

// VisitParams implements radgen.Module.
func (a *BilinearAttention) VisitParams(visit func(string, *radgen.Tensor)) {
	a.QueryKey.VisitParams(radgen.Prefixed("query_key.", visit))
	a.Key.VisitParams(radgen.Prefixed("key.", visit))
	a.QueryValue.VisitParams(radgen.Prefixed("query_value.", visit))
	a.Value.VisitParams(radgen.Prefixed("value.", visit))
	a.Mid.VisitParams(radgen.Prefixed("mid.", visit))
	a.Spatial.VisitParams(radgen.Prefixed("spatial.", visit))
	a.Channel.VisitParams(radgen.Prefixed("channel.", visit))
}

// Forward attends queries q (B, Tq, D_q) over keys k (B, Tk, D_k) and values
// v (B, Tk, D_v) and returns (B, Tq, D_B). mask, if not nil, broadcasts to
// (B, Tq, Tk) — (B, 1, Tk) or (B, Tq, Tk) — and zero entries are masked:
// their spatial score is set to −1e9 before the softmax, and they are left
// out of the channel attention's mean (a fully masked row averages every
// key, as its softmax does).
func (a *BilinearAttention) Forward(g *radgen.Graph, q, k, v, mask *radgen.Tensor) *radgen.Tensor {
	out, _ := a.ForwardWithWeights(g, q, k, v, mask)
	return out
}

// ForwardWithWeights is Forward that also returns the spatial attention α_s
// (B, Tq, Tk).
func (a *BilinearAttention) ForwardWithWeights(g *radgen.Graph, q, k, v, mask *radgen.Tensor) (out, weights *radgen.Tensor) {
	return a.Attend(g, q, a.ProjectKeys(g, k, v), mask)
}

// BilinearKeys are keys and values after their half of the bilinear pooling
// (Eq. 4): K = ReLU(W_k k) and V = ReLU(W_v v), each (B, Tk, D_B). They
// depend on the keys alone, so a decoder computes them once per position
// (or once per study, for cross-attention) and reuses them at every step.
type BilinearKeys struct {
	K, V *radgen.Tensor
}

// ProjectKeys projects keys k (B, Tk, D_k) and values v (B, Tk, D_v).
func (a *BilinearAttention) ProjectKeys(g *radgen.Graph, k, v *radgen.Tensor) BilinearKeys {
	c := a.Config
	if k.Rank() != 3 || v.Rank() != 3 || k.Dim(2) != c.DKey || v.Dim(2) != c.DValue || k.Dim(0) != v.Dim(0) || k.Dim(1) != v.Dim(1) {
		panic(fmt.Sprintf("mesh: bilinear attention keys %v and values %v with sizes %+v", k.Shape(), v.Shape(), c))
	}
	return BilinearKeys{K: g.ReLU(a.Key.Forward(g, k)), V: g.ReLU(a.Value.Forward(g, v))}
}

// Attend is Forward over keys and values already projected by
// ProjectKeys: queries q (B, Tq, D_q), kv.K and kv.V (B, Tk, D_B). It
// returns the output (B, Tq, D_B) and the spatial attention α_s (B, Tq, Tk).
func (a *BilinearAttention) Attend(g *radgen.Graph, q *radgen.Tensor, kv BilinearKeys, mask *radgen.Tensor) (out, weights *radgen.Tensor) {
	c := a.Config
	if q.Rank() != 3 || q.Dim(2) != c.DQuery || kv.K == nil || kv.V == nil || kv.K.Rank() != 3 || kv.V.Rank() != 3 ||
		kv.K.Dim(0) != q.Dim(0) || kv.V.Dim(0) != q.Dim(0) || kv.K.Dim(1) != kv.V.Dim(1) ||
		kv.K.Dim(2) != c.DBilinear || kv.V.Dim(2) != c.DBilinear {
		panic(fmt.Sprintf("mesh: bilinear attention of q %v over projected keys with sizes %+v", q.Shape(), c))
	}
	b, tq, tk, db := q.Dim(0), q.Dim(1), kv.K.Dim(1), c.DBilinear
	// Eq. 4: low-rank bilinear pooling, (B, Tq, 1, D_B) ⊙ (B, 1, Tk, D_B).
	qk := g.Reshape(g.ReLU(a.QueryKey.Forward(g, q)), b, tq, 1, db)
	bk := g.Mul(g.Reshape(kv.K, b, 1, tk, db), qk) // (B, Tq, Tk, D_B)
	qv := g.Reshape(g.ReLU(a.QueryValue.Forward(g, q)), b, tq, 1, db)
	bv := g.Mul(g.Reshape(kv.V, b, 1, tk, db), qv) // (B, Tq, Tk, D_B)

	mid := g.ReLU(a.Mid.Forward(g, bk))                       // Eq. 5: (B, Tq, Tk, D_mid)
	scores := g.Reshape(a.Spatial.Forward(g, mid), b, tq, tk) // (B, Tq, Tk)
	if mask != nil {
		ms := mask.Shape()
		if len(ms) != 3 || ms[0] != b || (ms[1] != 1 && ms[1] != tq) || ms[2] != tk {
			panic(fmt.Sprintf("mesh: bilinear attention mask %v for (%d, %d, %d)", ms, b, tq, tk))
		}
		scores = g.MaskedFill(scores, mask, -1e9)
	}
	alpha := g.Softmax(scores) // Eq. 6: spatial attention over the keys
	ad := g.Dropout(alpha, c.Dropout)
	pooled := g.MatMul(g.Reshape(ad, b, tq, 1, tk), bv, false) // Σ_j α_s[i,j] B_v[i,j]: (B, Tq, 1, D_B)
	pooled = g.Reshape(pooled, b, tq, db)

	// Eq. 7: squeeze (mean over the unmasked keys) and excitation.
	avg := g.MatMul(g.Reshape(meanWeights(q, mask, b, tq, tk), b, tq, 1, tk), mid, false) // (B, Tq, 1, D_mid)
	beta := g.Sigmoid(a.Channel.Forward(g, g.Reshape(avg, b, tq, c.DMid)))                // (B, Tq, D_B)
	return g.Mul(beta, pooled), alpha                                                     // Eq. 8
}

// meanWeights returns the constant (B, Tq, Tk) weights of a masked mean over
// the keys, in like's dtype: 1/count on unmasked keys, 1/Tk on every key of
// a fully masked row.
func meanWeights(like, mask *radgen.Tensor, b, tq, tk int) *radgen.Tensor {
	w := make([]float64, b*tq*tk)
	var mv []float64
	if mask != nil {
		mv = mask.Float64s()
	}
	for i := range b {
		for r := range tq {
			row := w[(i*tq+r)*tk : (i*tq+r+1)*tk]
			off := -1
			if mv != nil {
				mr := r
				if mask.Dim(1) == 1 {
					mr = 0
				}
				off = (i*mask.Dim(1) + mr) * tk
			}
			n := 0
			for j := range row {
				if off < 0 || mv[off+j] != 0 {
					row[j] = 1
					n++
				}
			}
			if n == 0 {
				for j := range row {
					row[j] = 1
				}
				n = tk
			}
			for j := range row {
				row[j] /= float64(n)
			}
		}
	}
	t := radgen.FromFloat64(w, b, tq, tk)
	if !like.Is64() {
		t = t.To32().To(like.Device())
	}
	return t
}

var _ radgen.Module = (*BilinearAttention)(nil)
