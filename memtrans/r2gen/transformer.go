package r2gen

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/relmem"
)

// Model is R2Gen's encoder–decoder (the published encoder_decoder
// module): att_embed, a pre-norm Transformer encoder over the visual
// patches, a relational memory driven by the report tokens, a decoder whose
// layer norms are conditioned on the memory, and the logit layer. Parameter
// names equal R2Gen's state_dict under "encoder_decoder.".
//
// A Model is safe for concurrent use by goroutines that only run
// NoGrad graphs; training mutates it and must be exclusive.
type Model struct {
	config   Config
	AttEmbed *radgen.Linear // att_embed.0: d_vf → D, followed by ReLU and dropout
	Encoder  *Encoder
	Decoder  *Decoder
	Embed    *Embeddings
	Memory   *relmem.Relational // nil in the BASE variant and with Mem2Mem
	Logit    *radgen.Linear     // D (+ S·D for BASE+RM) → Vocab

	// Views holds each decoder layer's multi-view source (model.views.{i}.),
	// nil unless Config.Routing is set.
	Views []*mesh.MultiView
	// Mem2Mem replaces Memory when Config.Memory is MemoryMem2Mem
	// (model.m2m.).
	Mem2Mem *relmem.Mem2Mem
}

// New returns a Model initialised as R2Gen's make_model
// does, drawing from a PCG generator seeded with seed.
func New(c Config, seed uint64) (*Model, error) {
	if err := c.validateHard(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x52324765))
	m := &Model{
		config:   c,
		AttEmbed: radgen.NewLinear(c.DVisual, c.DModel, true, rng),
		Encoder:  NewEncoder(c, rng),
		Decoder:  NewDecoder(c, rng),
		Embed:    NewEmbeddings(c, rng),
	}
	logitIn := c.DModel
	if c.Variant != VariantBase {
		if c.Memory == MemoryRelational {
			m.Memory = relmem.New(c.MemorySlots, c.DModel, c.MemoryHeads, c.Dropout, rng)
		}
		if c.Variant == VariantBaseRM {
			logitIn += c.MemorySlots * c.DModel
		}
	}
	m.Logit = radgen.NewLinear(logitIn, c.Vocab, true, rng)
	// The variants' modules draw last, so an R2Gen model of the same seed
	// gets the same initial weights with or without them.
	if c.Routing != mesh.RoutingNone {
		m.Views = mesh.NewMultiViews(c.Routing, c.Layers, c.Layers, c.DModel, rng)
	}
	if c.Memory == MemoryMem2Mem {
		m.Mem2Mem = relmem.NewMem2Mem(c.MemorySlots, c.DModel, c.mem2memHidden(), rng)
	}
	return m, nil
}

// hasMemory reports whether the decoder gets memory states.
func (m *Model) hasMemory() bool { return m.Memory != nil || m.Mem2Mem != nil }

// VisitParams implements radgen.Module with R2Gen's names (relative to
// "encoder_decoder.").
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.AttEmbed.VisitParams(radgen.Prefixed("att_embed.0.", visit))
	m.Encoder.VisitParams(radgen.Prefixed("model.encoder.", visit))
	m.Decoder.VisitParams(radgen.Prefixed("model.decoder.", visit))
	if m.Memory != nil {
		m.Memory.VisitParams(radgen.Prefixed("model.rm.", visit))
	}
	m.Embed.VisitParams(radgen.Prefixed("model.tgt_embed.", visit))
	m.Logit.VisitParams(radgen.Prefixed("logit.", visit))
	m.VisitVariant(visit)
}

// VisitVariant visits the parameters the variants add to R2Gen.
func (m *Model) VisitVariant(visit func(string, *radgen.Tensor)) {
	for i, v := range m.Views {
		v.VisitParams(radgen.Prefixed(fmt.Sprintf("model.views.%d.", i), visit))
	}
	if m.Mem2Mem != nil {
		m.Mem2Mem.VisitParams(radgen.Prefixed("model.m2m.", visit))
	}
}

// Encoded is a batch of studies after the encoder.
type Encoded struct {
	AttEmbedded *radgen.Tensor // (B, N, D) att_embed output
	Out         *radgen.Tensor // (B, N, D) encoder output S_N
	Mask        *radgen.Tensor // (B, 1, N) all ones: every patch is real

	// Levels are the encoder levels S_1..S_N (B, N, D) with multi-view
	// routing, else nil.
	Levels []*radgen.Tensor
	// Sources holds, per decoder layer, the keys and values of its
	// cross-attention (B, N, D): Out, or LN(g_i(S) + S_N) with routing.
	Sources []*radgen.Tensor
	// Bank is Mem2Mem's encoder memory M^(e) (B, r, D), the initial decoder
	// memory, and BankAttention its A (B, r, N); nil without Mem2Mem.
	Bank, BankAttention *radgen.Tensor
}

