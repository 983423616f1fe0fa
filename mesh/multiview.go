package mesh

// Layer-wise multi-view decoding: which encoder levels each decoder layer
// attends to, and the soft integration of that view with the global one.
//
// Reference: Liu, Ren, Zhao, You, Ma, Wu and Sun, "Rethinking and Improving
// Natural Language Generation with Layer-Wise Multi-View Decoding"
// (arXiv 2005.08081), §3.3, Eqs. 5 and 8. No code was published; this
// follows the paper's definitions. In its routing ablation (Table 4, IWSLT
// DE-EN BLEU) every strategy helps and GCA helps most: GCA 35.9, GPA 35.2,
// FGA 35.0, FMA 35.4, AMA 35.4; soft integration with continued learning
// (Table 5) gives 35.9 where direct replacement gives 33.6.

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// Routing names a strategy g_i(S) of routing the encoder levels
// S = {S_1, …, S_N} to decoder layer i (Liu et al., §3.3.3). The zero value
// is the conventional single view: every decoder layer reads S_N alone
// (Eq. 3).
type Routing string

const (
	// RoutingNone is the conventional decoder: T_i = f(T_{i−1}, S_N) (Eq. 3).
	RoutingNone Routing = ""
	// RoutingGCA is granularity consistent attention, g_i(S) = S_{N−i+1}: the
	// first decoder layer sees the coarsest level, the last the finest.
	RoutingGCA Routing = "gca"
	// RoutingGPA is granularity parallel attention, g_i(S) = S_i.
	RoutingGPA Routing = "gpa"
	// RoutingFGA is fine-grained attention, g_i(S) = S_1 for every layer.
	RoutingFGA Routing = "fga"
	// RoutingFMA is full matching attention, g_i(S) = Σ_j (W_ij S_j + b_ij),
	// a learnable linear mix per decoder layer.
	RoutingFMA Routing = "fma"
	// RoutingAMA is adaptive matching attention, g_i(S) = Σ_j α_ij S_j with
	// Σ_j α_ij = 1 predicted by attention over the levels.
	RoutingAMA Routing = "ama"
)

// Routings lists the strategies other than RoutingNone, in the paper's order.
var Routings = []Routing{RoutingGCA, RoutingGPA, RoutingFGA, RoutingFMA, RoutingAMA}

// Valid reports whether r is a known routing (RoutingNone included).
func (r Routing) Valid() bool {
	switch r {
	case RoutingNone, RoutingGCA, RoutingGPA, RoutingFGA, RoutingFMA, RoutingAMA:
		return true
	}
	return false
}

// MultiView is the source of one decoder layer under layer-wise multi-view
// decoding: LN(g_i(S) + S_N) (Liu et al., Eq. 8), the decoder layer's
// cross-attention keys and values. Parameters (names relative to the
// module): norm.gamma, norm.beta (the LN of Eq. 8, initialised to the
// identity); for FMA mix.{j}.weight and mix.{j}.bias, the W_ij, b_ij of
// level j+1; for AMA score.weight (N, D) and score.bias (N), the independent
// vector of each level that predicts its weight.
//
// A MultiView is safe for concurrent use by NoGrad graphs.
type MultiView struct {
	Routing Routing
	Layer   int              // decoder layer i − 1, 0-based
	Levels  int              // encoder levels N
	Gamma   *radgen.Tensor   // (D): norm.gamma, of the LN of Eq. 8
	Beta    *radgen.Tensor   // (D): norm.beta
	Eps     float64          // that layer norm's eps
	Mix     []*radgen.Linear // FMA: one D → D map per level
	Score   *radgen.Linear   // AMA: D → N, row j scores level j+1
}

