// Package mclnm2 is a report generator that the radgen library does not
// have, composed from its paper modules and registered with the facade:
// R2Gen's decoder layers, whose layer norms are conditioned on a relational
// memory through MCLN (relmem, mcln), attending to the image through the
// Meshed-Memory Transformer's memory-augmented attention (mesh) instead of
// plain cross-attention.
//
// It is examples/variant's model, written as a researcher would write
// theirs outside the library: a configuration that implements arch.Config,
// a module that implements arch.EncoderDecoder, and one arch.Register call.
// memtrans then trains, saves, loads, decodes and serves it like the
// built-in architectures. Copy it and change the layer.
package mclnm2

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/relmem"
)

// Name is the architecture's registered name, recorded in checkpoints.
const Name = "mcln-m2"

func init() { arch.Register[Config](Name) }

// Config is the variant's configuration, saved with its weights.
type Config struct {
	Vocab       int     `json:"vocab"`        // report vocabulary: tokenizer size + 1
	VisualWidth int     `json:"visual_width"` // patch feature width
	DModel      int     `json:"d_model"`
	Heads       int     `json:"heads"`
	FF          int     `json:"d_ff"`
	Layers      int     `json:"layers"`        // decoder layers
	MemoryRows  int     `json:"memory_rows"`   // relational memory slots (R2Gen: 3)
	MemorySlots int     `json:"memory_slots"`  // M²'s learnable attention slots (M²: 40)
	MaxSeqLen   int     `json:"max_seq_len"`   // longest report, in tokens
	Dropout     float64 `json:"dropout"`       // inside attention and after the embeddings
	EmbedDrop   float64 `json:"embed_dropout"` // after the visual embedding
}

// Tiny returns a small configuration for vocab ids over patches of width
// visualWidth: it trains on synthetic films in seconds.
func Tiny(vocab, visualWidth int) Config {
	return Config{Vocab: vocab, VisualWidth: visualWidth, DModel: 64, Heads: 4, FF: 128, Layers: 2,
		MemoryRows: 3, MemorySlots: 8, MaxSeqLen: 60, Dropout: 0.1, EmbedDrop: 0.1}
}

// Dims implements arch.Config.
func (c Config) Dims() arch.Dims {
	return arch.Dims{Vocab: c.Vocab, Words: c.Vocab, VisualWidth: c.VisualWidth, MaxSeqLen: c.MaxSeqLen, MaxLen: c.MaxSeqLen, Semantics: decode.R2Gen}
}

// Validate implements arch.Config.
func (c Config) Validate(patches int) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab", c.Vocab}, {"visual_width", c.VisualWidth}, {"d_model", c.DModel}, {"heads", c.Heads}, {"d_ff", c.FF},
		{"layers", c.Layers}, {"memory_rows", c.MemoryRows}, {"memory_slots", c.MemorySlots}, {"max_seq_len", c.MaxSeqLen}} {
		if f.v <= 0 || f.v > 1<<16 {
			return fmt.Errorf("mclnm2: %s = %d", f.name, f.v)
		}
	}
	if c.DModel%c.Heads != 0 {
		return fmt.Errorf("mclnm2: d_model %d not divisible by %d heads", c.DModel, c.Heads)
	}
	if c.Dropout < 0 || c.Dropout >= 1 || c.EmbedDrop < 0 || c.EmbedDrop >= 1 {
		return fmt.Errorf("mclnm2: dropout %v / %v outside [0, 1)", c.Dropout, c.EmbedDrop)
	}
	return nil
}

// Cost implements arch.Config with upper estimates.
func (c Config) Cost(patches int) arch.Cost {
	d, f, l, v := float64(c.DModel), float64(c.FF), float64(c.Layers), float64(c.Vocab)
	s, m, t, n := float64(c.MemoryRows), float64(c.MemorySlots), float64(c.MaxSeqLen+1), float64(patches)
	params := float64(c.VisualWidth)*d + 6*d*d + 2*m*d + // visual embedding, encoder attention
		l*(8*d*d+2*d*f+6*(s*d*d+d*d)) + // decoder layers and their MCLN MLPs
		16*d*d + 2*v*d + t*d + v // memory, embeddings, logits
	acts := n*(8*d+float64(c.Heads)*(n+m)) + l*t*(f+16*d+float64(c.Heads)*(t+n+m)) + t*s*d*6 + 3*t*v
	return arch.Cost{Params: params, Activations: acts}
}

