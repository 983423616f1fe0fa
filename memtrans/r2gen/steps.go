package r2gen

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
)

// Decoding is the incremental decoding state of a Model built
// from the modules' own steps — [mesh.MultiHeadAttention.Step] and
// [mesh.MultiHeadAttention.Attend], [relmem.Relational.Step], the Mem2Mem
// read and write, [DecoderLayer.Step] — so it runs on whatever device the
// Model's parameters and the features live on, every variant
// included (BASE, BASE+RM, Mem2Mem, the multi-view routings). It keeps
//   - each layer's self-attention keys and values, written once per
//     position and addressed through an ancestry (mesh.KVCache), so Reorder
//     moves indices, never cached vectors;
//   - each layer's source keys and values, projected once per study and
//     shared by the study's rows;
//   - each row's memory (relational or Mem2Mem).
//
// A Decoding belongs to one goroutine; the Model may serve many
// concurrently.
type Decoding struct {
	m       *Model
	g       *radgen.Graph
	studies int
	t       int   // positions consumed
	study   []int // row → study
	spare   []int // the previous study slice, reused by Reorder
	self    []*mesh.KVCache
	cross   []*mesh.Source // per decoder layer
	n       int            // source positions per study
	// memory holds each row's memory, (rows, S, D), from step to step;
	// it holds nothing in BASE.
	memory radgen.Carried

	// Mem2Mem: each study's encoder states H (B, N, D) and context keys
	// W_k H (B, N, d_a).
	m2mH, m2mKeys *radgen.Tensor

	probs *radgen.Tensor // the last step's last-layer source attention (rows, h, N); nil after Reorder

	// deltas are the decoder layers' γ̂ and β̂ for the step's memory; nil
	// without a memory.
	deltas []NormDeltas

	// space holds each step's results on the CPU, in its arena: a step's
	// tensors (the memory, the attention) stay valid through the next
	// step, which is as long as they are read. It also holds the caches
	// of self.
	space *arch.Workspace
}

var (
	_ decode.Model             = (*Decoding)(nil)
	_ decode.AttentionRecorder = (*Decoding)(nil)
)

// NewDecoding encodes visual features (B, N, d_vf), on the device
// of the model's parameters, and returns a decoding state with one
// row per study. The steps' graph takes opts.
func (m *Model) NewDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (*Decoding, error) {
	c := m.config
	if feats.Rank() != 3 || feats.Dim(2) != c.DVisual || feats.Dim(0) == 0 || feats.Dim(1) == 0 {
		return nil, fmt.Errorf("r2gen: visual features %v, want (B, N, %d)", feats.Shape(), c.DVisual)
	}
	if feats.Is64() != m.Logit.Weight.Is64() {
		if feats.Is64() {
			feats = feats.To32()
		} else {
			feats = feats.To64()
		}
	}
	dev := m.Logit.Weight.Device()
	if feats.Device() != dev {
		feats = feats.To(dev)
	}
	g := radgen.NoGrad(opts...)
	space := arch.TakeWorkspace()
	space.Start(g) // the encoder's results and the sources' projections outlive every step
	enc := m.Encode(g, feats)
	b := feats.Dim(0)
	s := &Decoding{m: m, g: g, studies: b, n: feats.Dim(1), study: make([]int, b), space: space}
	for i := range s.study {
		s.study[i] = i
	}
	s.self = s.space.Caches(len(m.Decoder.Layers), b)
	for i, l := range m.Decoder.Layers {
		s.cross = append(s.cross, l.SrcAttn.Project(g, enc.Sources[i]))
	}
	switch {
	case m.Memory != nil:
		m0 := m.Memory.InitMemory(b).To(dev)
		if feats.Is64() {
			m0 = m0.To64()
		}
		s.memory.Set(g, m0)
	case m.Mem2Mem != nil:
		s.memory.Set(g, enc.Bank) // M_0^(d) = M^(e) (Mem2Mem §3.2)
		s.m2mH, s.m2mKeys = enc.Out, m.Mem2Mem.ContextKeys(g, enc.Out)
	}
	if m.Memory != nil || m.Mem2Mem != nil {
		s.deltas = make([]NormDeltas, len(m.Decoder.Layers))
	}
	g.SetArena(s.space.Arena)
	return s, nil
}

// Len returns the positions the decoding has consumed.
func (s *Decoding) Len() int { return s.t }

// Release implements arch.Releaser: it gives the decoding's step space back for later decodings, once
// the strategy is done with it: the decoding steps no more.
func (s *Decoding) Release() {
	if s.space != nil {
		s.space.Release(s.g)
		s.space, s.self, s.memory, s.probs = nil, nil, radgen.Carried{}, nil
	}
}