// rows returns the encoding of studies idx (one row per entry).
func (e *Encoded) rows(g *radgen.Graph, idx []int) *Encoded {
	sel := func(x *radgen.Tensor) *radgen.Tensor {
		if x == nil {
			return nil
		}
		return g.IndexSelect(x, 0, idx)
	}
	out := &Encoded{Out: sel(e.Out), Mask: sel(e.Mask), Bank: sel(e.Bank)}
	for i, s := range e.Sources {
		if s == e.Out {
			out.Sources = append(out.Sources, out.Out)
		} else if i > 0 && s == e.Sources[i-1] {
			out.Sources = append(out.Sources, out.Sources[i-1])
		} else {
			out.Sources = append(out.Sources, sel(s))
		}
	}
	return out
}

// Encode embeds visual patch features (B, N, d_vf) and runs the encoder.
func (m *Model) Encode(g *radgen.Graph, feats *radgen.Tensor) *Encoded {
	if feats.Rank() != 3 || feats.Dim(2) != m.config.DVisual {
		panic(fmt.Sprintf("r2gen: visual features %v, want (B, N, %d)", feats.Shape(), m.config.DVisual))
	}
	b, n := feats.Dim(0), feats.Dim(1)
	att := g.Dropout(g.ReLU(m.AttEmbed.Forward(g, feats)), m.config.EmbedDrop)
	mask := SourceMask(b, n, feats.Device())
	e := &Encoded{AttEmbedded: att, Mask: mask}
	if m.Views == nil {
		e.Out = m.Encoder.Forward(g, att, mask)
		for range m.Decoder.Layers {
			e.Sources = append(e.Sources, e.Out)
		}
	} else {
		e.Levels = m.Encoder.ForwardLevels(g, att, mask)
		e.Out = e.Levels[len(e.Levels)-1]
		for _, v := range m.Views {
			e.Sources = append(e.Sources, v.Forward(g, e.Levels)) // LN(g_i(S) + S_N), Eq. 8
		}
	}
	if m.Mem2Mem != nil {
		e.Bank, e.BankAttention = m.Mem2Mem.Bank(g, e.Out) // Eqs. 9–11
	}
	return e
}

// TeacherForced is the teacher-forced pass over a batch. Its intermediates are
// exposed for parity checks and attention maps.
type TeacherForced struct {
	Encoded     *Encoded
	TgtEmbedded *radgen.Tensor // (B, T, D)
	MemoryInit  *radgen.Tensor // (B, S, D), nil in BASE; Mem2Mem's bank
	Memory      *radgen.Tensor // (B, T, S·D), nil in BASE
	// DecoderIn is the decoder's input (B, T, D): TgtEmbedded, or Mem2Mem's
	// W_m[x_t; m_t] (Eq. 15).
	DecoderIn  *radgen.Tensor
	DecoderOut *radgen.Tensor // (B, T, D)
	LogProbs   *radgen.Tensor // (B, T, Vocab)
}

// TeacherForce runs the model on features (B, N, d_vf) and input tokens
// (B·T ids, row-major: targets[:, :-1] of a batch), as R2Gen's forward does:
// the self-attention mask hides future positions and padding (id 0) except
// at position 0, which is bos.
func (m *Model) TeacherForce(g *radgen.Graph, feats *radgen.Tensor, tokens []int, b, t int) (*TeacherForced, error) {
	if len(tokens) != b*t || b <= 0 || t <= 0 {
		return nil, fmt.Errorf("r2gen: %d tokens for a (%d, %d) batch", len(tokens), b, t)
	}
	if feats.Rank() != 3 || feats.Dim(0) != b || feats.Dim(2) != m.config.DVisual {
		return nil, fmt.Errorf("r2gen: visual features %v for a batch of %d, want (B, N, %d)", feats.Shape(), b, m.config.DVisual)
	}
	if t > m.config.PositionLen {
		return nil, fmt.Errorf("r2gen: %d positions exceed the positional table (%d)", t, m.config.PositionLen)
	}
	for i, id := range tokens {
		if id < 0 || id >= m.config.Vocab {
			return nil, fmt.Errorf("r2gen: token %d at %d outside the vocabulary [0, %d)", id, i, m.config.Vocab)
		}
	}
	f := &TeacherForced{Encoded: m.Encode(g, feats)}
	m.decodeTokens(g, f, tokens, b, t, TargetMask(tokens, b, t).To(feats.Device()))
	f.LogProbs = m.logProbs(g, f.DecoderOut, f.Memory)
	return f, nil
}

