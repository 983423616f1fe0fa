package mesh

// Incremental decoding for the Meshed-Memory Transformer (Cornia et al.
// 2020): M²'s attention of one new position per row over a key/value
// cache, its attention over a source projected once per study, the meshed
// decoder layer of Eq. 9 for one position, and a decoding state over a
// MeshedDecoder that follows the published stateful decoder.
//
// Everything is written in the root package's ops, so it runs on the
// engine its inputs live on, and reaches Eq. 1 through the one function
// that Forward uses (ScaledDotProductAttention.attendProjected); the
// meshed combination (Eqs. 6 and 8) and the feed-forward end of Eq. 9 are
// MeshedLayer.Forward's own.

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen"
)

// Step is Forward for one new position per row: x (R, D) holds each row's
// query input, which also supplies the new position's key and value; the
// row attends over its cached positions, the new one and the memory slots
// (Eq. 3), if any. mask, if not nil, is an M² mask (R|1, 1, 1, c.Len()+1),
// zero = masked, over each row's positions oldest first, the new one
// last; it never covers the slots. It returns (R, D) and appends the new
// keys (h·d_k wide) and values (h·d_v wide) to c, whose Rows() must be R.
func (a *ScaledDotProductAttention) Step(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor {
	if x.Rank() != 2 || x.Dim(1) != a.Width() {
		panic(fmt.Sprintf("mesh: attention step wants (R, %d), got %v", a.Width(), x.Shape()))
	}
	var unmasked *radgen.Tensor
	if mask != nil {
		unmasked = m2KeepMask(mask, x.Dim(0), 1, c.Len()+1, a.Slots())
	}
	return a.step(g, x, c, unmasked)
}

// step is Step with the mask already in radgen.MaskedFill form (see
// m2KeepMask) on x's device, or nil.
func (a *ScaledDotProductAttention) step(g *radgen.Graph, x *radgen.Tensor, c *KVCache, unmasked *radgen.Tensor) *radgen.Tensor {
	r := x.Dim(0)
	var qkv [3]*radgen.Tensor
	g.Linears(qkv[:], []*radgen.Tensor{x, x, x}, []*radgen.Linear{a.FCQ, a.FCK, a.FCV}, false) // one batch of products
	c.append(qkv[1], qkv[2])
	var kh, vh *radgen.Tensor
	if a.Slots() == 0 {
		kh, vh = c.gatherHeads(g, false, a.Heads), c.gatherHeads(g, true, a.Heads)
	} else {
		k, v := a.withSlots(g, c.gather(g, false), c.gather(g, true))
		kh, vh = a.heads(g, k, a.DK), a.heads(g, v, a.DV)
	}
	q := g.Reshape(qkv[0], r, 1, a.Heads*a.DK)
	out, _ := a.attendProjected(g, q, kh, vh, unmasked, false)
	return g.Reshape(out, r, a.Width())
}

// M2Source is an M² attention's keys and values over a source (the
// encoder output of a batch of studies), projected once, memory slots
// appended (Eq. 3), with the source's mask: the part of Forward that every
// decoding step of every row of the studies shares.
type M2Source struct {
	keys, values *radgen.Tensor // split into heads: (B, h, N+m, d_k), (B, h, N+m, d_v)
	unmasked     *radgen.Tensor // (B|1, 1, 1, N+m), zero = masked; nil: nothing is
	width        int            // N
}

// Studies returns B.
func (s *M2Source) Studies() int { return s.keys.Dim(0) }

// Width returns N, the source positions of each study (memory slots not
// counted).
func (s *M2Source) Width() int { return s.width }

// Project returns the keys and values of the source src (B, N, D) with its
// mask (B|1, 1, 1, N), zero = masked, or nil for none.
func (a *ScaledDotProductAttention) Project(g *radgen.Graph, src, mask *radgen.Tensor) *M2Source {
	if src.Rank() != 3 || src.Dim(2) != a.Width() {
		panic(fmt.Sprintf("mesh: attention source %v, want (B, N, %d)", src.Shape(), a.Width()))
	}
	k, v := a.withSlots(g, a.FCK.Forward(g, src), a.FCV.Forward(g, src))
	s := &M2Source{keys: a.heads(g, k, a.DK), values: a.heads(g, v, a.DV), width: src.Dim(1)}
	if mask != nil {
		s.unmasked = m2KeepMask(mask, src.Dim(0), 1, src.Dim(1), a.Slots())
	}
	return s
}

// Attend is Forward for one query per row over a projected source: row i
// of q (R, D) attends to the source of study study[i]. When the rows are
// the studies' rows in order, R/B each (as package decode keeps them), the
// product reads each study's keys and values once for all of its rows;
// otherwise they are gathered per row. It returns (R, D) and, if weights
// is true, the attention probabilities (R, h, N+m), memory slots last.
func (a *ScaledDotProductAttention) Attend(g *radgen.Graph, q *radgen.Tensor, src *M2Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	if q.Rank() != 2 || q.Dim(1) != a.Width() || len(study) != q.Dim(0) {
		panic(fmt.Sprintf("mesh: attention of %v queries for %d rows", q.Shape(), len(study)))
	}
	return a.attendSource(g, a.FCQ.Forward(g, q), src, study, weights)
}

// attendSource is Attend for projected queries qp (R, h·d_k).
func (a *ScaledDotProductAttention) attendSource(g *radgen.Graph, qp *radgen.Tensor, src *M2Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	r, hk := qp.Dim(0), qp.Dim(1)
	b, w := src.Studies(), src.keys.Dim(2)
	var ctx *radgen.Tensor
	if per, ok := grouped(study, b); ok {
		ctx, probs = a.attendProjected(g, g.Reshape(qp, b, per, hk), src.keys, src.values, src.unmasked, weights)
	} else {
		for _, s := range study {
			if s < 0 || s >= b {
				panic(fmt.Sprintf("mesh: row of study %d over a source of %d", s, b))
			}
		}
		k, v := g.IndexSelect(src.keys, 0, study), g.IndexSelect(src.values, 0, study)
		unmasked := src.unmasked
		if unmasked != nil && unmasked.Dim(0) > 1 {
			unmasked = g.IndexSelect(unmasked, 0, study)
		}
		ctx, probs = a.attendProjected(g, g.Reshape(qp, r, 1, hk), k, v, unmasked, weights)
	}
	if probs != nil {
		probs = g.Reshape(g.Permute(probs, 0, 2, 1, 3), r, a.Heads, w) // (B, h, per, W) → (R, h, W)
	}
	return g.Reshape(ctx, r, a.Width()), probs
}

// Project returns the cross-attention's keys and values over the encoder
// levels (B, N, R, D) that the layer reads, with the encoder mask (B|1, 1,
// 1, R), zero = masked, or nil: one source of N·B studies, level i of
// study b at i·B + b, for [MeshedLayer.Step]. Level-major order lets the
// step attend over every level in one product without reordering its
// queries.
func (l *MeshedLayer) Project(g *radgen.Graph, levels, encMask *radgen.Tensor) *M2Source {
	n := len(l.Alpha)
	if levels.Rank() != 4 || levels.Dim(1) != n {
		panic(fmt.Sprintf("mesh: meshed layer of %d levels over encoder output %v", n, levels.Shape()))
	}
	b, r, d := levels.Dim(0), levels.Dim(2), levels.Dim(3)
	mask := encMask
	if mask != nil && mask.Dim(0) > 1 {
		idx := make([]int, n*b) // (B, 1, 1, R) → (N·B, 1, 1, R)
		for i := range idx {
			idx[i] = i % b
		}
		mask = g.IndexSelect(mask, 0, idx)
	}
	if n > 1 {
		levels = g.Permute(levels, 1, 0, 2, 3) // (N, B, R, D)
	}
	return l.EncAtt.Attention.Project(g, g.Reshape(levels, n*b, r, d), mask)
}

// Step is Forward (Eq. 9) for one new position per row. y (R, D) holds
// each row's layer input; self caches the rows' self-attention keys and
// values (self.Rows() == R); selfMask (R|1, 1, 1, self.Len()+1), nonzero =
// masked, covers each row's cached positions and the new one, or is nil;
// src is the layer's projected source ([MeshedLayer.Project]), which row i
// reads at study study[i]. pad (R, 1), 1 at real tokens and 0 at padding,
// may be nil. It returns (R, D) and, if weights is true, the
// cross-attention probabilities (R, N, h, W+m) of every level and head.
func (l *MeshedLayer) Step(g *radgen.Graph, y, pad *radgen.Tensor, self *KVCache, selfMask *radgen.Tensor, src *M2Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	sa := l.SelfAtt.Attention
	if y.Rank() != 2 || y.Dim(1) != sa.Width() || len(study) != y.Dim(0) {
		panic(fmt.Sprintf("mesh: meshed layer step of %v inputs for %d rows", y.Shape(), len(study)))
	}
	var unmasked *radgen.Tensor
	if selfMask != nil {
		unmasked = m2KeepMask(selfMask, y.Dim(0), 1, self.Len()+1, sa.Slots())
	}
	return l.step(g, y, pad, self, unmasked, src, study, weights)
}

// step is Step with the self-attention mask in radgen.MaskedFill form on
// y's device, or nil.
func (l *MeshedLayer) step(g *radgen.Graph, y, pad *radgen.Tensor, self *KVCache, unmasked *radgen.Tensor, src *M2Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	n := len(l.Alpha)
	r, d := y.Dim(0), y.Dim(1)
	if src.Studies()%n != 0 {
		panic(fmt.Sprintf("mesh: source of %d studies for a layer of %d levels", src.Studies(), n))
	}
	// S = AddNorm(S_mask(Y)) ⊙ pad.
	sl := l.SelfAtt
	s := sl.Norm.Forward(g, g.Add(y, g.Dropout(sl.Attention.step(g, y, self, unmasked), sl.Dropout)))
	if pad != nil {
		s = g.Mul(s, pad)
	}
	// C_i = AddNorm(C(X̃ⁱ, S)) ⊙ pad (Eq. 7), every level in one product:
	// query i·R + k is row k over level i, source i·B + study[k]. When the
	// rows are grouped by study, so are the queries over each source.
	b := src.Studies() / n
	rowOf, srcOf := make([]int, n*r), make([]int, n*r)
	for i := range n {
		for k, st := range study {
			if st < 0 || st >= b {
				panic(fmt.Sprintf("mesh: row of study %d over a source of %d", st, b))
			}
			rowOf[i*r+k], srcOf[i*r+k] = k, i*b+st
		}
	}
	el := l.EncAtt
	qp := el.Attention.FCQ.Forward(g, s)
	if n > 1 {
		qp = g.IndexSelect(qp, 0, rowOf)
	}
	c, p := el.Attention.attendSource(g, qp, src, srcOf, weights)
	// (N, R, D) + (1, R, D): every level's residual is S.
	c = el.Norm.Forward(g, g.Add(g.Reshape(g.Dropout(c, el.Dropout), n, r, d), g.Reshape(s, 1, r, d)))
	var pad3 *radgen.Tensor
	if pad != nil {
		pad3 = g.Reshape(pad, 1, r, 1)
		c = g.Mul(c, pad3)
		pad3 = g.Reshape(pad, r, 1, 1)
	}
	cs := make([]*radgen.Tensor, n)
	for i := range n {
		ci := c
		if n > 1 {
			ci = g.Slice(c, 0, i, i+1)
		}
		cs[i] = g.Reshape(ci, r, 1, d)
	}
	out = g.Reshape(l.meshFeedForward(g, g.Reshape(s, r, 1, d), cs, pad3), r, d)
	if p != nil { // (N·R, h, W) in query order → (R, N, h, W)
		h, w := p.Dim(1), p.Dim(2)
		p = g.Reshape(g.Permute(g.Reshape(p, n, r, h*w), 1, 0, 2), r, n, h, w)
	}
	return out, p
}

// MeshedSteps is the incremental decoding state of a batch of studies
// under a [MeshedDecoder]: M²'s stateful decoder, one token per row and
// step. It keeps
//   - each layer's self-attention keys and values, projected once per
//     position and addressed through an ancestry ([KVCache]), so that
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
	self    []*KVCache // per layer
	src     []*M2Source
	study   []int    // row → study
	padded  [][]bool // padded[r][j]: position j of row r was <pad>
	t       int
	regions int
	probs   *radgen.Tensor // the last layer's cross-attention at the last step, (R, N, h, W+m)
}

