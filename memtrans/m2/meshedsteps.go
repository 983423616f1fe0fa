package m2

// Incremental decoding for the Meshed-Memory Transformer (Cornia et al.
// 2020): the meshed decoder layer of Eq. 9 for one position, and a
// decoding state over a MeshedDecoder that follows the published stateful
// decoder.
//
// Everything is written in the root package's ops, so it runs on the
// engine its inputs live on. The layer's step is its forward pass with the
// attentions' steps in place of their Forward ([AttentionLayer.StepMasked],
// [mesh.MeshedCrossAttention.Step]), and the same feed-forward end of Eq. 9.

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Project returns the keys and values over the encoder levels (B, N, R, D)
// that the layer's cross-attention reads, with the encoder mask (B|1, 1,
// 1, R), zero = masked, or nil: the source of [MeshedLayer.Step]
// ([mesh.MeshedCrossAttention.Project]).
func (l *MeshedLayer) Project(g *radgen.Graph, levels, encMask *radgen.Tensor) *mesh.Source {
	return l.Mesh.Project(g, levels, encMask)
}

// Step is Forward (Eq. 9) for one new position per row. y (R, D) holds
// each row's layer input; self caches the rows' self-attention keys and
// values (self.Rows() == R); selfMask (R|1, 1, 1, self.Len()+1), zero =
// masked, on any device, covers each row's cached positions and the new
// one, or is nil; src is the layer's projected source
// ([MeshedLayer.Project]), which row i reads at study study[i]. pad
// (R, 1), 1 at real tokens and 0 at padding, may be nil. It returns (R, D)
// and, if weights is true, the cross-attention probabilities (R, N, h,
// W+m) of every level and head.
func (l *MeshedLayer) Step(g *radgen.Graph, y, pad *radgen.Tensor, self *mesh.KVCache, selfMask *radgen.Tensor, src *mesh.Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	if y.Rank() != 2 || y.Dim(1) != l.SelfAtt.Attention.Width() || len(study) != y.Dim(0) {
		panic(fmt.Sprintf("m2: meshed layer step of %v inputs for %d rows", y.Shape(), len(study)))
	}
	r, d := y.Dim(0), y.Dim(1)
	// S = AddNorm(S_mask(Y)) ⊙ pad.
	s := l.SelfAtt.StepMasked(g, y, self, selfMask)
	if pad != nil {
		s = g.Mul(s, pad)
	}
	// M = M_mesh(X̃, S) ⊙ pad, every level in one product (Eqs. 6–8).
	m, probs := l.Mesh.Step(g, s, pad, src, study, weights)
	var pad3 *radgen.Tensor
	if pad != nil {
		pad3 = g.Reshape(pad, r, 1, 1)
	}
	return g.Reshape(l.feedForward(g, g.Reshape(m, r, 1, d), pad3), r, d), probs
}

// MeshedSteps is the incremental decoding state of a batch of studies
// under a [MeshedDecoder]: M²'s stateful decoder, one token per row and
// step. It keeps
//   - each layer's self-attention keys and values, projected once per
//     position and addressed through an ancestry ([mesh.KVCache]), so that
//     Reorder moves indices, never cached vectors;
//   - each layer's cross-attention keys and values over its encoder levels
//     (every level when meshed, the routed view otherwise), projected once
//     per study with the encoder mask and read by all of the study's rows;
//   - which positions of each row were <pad>.
//
// Step t (from 0) uses positional row t+1 whatever the token, as the
// published decoder's running_seq does; a <pad> token is masked as a key
// for its own and every later step of its row and its row's output is
// zero (running_mask_self_attention and mask_pad), as in Forward, so its
// log-probabilities are uniform.
//
// A MeshedSteps belongs to one decoding and one goroutine; the decoder it
// came from may serve many.
type MeshedSteps struct {
	dec     *MeshedDecoder
	self    []*mesh.KVCache // per layer
	src     []*mesh.Source
	study   []int    // row → study
	padded  [][]bool // padded[r][j]: position j of row r was <pad>
	t       int
	regions int
	probs   *radgen.Tensor // the last layer's cross-attention at the last step, (R, N, h, W+m)
}

// Start returns a decoding state with one row per study over the encoder
// levels (B, N, R, D) with the encoder mask (B|1, 1, 1, R), zero =
// masked, or nil. The sources every layer reads are projected here, once.
func (dec *MeshedDecoder) Start(g *radgen.Graph, levels, encMask *radgen.Tensor) *MeshedSteps {
	return dec.StartWith(g, levels, encMask, nil)
}

// StartWith is Start with the layers' self-attention caches given: one
// per layer, reset here, such as those of an earlier decoding (whose
// buffers have grown to a report's length), or nil for new ones.
func (dec *MeshedDecoder) StartWith(g *radgen.Graph, levels, encMask *radgen.Tensor, self []*mesh.KVCache) *MeshedSteps {
	if levels.Rank() != 4 {
		panic(fmt.Sprintf("m2: encoder levels %v, want (B, N, R, D)", levels.Shape()))
	}
	if self != nil && len(self) != len(dec.Layers) {
		panic(fmt.Sprintf("m2: %d self-attention caches for %d layers", len(self), len(dec.Layers)))
	}
	b := levels.Dim(0)
	s := &MeshedSteps{dec: dec, study: make([]int, b), padded: make([][]bool, b), regions: levels.Dim(2)}
	for i := range s.study {
		s.study[i] = i
	}
	for i, src := range dec.Sources(g, levels) {
		var c *mesh.KVCache
		if self != nil {
			c = self[i]
			c.Reset(b)
		} else {
			c = mesh.NewKVCache(b)
		}
		s.self = append(s.self, c)
		s.src = append(s.src, dec.Layers[i].Project(g, src, encMask))
	}
	return s
}

