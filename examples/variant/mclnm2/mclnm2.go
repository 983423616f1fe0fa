// Package mclnm2 is a report generator that the radgen library does not
// have, composed from its blocks and registered with the facade: R2Gen's
// decoder layers (r2gen.DecoderLayer, whose layer norms are conditioned on
// a relational memory through MCLN, with their incremental step), over an
// R2Gen encoder layer whose self-attention is the Meshed-Memory
// Transformer's memory-augmented attention (mesh.NewMemoryAttention)
// instead of R2Gen's.
//
// It is examples/variant's model, written as a researcher would write
// theirs outside the library: a configuration that implements arch.Config,
// a module that implements arch.EncoderDecoder, and one arch.Register call.
// Its decoding takes the library's workspace (arch.TakeWorkspace) and its
// tests check it with the library's arch.TeacherForcingGap. memtrans then
// trains, saves, loads, decodes and serves it like the built-in
// architectures. Copy it and change the layer.
package mclnm2

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
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
	params := float64(c.VisualWidth)*d + 6*d*d + 2*m*d + 2*d*f + // visual embedding, encoder layer
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
	layer := r2gen.LayerConfig{DModel: d, Heads: c.Heads, DFF: c.FF, Dropout: c.Dropout, MemoryWidth: c.MemoryRows * d}
	encoder := r2gen.NewEncoderLayer(layer, rng)
	encoder.SelfAttn = mesh.NewMemoryAttention(d, d/c.Heads, d/c.Heads, c.Heads, c.MemorySlots, rng) // M²'s, in R2Gen's layer
	m := &Model{cfg: c,
		VisualEmbed: radgen.NewLinear(c.VisualWidth, d, true, rng),
		Encoder:     encoder,
		EncoderNorm: mcln.NewLayerNorm(d),
		Tokens:      radgen.NewParam(c.Vocab, d),
		Positions:   radgen.NewParam(c.MaxSeqLen+1, d),
		Memory:      relmem.New(c.MemoryRows, d, c.Heads, c.Dropout, rng),
		DecoderNorm: mcln.NewLayerNorm(d),
		Logit:       radgen.NewLinear(d, c.Vocab, true, rng),
	}
	radgen.XavierUniform(m.Tokens, rng)
	radgen.XavierUniform(m.Positions, rng)
	for range c.Layers {
		m.Layers = append(m.Layers, r2gen.NewDecoderLayer(layer, rng))
	}
	return m, nil
}

// Model is the variant's encoder–decoder.
type Model struct {
	cfg         Config
	VisualEmbed *radgen.Linear      // patches → d_model, then ReLU
	Encoder     *r2gen.EncoderLayer // R2Gen's pre-norm layer, M²'s memory-augmented self-attention
	EncoderNorm *mcln.LayerNorm
	Tokens      *radgen.Tensor // (Vocab, D)
	Positions   *radgen.Tensor // (MaxSeqLen+1, D), learned
	Memory      *relmem.Relational
	Layers      []*r2gen.DecoderLayer // R2Gen's, MCLN on the relational memory
	DecoderNorm *mcln.LayerNorm
	Logit       *radgen.Linear
}

// Config implements arch.EncoderDecoder.
func (m *Model) Config() arch.Config { return m.cfg }

// VisitParams implements radgen.Module.
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.VisualEmbed.VisitParams(radgen.Prefixed("visual_embed.", visit))
	m.Encoder.VisitParams(radgen.Prefixed("encoder.layer.", visit))
	m.EncoderNorm.VisitParams(radgen.Prefixed("encoder.norm.", visit))
	visit("tokens", m.Tokens)
	visit("positions", m.Positions)
	m.Memory.VisitParams(radgen.Prefixed("memory.", visit))
	for i, l := range m.Layers {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("layers.%d.", i), visit))
	}
	m.DecoderNorm.VisitParams(radgen.Prefixed("decoder_norm.", visit))
	m.Logit.VisitParams(radgen.Prefixed("logit.", visit))
}