// New implements arch.Config.
func (c Config) New(seed uint64) (arch.EncoderDecoder, error) {
	if err := c.Validate(1); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d636c6e))
	d := c.DModel
	m := &Model{cfg: c,
		VisualEmbed: radgen.NewLinear(c.VisualWidth, d, true, rng),
		EncoderAttn: mesh.NewMemoryAttention(d, d/c.Heads, d/c.Heads, c.Heads, c.MemorySlots, rng),
		EncoderNorm: mesh.NewLayerNorm(d),
		Tokens:      radgen.NewParam(c.Vocab, d),
		Positions:   radgen.NewParam(c.MaxSeqLen+1, d),
		Memory:      relmem.New(c.MemoryRows, d, c.Heads, c.Dropout, rng),
		Logit:       radgen.NewLinear(d, c.Vocab, true, rng),
	}
	radgen.XavierUniform(m.Tokens, rng)
	radgen.XavierUniform(m.Positions, rng)
	for range c.Layers {
		l := &Layer{
			SelfAttn:  mesh.NewMultiHeadAttention(d, c.Heads, c.Dropout, rng),
			CrossAttn: mesh.NewMemoryAttention(d, d/c.Heads, d/c.Heads, c.Heads, c.MemorySlots, rng),
			FF1:       radgen.NewLinear(d, c.FF, true, rng),
			FF2:       radgen.NewLinear(c.FF, d, true, rng),
		}
		for i := range l.Norms {
			l.Norms[i] = mcln.NewConditional(d, c.MemoryRows*d, rng)
		}
		m.Layers = append(m.Layers, l)
	}
	return m, nil
}

// Model is the variant's encoder–decoder.
type Model struct {
	cfg         Config
	VisualEmbed *radgen.Linear                  // patches → d_model, then ReLU
	EncoderAttn *mesh.ScaledDotProductAttention // memory-augmented self-attention over the patches
	EncoderNorm *mesh.LayerNorm
	Tokens      *radgen.Tensor // (Vocab, D)
	Positions   *radgen.Tensor // (MaxSeqLen+1, D), learned
	Memory      *relmem.Relational
	Layers      []*Layer
	Logit       *radgen.Linear
}

// Layer is a pre-norm decoder layer whose three norms are MCLN on the
// relational memory: masked self-attention, M²'s memory-augmented
// attention over the encoded patches, and a feed-forward map.
type Layer struct {
	Norms     [3]*mcln.Conditional
	SelfAttn  *mesh.MultiHeadAttention
	CrossAttn *mesh.ScaledDotProductAttention
	FF1, FF2  *radgen.Linear
}

// Forward runs the layer over x (B, T, D) with memory states (B, T, S·D),
// the encoded patches enc (B, N, D) and the causal mask (1, T, T), zero
// where masked.
func (l *Layer) Forward(g *radgen.Graph, x, memory, enc, causal *radgen.Tensor) *radgen.Tensor {
	n := l.Norms[0].Forward(g, x, memory)
	x = g.Add(x, l.SelfAttn.Forward(g, n, n, n, causal))
	n = l.Norms[1].Forward(g, x, memory)
	x = g.Add(x, l.CrossAttn.Forward(g, n, enc, enc, nil))
	n = l.Norms[2].Forward(g, x, memory)
	return g.Add(x, l.FF2.Forward(g, g.ReLU(l.FF1.Forward(g, n))))
}

