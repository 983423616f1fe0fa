package memtrans

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/relmem"
)

// Transformer is R2Gen's encoder–decoder (the published encoder_decoder
// module): att_embed, a pre-norm Transformer encoder over the visual
// patches, a relational memory driven by the report tokens, a decoder whose
// layer norms are conditioned on the memory, and the logit layer. Parameter
// names equal R2Gen's state_dict under "encoder_decoder.".
//
// A Transformer is safe for concurrent use by goroutines that only run
// NoGrad graphs; training mutates it and must be exclusive.
type Transformer struct {
	Config   Config
	AttEmbed *radgen.Linear // att_embed.0: d_vf → D, followed by ReLU and dropout
	Encoder  *Encoder
	Decoder  *Decoder
	Embed    *Embeddings
	Memory   *relmem.Relational // nil in the BASE variant
	Logit    *radgen.Linear     // D (+ S·D for BASE+RM) → Vocab
}

// NewTransformer returns a Transformer initialised as R2Gen's make_model
// does, drawing from a PCG generator seeded with seed.
func NewTransformer(c Config, seed uint64) (*Transformer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x52324765))
	m := &Transformer{
		Config:   c,
		AttEmbed: radgen.NewLinear(c.DVisual, c.DModel, true, rng),
		Encoder:  newEncoder(c, rng),
		Decoder:  newDecoder(c, rng),
		Embed:    newEmbeddings(c, rng),
	}
	logitIn := c.DModel
	if c.Variant != VariantBase {
		m.Memory = relmem.New(c.MemorySlots, c.DModel, c.MemoryHeads, c.Dropout, rng)
		if c.Variant == VariantBaseRM {
			logitIn += c.MemorySlots * c.DModel
		}
	}
	m.Logit = radgen.NewLinear(logitIn, c.Vocab, true, rng)
	return m, nil
}

// VisitParams implements radgen.Module with R2Gen's names (relative to
// "encoder_decoder.").
func (m *Transformer) VisitParams(visit func(string, *radgen.Tensor)) {
	m.AttEmbed.VisitParams(radgen.Prefixed("att_embed.0.", visit))
	m.Encoder.VisitParams(radgen.Prefixed("model.encoder.", visit))
	m.Decoder.VisitParams(radgen.Prefixed("model.decoder.", visit))
	if m.Memory != nil {
		m.Memory.VisitParams(radgen.Prefixed("model.rm.", visit))
	}
	m.Embed.VisitParams(radgen.Prefixed("model.tgt_embed.", visit))
	m.Logit.VisitParams(radgen.Prefixed("logit.", visit))
}

// Encoded is a batch of studies after the encoder.
type Encoded struct {
	AttEmbedded *radgen.Tensor // (B, N, D) att_embed output
	Out         *radgen.Tensor // (B, N, D) encoder output
	Mask        *radgen.Tensor // (B, 1, N) all ones: every patch is real
}

// Encode embeds visual patch features (B, N, d_vf) and runs the encoder.
func (m *Transformer) Encode(g *radgen.Graph, feats *radgen.Tensor) *Encoded {
	if feats.Rank() != 3 || feats.Dim(2) != m.Config.DVisual {
		panic(fmt.Sprintf("memtrans: visual features %v, want (B, N, %d)", feats.Shape(), m.Config.DVisual))
	}
	b, n := feats.Dim(0), feats.Dim(1)
	att := g.Dropout(g.ReLU(m.AttEmbed.Forward(g, feats)), m.Config.EmbedDrop)
	mask := radgen.Zeros(b, 1, n)
	radgen.Fill(mask, 1)
	return &Encoded{AttEmbedded: att, Out: m.Encoder.Forward(g, att, mask), Mask: mask}
}