// NewMultiView returns the source module of decoder layer layer (0-based)
// over levels encoder levels of width d. Learnable mixes start from
// PyTorch's default Linear initialisation drawn from rng. It panics if
// r is RoutingNone or unknown or layer is outside [0, levels).
func NewMultiView(r Routing, layer, levels, d int, rng *rand.Rand) *MultiView {
	if r == RoutingNone || !r.Valid() {
		panic(fmt.Sprintf("mesh: multi-view routing %q", r))
	}
	if levels <= 0 || layer < 0 || layer >= levels {
		panic(fmt.Sprintf("mesh: decoder layer %d over %d encoder levels", layer, levels))
	}
	v := &MultiView{Routing: r, Layer: layer, Levels: levels, Gamma: radgen.NewParam(d), Beta: radgen.NewParam(d), Eps: 1e-5}
	radgen.Fill(v.Gamma, 1)
	switch r {
	case RoutingFMA:
		for range levels {
			v.Mix = append(v.Mix, radgen.NewLinear(d, d, true, rng))
		}
	case RoutingAMA:
		v.Score = radgen.NewLinear(d, levels, true, rng)
	}
	return v
}

// NewMultiViews returns one MultiView per decoder layer, layers ≤ levels.
func NewMultiViews(r Routing, layers, levels, d int, rng *rand.Rand) []*MultiView {
	out := make([]*MultiView, layers)
	for i := range out {
		out[i] = NewMultiView(r, i, levels, d, rng)
	}
	return out
}

// Route returns g_i(S) (B, N, D) from the encoder levels S_1..S_N, each
// (B, N, D).
func (v *MultiView) Route(g *radgen.Graph, levels []*radgen.Tensor) *radgen.Tensor {
	if len(levels) != v.Levels {
		panic(fmt.Sprintf("mesh: %d encoder levels for a multi-view module of %d", len(levels), v.Levels))
	}
	n := v.Levels
	switch v.Routing {
	case RoutingGCA:
		return levels[n-1-v.Layer] // S_{N−i+1}, i = Layer+1
	case RoutingGPA:
		return levels[v.Layer] // S_i
	case RoutingFGA:
		return levels[0] // S_1
	case RoutingFMA:
		var sum *radgen.Tensor
		for j, s := range levels {
			term := v.Mix[j].Forward(g, s) // W_ij S_j + b_ij
			if sum == nil {
				sum = term
			} else {
				sum = g.Add(sum, term)
			}
		}
		return sum
	case RoutingAMA:
		// α_ij at each source position: softmax over levels j of
		// w_ij·S_j + c_ij, so Σ_j α_ij = 1 position by position.
		var scores []*radgen.Tensor
		for j, s := range levels {
			w := g.Slice(v.Score.Weight, 0, j, j+1) // (1, D)
			sc := g.MatMul(s, w, true)              // (B, N, 1)
			scores = append(scores, g.Add(sc, g.Slice(v.Score.Bias, 0, j, j+1)))
		}
		alpha := g.Softmax(g.Concat(2, scores...)) // (B, N, levels)
		var sum *radgen.Tensor
		for j, s := range levels {
			term := g.Mul(s, g.Slice(alpha, 2, j, j+1))
			if sum == nil {
				sum = term
			} else {
				sum = g.Add(sum, term)
			}
		}
		return sum
	}
	panic(fmt.Sprintf("mesh: multi-view routing %q", v.Routing))
}

// Forward returns the soft-integrated source LN(g_i(S) + S_N) (Eq. 8),
// (B, N, D), with the standard layer norm (biased variance, eps inside the
// square root) of Ba et al. that the paper cites.
func (v *MultiView) Forward(g *radgen.Graph, levels []*radgen.Tensor) *radgen.Tensor {
	sum := g.Add(v.Route(g, levels), levels[len(levels)-1])
	return g.LayerNorm(sum, v.Gamma, v.Beta, v.Eps, radgen.NormStandard)
}

// VisitParams implements radgen.Module.
func (v *MultiView) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("norm.gamma", v.Gamma)
	visit("norm.beta", v.Beta)
	for j, l := range v.Mix {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("mix.%d.", j), visit))
	}
	if v.Score != nil {
		v.Score.VisitParams(radgen.Prefixed("score.", visit))
	}
}