// Step is Forward for one new position per row: x (R, D), memory (R, S·D);
// the self-attention reads and extends cache, the cross-attention reads the
// projected source of study[r] for row r.
func (l *Layer) Step(g *radgen.Graph, x, memory *radgen.Tensor, cache *mesh.KVCache, src *mesh.Source, study []int) *radgen.Tensor {
	r, d := x.Dim(0), x.Dim(1)
	norm := func(i int, x *radgen.Tensor) *radgen.Tensor {
		return g.Reshape(l.Norms[i].Forward(g, g.Reshape(x, r, 1, d), g.Reshape(memory, r, 1, memory.Dim(1))), r, d)
	}
	x = g.Add(x, l.SelfAttn.Step(g, norm(0, x), cache))
	out, _ := l.CrossAttn.Attend(g, norm(1, x), src, study, false)
	x = g.Add(x, out)
	return g.Add(x, l.FF2.Forward(g, g.ReLU(l.FF1.Forward(g, norm(2, x)))))
}

// Config implements arch.EncoderDecoder.
func (m *Model) Config() arch.Config { return m.cfg }

// VisitParams implements radgen.Module.
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.VisualEmbed.VisitParams(radgen.Prefixed("visual_embed.", visit))
	m.EncoderAttn.VisitParams(radgen.Prefixed("encoder.attn.", visit))
	m.EncoderNorm.VisitParams(radgen.Prefixed("encoder.norm.", visit))
	visit("tokens", m.Tokens)
	visit("positions", m.Positions)
	m.Memory.VisitParams(radgen.Prefixed("memory.", visit))
	for i, l := range m.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		for j, n := range l.Norms {
			n.VisitParams(radgen.Prefixed(fmt.Sprintf("%snorm%d.", p, j), visit))
		}
		l.SelfAttn.VisitParams(radgen.Prefixed(p+"self_attn.", visit))
		l.CrossAttn.VisitParams(radgen.Prefixed(p+"cross_attn.", visit))
		l.FF1.VisitParams(radgen.Prefixed(p+"ff1.", visit))
		l.FF2.VisitParams(radgen.Prefixed(p+"ff2.", visit))
	}
	m.Logit.VisitParams(radgen.Prefixed("logit.", visit))
}

// encode embeds the patches (B, N, VisualWidth) and runs the encoder.
func (m *Model) encode(g *radgen.Graph, feats *radgen.Tensor) (*radgen.Tensor, error) {
	if feats == nil || feats.Rank() != 3 || feats.Dim(2) != m.cfg.VisualWidth {
		return nil, fmt.Errorf("mclnm2: features %v, want (B, N, %d)", feats.Shape(), m.cfg.VisualWidth)
	}
	x := g.Dropout(g.ReLU(m.VisualEmbed.Forward(g, feats)), m.cfg.EmbedDrop)
	return m.EncoderNorm.Forward(g, g.Add(x, m.EncoderAttn.Forward(g, x, x, x, nil))), nil
}

// embed returns the token embeddings of ids (shape..., D).
func (m *Model) embed(g *radgen.Graph, ids []int, shape ...int) *radgen.Tensor {
	return g.Embedding(m.Tokens, ids, shape...)
}

// LogProbs implements arch.EncoderDecoder.
func (m *Model) LogProbs(g *radgen.Graph, feats *radgen.Tensor, in []int, b, t int) (*radgen.Tensor, error) {
	if b <= 0 || t <= 0 || t > m.cfg.MaxSeqLen+1 || len(in) != b*t {
		return nil, fmt.Errorf("mclnm2: %d ids for a (%d, %d) batch (at most %d positions)", len(in), b, t, m.cfg.MaxSeqLen+1)
	}
	for _, id := range in {
		if id < 0 || id >= m.cfg.Vocab {
			return nil, fmt.Errorf("mclnm2: id %d outside [0, %d)", id, m.cfg.Vocab)
		}
	}
	enc, err := m.encode(g, feats)
	if err != nil {
		return nil, err
	}
	if enc.Dim(0) != b {
		return nil, fmt.Errorf("mclnm2: features of %d studies for %d reports", enc.Dim(0), b)
	}
	pos := make([]int, b*t)
	for i := range pos {
		pos[i] = i % t
	}
	tok := m.embed(g, in, b, t)
	x := g.Dropout(g.Add(tok, g.Embedding(m.Positions, pos, b, t)), m.cfg.Dropout)
	memory := m.Memory.Forward(g, tok, m.Memory.InitMemory(b).To(feats.Device())) // (B, T, S·D)
	causal := radgen.Zeros(1, t, t)
	cd := causal.Data()
	for q := range t {
		for k := 0; k <= q; k++ {
			cd[q*t+k] = 1
		}
	}
	causal = causal.To(feats.Device())
	if feats.Is64() {
		causal = causal.To64()
	}
	for _, l := range m.Layers {
		x = l.Forward(g, x, memory, enc, causal)
	}
	return g.LogSoftmax(m.Logit.Forward(g, x)), nil
}