// Forward is the teacher-forced pass over a batch. Its intermediates are
// exposed for parity checks and attention maps.
type Forward struct {
	Encoded     *Encoded
	TgtEmbedded *radgen.Tensor // (B, T, D)
	MemoryInit  *radgen.Tensor // (B, S, D), nil in BASE
	Memory      *radgen.Tensor // (B, T, S·D), nil in BASE
	DecoderOut  *radgen.Tensor // (B, T, D)
	LogProbs    *radgen.Tensor // (B, T, Vocab)
}

// TeacherForce runs the model on features (B, N, d_vf) and input tokens
// (B·T ids, row-major: targets[:, :-1] of a batch), as R2Gen's forward does:
// the self-attention mask hides future positions and padding (id 0) except
// at position 0, which is bos.
func (m *Transformer) TeacherForce(g *radgen.Graph, feats *radgen.Tensor, tokens []int, b, t int) (*Forward, error) {
	if len(tokens) != b*t || b <= 0 || t <= 0 {
		return nil, fmt.Errorf("memtrans: %d tokens for a (%d, %d) batch", len(tokens), b, t)
	}
	if feats.Rank() != 3 || feats.Dim(0) != b || feats.Dim(2) != m.Config.DVisual {
		return nil, fmt.Errorf("memtrans: visual features %v for a batch of %d, want (B, N, %d)", feats.Shape(), b, m.Config.DVisual)
	}
	if t > m.Config.PositionLen {
		return nil, fmt.Errorf("memtrans: %d positions exceed the positional table (%d)", t, m.Config.PositionLen)
	}
	for i, id := range tokens {
		if id < 0 || id >= m.Config.Vocab {
			return nil, fmt.Errorf("memtrans: token %d at %d outside the vocabulary [0, %d)", id, i, m.Config.Vocab)
		}
	}
	f := &Forward{Encoded: m.Encode(g, feats)}
	tgtMask := radgen.Zeros(b, t, t)
	md := tgtMask.Data()
	for i := 0; i < b; i++ {
		for q := 0; q < t; q++ {
			for k := 0; k <= q; k++ {
				if k == 0 || tokens[i*t+k] > 0 {
					md[(i*t+q)*t+k] = 1
				}
			}
		}
	}
	f.TgtEmbedded = m.Embed.Forward(g, tokens, b, t, 0)
	if m.Memory != nil {
		f.MemoryInit = m.Memory.InitMemory(b)
		// R2Gen embeds the tokens a second time for the memory, so in
		// training the two get independent dropout masks.
		f.Memory = m.Memory.Forward(g, m.Embed.Forward(g, tokens, b, t, 0), f.MemoryInit)
	}
	f.DecoderOut = m.Decoder.Forward(g, f.TgtEmbedded, f.Encoded.Out, f.Encoded.Mask, tgtMask, f.Memory)
	out := f.DecoderOut
	if m.Config.Variant == VariantBaseRM {
		out = g.Concat(2, out, f.Memory)
	}
	f.LogProbs = g.LogSoftmax(m.Logit.Forward(g, out))
	return f, nil
}

// Loss is R2Gen's language-model criterion: the mean negative
// log-probability of targets (B·T ids) over positions where mask is
// non-zero. logProbs is (B, T, Vocab).
func Loss(g *radgen.Graph, logProbs *radgen.Tensor, targets []int, mask []float32) *radgen.Tensor {
	b, t := logProbs.Dim(0), logProbs.Dim(1)
	if len(targets) != b*t || len(mask) != b*t {
		panic(fmt.Sprintf("memtrans: loss over %v with %d targets and %d mask entries", logProbs.Shape(), len(targets), len(mask)))
	}
	var total float64
	for _, v := range mask {
		total += float64(v)
	}
	if total == 0 {
		total = 1
	}
	picked := g.PickLast(logProbs, targets) // (B, T)
	mt := radgen.FromFloat32(append([]float32(nil), mask...), b, t)
	if logProbs.Is64() {
		mt = mt.To64()
	}
	return g.Scale(g.Sum(g.Mul(picked, mt)), -1/total)
}