// Start returns a decoding state with one row per study over the encoder
// levels (B, N, R, D) with the encoder mask (B|1, 1, 1, R), nonzero =
// masked, or nil. The sources every layer reads are projected here, once.
func (dec *MeshedDecoder) Start(g *radgen.Graph, levels, encMask *radgen.Tensor) *MeshedSteps {
	return dec.StartWith(g, levels, encMask, nil)
}

// StartWith is Start with the layers' self-attention caches given: one
// per layer, reset here, such as those of an earlier decoding (whose
// buffers have grown to a report's length), or nil for new ones.
func (dec *MeshedDecoder) StartWith(g *radgen.Graph, levels, encMask *radgen.Tensor, self []*KVCache) *MeshedSteps {
	if levels.Rank() != 4 {
		panic(fmt.Sprintf("mesh: encoder levels %v, want (B, N, R, D)", levels.Shape()))
	}
	if self != nil && len(self) != len(dec.Layers) {
		panic(fmt.Sprintf("mesh: %d self-attention caches for %d layers", len(self), len(dec.Layers)))
	}
	b := levels.Dim(0)
	s := &MeshedSteps{dec: dec, study: make([]int, b), padded: make([][]bool, b), regions: levels.Dim(2)}
	for i := range s.study {
		s.study[i] = i
	}
	for i, src := range dec.Sources(g, levels) {
		var c *KVCache
		if self != nil {
			c = self[i]
			c.Reset(b)
		} else {
			c = NewKVCache(b)
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
		panic(fmt.Sprintf("mesh: step %d of %d tokens for %d rows with a positional table for %d", s.t, len(tokens), r, dec.MaxLen()))
	}
	positions := make([]int, r)
	padNow := false
	for i, tok := range tokens {
		if tok < 0 || tok >= v {
			panic(fmt.Sprintf("mesh: token %d outside the vocabulary [0, %d)", tok, v))
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
		var unmasked *radgen.Tensor
		if selfMask != nil {
			unmasked = m2KeepMask(selfMask, r, 1, s.t+1, l.SelfAtt.Attention.Slots()).To(dev)
		}
		x, s.probs = l.step(g, x, pad, s.self[i], unmasked, s.src[i], s.study, i == last)
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
		return fmt.Errorf("mesh: reorder to zero rows")
	}
	for _, r := range src {
		if r < 0 || r >= len(s.study) {
			return fmt.Errorf("mesh: reorder index %d of %d rows", r, len(s.study))
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