// Loss implements arch.EncoderDecoder: the language model's loss.
func (m *Model) Loss(g *radgen.Graph, feats *radgen.Tensor, batch arch.Batch) (*radgen.Tensor, error) {
	if err := arch.CheckBatch(batch, m.cfg.Dims()); err != nil {
		return nil, err
	}
	lp, err := m.LogProbs(g, feats, batch.In, batch.Size, batch.Len)
	if err != nil {
		return nil, err
	}
	return arch.LanguageModelLoss(g, lp, batch.Targets, batch.Mask), nil
}

// StartDecoding implements arch.EncoderDecoder: one row per study, each
// step as the last position of LogProbs over the prefix.
func (m *Model) StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error) {
	g := radgen.NoGrad(opts...)
	enc, err := m.encode(g, feats)
	if err != nil {
		return nil, err
	}
	b := enc.Dim(0)
	dec := &decoding{m: m, g: g, study: make([]int, b), memory: m.Memory.InitMemory(b).To(feats.Device())}
	if feats.Is64() {
		dec.memory = dec.memory.To64()
	}
	for i := range dec.study {
		dec.study[i] = i
	}
	for _, l := range m.Layers {
		dec.caches = append(dec.caches, mesh.NewKVCache(b))
		dec.sources = append(dec.sources, l.CrossAttn.Project(g, enc))
	}
	return dec, nil
}

// decoding is the incremental decoding of a batch of studies.
type decoding struct {
	m       *Model
	g       *radgen.Graph
	study   []int // each row's study
	caches  []*mesh.KVCache
	sources []*mesh.Source
	memory  *radgen.Tensor // (R, S, D): the relational memory after the last token
	pos     int
}

func (s *decoding) VocabSize() int { return s.m.cfg.Vocab }
func (s *decoding) Rows() int      { return len(s.study) }

func (s *decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	r := len(s.study)
	if err := arch.CheckStep(ctx, tokens, dst, r, s.m.cfg.Vocab, s.pos, s.m.cfg.MaxSeqLen+1); err != nil {
		return err
	}
	g, m := s.g, s.m
	pos := make([]int, r)
	for i := range pos {
		pos[i] = s.pos
	}
	tok := m.embed(g, tokens, r)
	x := g.Add(tok, g.Embedding(m.Positions, pos, r))
	s.memory = m.Memory.Step(g, tok, s.memory) // (R, S, D)
	flat := g.Reshape(s.memory, r, s.memory.Dim(1)*s.memory.Dim(2))
	for i, l := range m.Layers {
		x = l.Step(g, x, flat, s.caches[i], s.sources[i], s.study)
	}
	if err := arch.CopyLogProbs(dst, g.LogSoftmax(m.Logit.Forward(g, x))); err != nil {
		return err
	}
	s.pos++
	return nil
}

func (s *decoding) Reorder(src []int) error {
	for _, i := range src {
		if i < 0 || i >= len(s.study) {
			return fmt.Errorf("%w: row %d of %d", decode.ErrShape, i, len(s.study))
		}
	}
	for _, c := range s.caches {
		if err := c.Reorder(src); err != nil {
			return err
		}
	}
	study := make([]int, len(src))
	for i, j := range src {
		study[i] = s.study[j]
	}
	s.study = study
	s.memory = s.g.IndexSelect(s.memory, 0, src)
	return nil
}

// VisualEmbedding implements arch.VisualEmbedder, so that a trainer with a
// frozen extractor can standardise the features through it.
func (m *Model) VisualEmbedding() *radgen.Linear { return m.VisualEmbed }