// VocabSize implements decode.Model.
func (s *Decoding) VocabSize() int { return s.m.config.Vocab }

// Rows implements decode.Model.
func (s *Decoding) Rows() int { return len(s.study) }

// AttentionWidth implements decode.AttentionRecorder: source positions per
// study.
func (s *Decoding) AttentionWidth() int { return s.n }

// Attention implements decode.AttentionRecorder: after a Step, the last
// layer's source attention of every row, averaged over heads. It is
// computed (and copied from the device) only when asked for.
func (s *Decoding) Attention(dst []float32) error {
	if s.probs == nil {
		return nil
	}
	R, h, n := s.probs.Dim(0), s.probs.Dim(1), s.probs.Dim(2)
	if len(dst) < R*n {
		return fmt.Errorf("%w: attention of %d values into %d", decode.ErrShape, R*n, len(dst))
	}
	p := s.probs.To(radgen.CPU).Float64s()
	for r := 0; r < R; r++ {
		row := dst[r*n : (r+1)*n]
		for j := range row {
			var sum float64
			for k := 0; k < h; k++ {
				sum += p[(r*h+k)*n+j]
			}
			row[j] = float32(sum / float64(h))
		}
	}
	return nil
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *Decoding) Reorder(src []int) error {
	rows := len(s.study)
	for _, r := range src {
		if r < 0 || r >= rows {
			return fmt.Errorf("%w: reorder index %d of %d rows", decode.ErrShape, r, rows)
		}
	}
	if len(src) == 0 {
		return fmt.Errorf("%w: reorder to zero rows", decode.ErrShape)
	}
	for _, c := range s.self {
		if err := c.Reorder(src); err != nil {
			return err
		}
	}
	s.memory.Reorder(src)
	study := append(s.spare[:0], make([]int, len(src))...)
	for i, r := range src {
		study[i] = s.study[r]
	}
	s.study, s.spare = study, s.study
	s.probs = nil
	return nil
}

// Step implements decode.Model: it consumes one token per row and writes
// the next token's log-probabilities.
func (s *Decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	m, g := s.m, s.g
	c := m.config
	R, d, V := len(s.study), c.DModel, c.Vocab
	if err := arch.CheckStep(ctx, tokens, dst, R, V, s.t, c.PositionLen); err != nil {
		return err
	}
	if s.space == nil {
		return arch.ErrReleased
	}
	s.space.Arena.Next()
	x := g.Reshape(m.Embed.Forward(g, tokens, R, 1, s.t), R, d) // lut(y)·√D + PE(t)
	var memory *radgen.Tensor                                   // (R, S·D)
	switch {
	case m.Memory != nil:
		next := m.Memory.Step(g, x, s.memory.Value(g)) // R2Gen Eqs. 6–10
		s.memory.Set(g, next)
		memory = g.Reshape(next, R, c.MemorySlots*d)
	case m.Mem2Mem != nil:
		mm := m.Mem2Mem
		h, keys := g.IndexSelect(s.m2mH, 0, s.study), g.IndexSelect(s.m2mKeys, 0, s.study)
		cx := g.Reshape(mm.Context(g, g.Reshape(x, R, 1, d), keys, h), R, d) // Mem2Mem Eq. 17
		next := mm.Write(g, s.memory.Value(g), x, cx)                        // Eqs. 18–20
		s.memory.Set(g, next)
		x = mm.Augment(g, x, mm.Read(g, next, x)) // Eqs. 13–15
		memory = g.Reshape(next, R, c.MemorySlots*d)
	}
	last := len(m.Decoder.Layers) - 1
	var probs *radgen.Tensor
	// Every sublayer norm's γ̂ and β̂ reads the new memory alone: the
	// engine computes them beside the layers' work, in the order the
	// layers reach them.
	for i, l := range m.Decoder.Layers {
		if memory != nil {
			s.deltas[i] = l.Deltas(g, memory)
		}
	}
	for i, l := range m.Decoder.Layers {
		var deltas NormDeltas
		if s.deltas != nil {
			deltas = s.deltas[i]
		}
		x, probs = l.Step(g, x, deltas, s.self[i], s.cross[i], s.study, i == last)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := arch.CopyLogProbs(dst, m.logProbs(g, m.Decoder.Norm.Forward(g, x), memory)); err != nil {
		return err
	}
	s.probs = probs
	s.t++
	return nil
}