// encode embeds the patches (B, N, VisualWidth) and runs the encoder.
func (m *Model) encode(g *radgen.Graph, feats *radgen.Tensor) (*radgen.Tensor, error) {
	if feats == nil || feats.Rank() != 3 || feats.Dim(2) != m.cfg.VisualWidth {
		return nil, fmt.Errorf("mclnm2: features %v, want (B, N, %d)", feats.Shape(), m.cfg.VisualWidth)
	}
	x := g.Dropout(g.ReLU(m.VisualEmbed.Forward(g, feats)), m.cfg.EmbedDrop)
	return m.EncoderNorm.Forward(g, m.Encoder.Forward(g, x, nil)), nil
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
	causal := r2gen.CausalMask(1, t).To(feats.Device())
	if feats.Is64() {
		causal = causal.To64()
	}
	for _, l := range m.Layers {
		x = l.Forward(g, x, enc, nil, causal, memory)
	}
	return g.LogSoftmax(m.Logit.Forward(g, m.DecoderNorm.Forward(g, x))), nil
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
	space := arch.TakeWorkspace()
	space.Start(g) // the encoder's results and the sources outlive every step
	enc, err := m.encode(g, feats)
	if err != nil {
		space.Release(g)
		return nil, err
	}
	b := enc.Dim(0)
	dec := &decoding{m: m, g: g, study: make([]int, b)}
	m0 := m.Memory.InitMemory(b).To(feats.Device())
	if feats.Is64() {
		m0 = m0.To64()
	}
	dec.memory.Set(g, m0)
	for i := range dec.study {
		dec.study[i] = i
	}
	for _, l := range m.Layers {
		dec.sources = append(dec.sources, l.SrcAttn.Project(g, enc)) // once per study
	}
	dec.space = space
	dec.caches = dec.space.Caches(len(m.Layers), b)
	g.SetArena(dec.space.Arena)
	return dec, nil
}

// decoding is the incremental decoding of a batch of studies.
type decoding struct {
	m       *Model
	g       *radgen.Graph
	study   []int // each row's study
	space   *arch.Workspace
	caches  []*mesh.KVCache
	sources []*mesh.Source
	memory  radgen.Carried // (R, S, D): the relational memory after the last token
	pos     int
}

func (s *decoding) VocabSize() int { return s.m.cfg.Vocab }
func (s *decoding) Rows() int      { return len(s.study) }

func (s *decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	r := len(s.study)
	if err := arch.CheckStep(ctx, tokens, dst, r, s.m.cfg.Vocab, s.pos, s.m.cfg.MaxSeqLen+1); err != nil {
		return err
	}
	if s.space == nil {
		return arch.ErrReleased
	}
	s.space.Arena.Next()
	g, m := s.g, s.m
	pos := make([]int, r)
	for i := range pos {
		pos[i] = s.pos
	}
	tok := m.embed(g, tokens, r)
	x := g.Add(tok, g.Embedding(m.Positions, pos, r))
	memory := m.Memory.Step(g, tok, s.memory.Value(g)) // (R, S, D), R2Gen Eqs. 6–10
	s.memory.Set(g, memory)
	flat := g.Reshape(memory, r, memory.Dim(1)*memory.Dim(2))
	for i, l := range m.Layers {
		x, _ = l.Step(g, x, l.Deltas(g, flat), s.caches[i], s.sources[i], s.study, false)
	}
	if err := arch.CopyLogProbs(dst, g.LogSoftmax(m.Logit.Forward(g, m.DecoderNorm.Forward(g, x)))); err != nil {
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
	s.memory.Reorder(src)
	return nil
}

// Release implements arch.Releaser: the workspace goes back to the pool.
func (s *decoding) Release() {
	if s.space != nil {
		s.space.Release(s.g)
		s.space, s.caches, s.memory = nil, nil, radgen.Carried{}
	}
}

// VisualEmbedding implements arch.VisualEmbedder, so that a trainer with a
// frozen extractor can standardise the features through it.
func (m *Model) VisualEmbedding() *radgen.Linear { return m.VisualEmbed }