// decodeTokens is R2Gen's composition after the encoder, written once for
// teacher forcing and the full-prefix oracle: the token embeddings, the
// memory variant over them, and the decoder under tgtMask; it fills f's
// TgtEmbedded, MemoryInit, Memory, DecoderIn and DecoderOut.
func (m *Model) decodeTokens(g *radgen.Graph, f *TeacherForced, tokens []int, b, t int, tgtMask *radgen.Tensor) {
	f.TgtEmbedded = m.Embed.Forward(g, tokens, b, t, 0)
	var memIn *radgen.Tensor
	if m.hasMemory() {
		// R2Gen embeds the tokens a second time for the memory, so in
		// training the two get independent dropout masks.
		memIn = m.Embed.Forward(g, tokens, b, t, 0)
	}
	f.MemoryInit, f.Memory, f.DecoderIn = m.memoryStates(g, f.Encoded, memIn, f.TgtEmbedded)
	f.DecoderOut = m.Decoder.ForwardSources(g, f.DecoderIn, f.Encoded.Sources, f.Encoded.Mask, tgtMask, f.Memory)
}

// logProbs is the logit layer over decoder outputs (…, D), with the memory
// states (…, S·D) beside them in BASE+RM (Table 2), and the log-softmax.
func (m *Model) logProbs(g *radgen.Graph, out, memory *radgen.Tensor) *radgen.Tensor {
	if m.config.Variant == VariantBaseRM {
		out = g.Concat(out.Rank()-1, out, memory)
	}
	return g.LogSoftmax(m.Logit.Forward(g, out))
}

// memoryStates runs the memory over the embedded tokens memIn (B, T, D):
// it returns the initial memory, the state after each position
// (B, T, S·D) and the decoder's input, x itself or Mem2Mem's
// W_m[x_t; m_t]. Without memory all but x are nil.
func (m *Model) memoryStates(g *radgen.Graph, enc *Encoded, memIn, x *radgen.Tensor) (init, states, decIn *radgen.Tensor) {
	switch {
	case m.Memory != nil:
		init = m.Memory.InitMemory(x.Dim(0)).To(x.Device())
		return init, m.Memory.Forward(g, memIn, init), x
	case m.Mem2Mem != nil:
		states, reads := m.Mem2Mem.Forward(g, memIn, enc.Out, enc.Bank) // Eqs. 13–14, 17–20
		return enc.Bank, states, m.Mem2Mem.Augment(g, x, reads)         // Eq. 15
	}
	return nil, nil, x
}

// AuxLoss returns the variant's auxiliary training loss for a teacher-forced
// pass f on graph g, to be added to the language-model loss: Mem2Mem's
// Config.Mem2MemPenalty · ‖AAᵀ − I‖²_F (Eq. 12, averaged over the batch).
// It is nil when the configuration has none.
func (m *Model) AuxLoss(g *radgen.Graph, f *TeacherForced) *radgen.Tensor {
	if m.Mem2Mem == nil || m.config.Mem2MemPenalty == 0 || f == nil || f.Encoded == nil || f.Encoded.BankAttention == nil {
		return nil
	}
	return g.Scale(relmem.BankPenalty(g, f.Encoded.BankAttention), m.config.Mem2MemPenalty)
}

// ContinueFrom loads every tensor of R2Gen's architecture from src (names
// prefix + R2Gen's name) and leaves the modules the variants add (the
// multi-view sources, Mem2Mem) as initialised: the continued learning of
// multi-view decoding (Liu et al. §3.3.2), where a trained single-view
// model is fine-tuned with its new routing. Tensors a variant does not use
// (the relational memory under Mem2Mem) are ignored. On error m is
// unchanged.
func (m *Model) ContinueFrom(src radgen.TensorSource, prefix string) error {
	return radgen.LoadParams(singleView{m}, src, prefix)
}

// singleView is the part of a Model that an R2Gen checkpoint holds.
type singleView struct{ m *Model }

func (s singleView) VisitParams(visit func(string, *radgen.Tensor)) {
	skip := map[*radgen.Tensor]bool{}
	s.m.VisitVariant(func(_ string, t *radgen.Tensor) { skip[t] = true })
	s.m.VisitParams(func(name string, t *radgen.Tensor) {
		if !skip[t] {
			visit(name, t)
		}
	})
}