// Rows returns the number of decoding rows.
func (s *MeshedSteps) Rows() int { return len(s.study) }

// Len returns the number of tokens each row has consumed.
func (s *MeshedSteps) Len() int { return s.t }

// Step consumes one token per row (len(tokens) == Rows()) and returns the
// log-probabilities of the next token, (Rows(), V), on the device of the
// encoder levels. It panics on a token outside the vocabulary or a step
// beyond the positional table (Len() == MaxLen()).
func (s *MeshedSteps) Step(g *radgen.Graph, tokens []int) *radgen.Tensor {
	dec := s.dec
	r, v := len(s.study), dec.WordEmb.Dim(0)
	if len(tokens) != r || s.t >= dec.MaxLen() {
		panic(fmt.Sprintf("m2: step %d of %d tokens for %d rows with a positional table for %d", s.t, len(tokens), r, dec.MaxLen()))
	}
	positions := make([]int, r)
	padNow := false
	for i, tok := range tokens {
		if tok < 0 || tok >= v {
			panic(fmt.Sprintf("m2: token %d outside the vocabulary [0, %d)", tok, v))
		}
		positions[i] = s.t + 1
		s.padded[i] = append(s.padded[i], tok == dec.Pad)
		padNow = padNow || tok == dec.Pad
	}
	x := g.Reshape(dec.embed(g, tokens, positions, r, 1), r, dec.WordEmb.Dim(1))
	dev := x.Device()
	var pad *radgen.Tensor
	if padNow {
		pad = radgen.Zeros(r, 1)
		for i, tok := range tokens {
			if tok != dec.Pad {
				pad.Data()[i] = 1
			}
		}
		if x.Is64() {
			pad = pad.To64()
		}
		pad = pad.To(dev)
	}
	selfMask := s.selfMask() // on the host; nil when no position is <pad>
	last := len(dec.Layers) - 1
	for i, l := range dec.Layers {
		x, s.probs = l.Step(g, x, pad, s.self[i], selfMask, s.src[i], s.study, i == last)
	}
	s.t++
	return dec.logProbs(g, x)
}

// selfMask returns the mask (R, 1, 1, Len()+1) of the positions whose
// token was <pad>, zero = masked, on the host, or nil when there is none.
func (s *MeshedSteps) selfMask() *radgen.Tensor {
	found := false
	for _, p := range s.padded {
		found = found || slices.Contains(p, true)
	}
	if !found {
		return nil
	}
	t := s.t + 1
	mask := radgen.Zeros(len(s.padded), 1, 1, t)
	m := mask.Data()
	for r, p := range s.padded {
		for j, pad := range p {
			if !pad {
				m[r*t+j] = 1
			}
		}
	}
	return mask
}

// Reorder makes row i continue the history of row src[i], for every
// i < len(src); afterwards Rows() == len(src). Indices may repeat.
func (s *MeshedSteps) Reorder(src []int) error {
	if len(src) == 0 {
		return fmt.Errorf("m2: reorder to zero rows")
	}
	for _, r := range src {
		if r < 0 || r >= len(s.study) {
			return fmt.Errorf("m2: reorder index %d of %d rows", r, len(s.study))
		}
	}
	for _, c := range s.self {
		if err := c.Reorder(src); err != nil {
			return err
		}
	}
	study, padded := make([]int, len(src)), make([][]bool, len(src))
	for i, r := range src {
		study[i] = s.study[r]
		padded[i] = slices.Clone(s.padded[r])
	}
	s.study, s.padded, s.probs = study, padded, nil
	return nil
}

// Attention returns, after a Step and before any Reorder, the last
// layer's cross-attention over each study's R regions, averaged over the
// heads and over the encoder levels it reads (the meshed gates weigh the
// levels per channel, so no single weighting of the levels is exact),
// (Rows(), R), on the device of the encoder levels; masked regions weigh
// 0. It returns nil when there is none.
func (s *MeshedSteps) Attention(g *radgen.Graph) *radgen.Tensor {
	if s.probs == nil {
		return nil
	}
	r, n, h, w := s.probs.Dim(0), s.probs.Dim(1), s.probs.Dim(2), s.probs.Dim(3)
	avg := radgen.Zeros(1, n*h)
	radgen.Fill(avg, 1/float64(n*h))
	if s.probs.Is64() {
		avg = avg.To64()
	}
	p := g.Permute(g.Reshape(s.probs, r, n*h, w), 0, 2, 1) // (R, W+m, N·h)
	mean := g.Reshape(g.Linear(p, avg.To(s.probs.Device()), nil), r, w)
	return g.Slice(mean, 1, 0, s.regions)
}
