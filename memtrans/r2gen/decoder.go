package r2gen

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/mesh"
)

// sublayerNorm is the norm of a decoder sublayer: MCLN in the full model, a
// plain LayerNorm in the BASE ablations.
type sublayerNorm struct {
	cond  *mcln.Conditional
	plain *mcln.LayerNorm
}

func (n sublayerNorm) forward(g *radgen.Graph, x, memory *radgen.Tensor) *radgen.Tensor {
	if n.cond != nil {
		return n.cond.Forward(g, x, memory)
	}
	return n.plain.Forward(g, x)
}

// apply is forward with γ̂ and β̂ precomputed: those of the layer's norm i
// in norms, for an MCLN (see DecoderLayer.Step).
func (n sublayerNorm) apply(g *radgen.Graph, x *radgen.Tensor, norms layerDeltas, i int) *radgen.Tensor {
	if n.cond != nil {
		gamma, beta := norms.get(i)
		return n.cond.Apply(g, x, gamma, beta)
	}
	return n.plain.Forward(g, x)
}

func (n sublayerNorm) VisitParams(visit func(string, *radgen.Tensor)) {
	if n.cond != nil {
		n.cond.VisitParams(visit)
	} else {
		n.plain.VisitParams(visit)
	}
}

// DecoderLayer is a pre-norm decoder layer whose norms are conditioned on
// the relational memory (R2Gen §2.3):
//
//	x += Dropout(SelfAttn(MCLN₀(x, M)))
//	x += Dropout(SrcAttn(MCLN₁(x, M), enc))
//	x += Dropout(FFN(MCLN₂(x, M)))
type DecoderLayer struct {
	SelfAttn, SrcAttn *mesh.MultiHeadAttention
	FeedForward       *mesh.FeedForward
	norms             [3]sublayerNorm // sublayer.{0,1,2}.norm
	Dropout           float64
}

// Norm returns the conditional layer norm of sublayer i (nil in BASE models).
func (l *DecoderLayer) Norm(i int) *mcln.Conditional { return l.norms[i].cond }

// Forward runs the layer on x (B, T, D) over the encoder output enc
// (B, N, D) with masks srcMask (B, 1, N) and tgtMask (B, T, T), and memory
// states (B, T, S·D) (ignored by BASE norms).
func (l *DecoderLayer) Forward(g *radgen.Graph, x, enc, srcMask, tgtMask, memory *radgen.Tensor) *radgen.Tensor {
	return l.body(g, x,
		func(i int, x *radgen.Tensor) *radgen.Tensor { return l.norms[i].forward(g, x, memory) },
		func(h *radgen.Tensor) *radgen.Tensor { return l.SelfAttn.Forward(g, h, h, h, tgtMask) },
		func(h *radgen.Tensor) *radgen.Tensor { return l.SrcAttn.Forward(g, h, enc, enc, srcMask) })
}

// body is the layer written once, around how it normalises and attends
// (R2Gen §2.3, the decoder of Eq. 4 with MCLN, Eqs. 11–15, in its norms):
//
//	x += Dropout(SelfAttn(norm₀(x)));  x += Dropout(SrcAttn(norm₁(x)));  x += Dropout(FFN(norm₂(x)))
//
// Forward and Step differ only in norm, self and src.
func (l *DecoderLayer) body(g *radgen.Graph, x *radgen.Tensor, norm func(int, *radgen.Tensor) *radgen.Tensor, self, src func(*radgen.Tensor) *radgen.Tensor) *radgen.Tensor {
	x = g.Add(x, g.Dropout(self(norm(0, x)), l.Dropout))
	x = g.Add(x, g.Dropout(src(norm(1, x)), l.Dropout))
	return g.Add(x, g.Dropout(l.FeedForward.Forward(g, norm(2, x)), l.Dropout))
}

// Step is Forward for one new position per row: x (R, D) holds each row's
// input, self caches the rows' earlier positions (keys and values of
// SelfAttn), src is SrcAttn's source projected once per study and
// study[i] the study of row i. norms gives γ̂ and β̂ (R, D) of the
// sublayer norms, computed from the rows' memory for all layers at once
// (ahead: each is waited for when the layer reaches its norm); BASE norms
// have none. It returns
// the layer's output (R, D) and, if record is true, the source attention's
// probabilities (R, h, N).
func (l *DecoderLayer) Step(g *radgen.Graph, x *radgen.Tensor, norms layerDeltas, self *mesh.KVCache, src *mesh.Source, study []int, record bool) (out, probs *radgen.Tensor) {
	out = l.body(g, x,
		func(i int, x *radgen.Tensor) *radgen.Tensor { return l.norms[i].apply(g, x, norms, i) },
		func(h *radgen.Tensor) *radgen.Tensor { return l.SelfAttn.Step(g, h, self) },
		func(h *radgen.Tensor) *radgen.Tensor {
			ctx, p := l.SrcAttn.Attend(g, h, src, study, record)
			probs = p
			return ctx
		})
	return out, probs
}

// layerDeltas gives a decoder layer's step the γ̂ and β̂ of its three
// sublayer norms, in order; nil in BASE models.
type layerDeltas struct {
	gammas, betas []*radgen.Tensor
}

// get returns γ̂ and β̂ of the layer's sublayer norm k.
func (d layerDeltas) get(k int) (gamma, beta *radgen.Tensor) { return d.gammas[k], d.betas[k] }

// conditionals returns the MCLNs of the decoder's sublayer norms, layer by
// layer (none in BASE models), in the order Step takes their γ̂ and β̂.
func (d *Decoder) conditionals() []*mcln.Conditional {
	var cs []*mcln.Conditional
	for _, l := range d.Layers {
		for i := range l.norms {
			if c := l.Norm(i); c != nil {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// VisitParams implements radgen.Module.
func (l *DecoderLayer) VisitParams(visit func(string, *radgen.Tensor)) {
	l.SelfAttn.VisitParams(radgen.Prefixed("self_attn.", visit))
	l.SrcAttn.VisitParams(radgen.Prefixed("src_attn.", visit))
	l.FeedForward.VisitParams(radgen.Prefixed("feed_forward.", visit))
	for i, n := range l.norms {
		n.VisitParams(radgen.Prefixed(fmt.Sprintf("sublayer.%d.norm.", i), visit))
	}
}

// Decoder is a stack of DecoderLayers followed by a plain LayerNorm.
type Decoder struct {
	Layers []*DecoderLayer
	Norm   *mcln.LayerNorm
}

// NewDecoder returns c.Layers decoder layers, with MCLN norms in the full
// model (VariantR2Gen) and R2Gen's LayerNorm otherwise, initialised as
// R2Gen's make_model does.
func NewDecoder(c Config, rng *rand.Rand) *Decoder {
	d := &Decoder{Norm: mcln.NewLayerNorm(c.DModel)}
	memWidth := c.MemorySlots * c.DModel
	for range c.Layers {
		l := &DecoderLayer{
			SelfAttn:    mesh.NewMultiHeadAttention(c.DModel, c.Heads, c.Dropout, rng),
			SrcAttn:     mesh.NewMultiHeadAttention(c.DModel, c.Heads, c.Dropout, rng),
			FeedForward: mesh.NewFeedForward(c.DModel, c.DFF, c.Dropout, rng),
			Dropout:     c.Dropout,
		}
		for i := range l.norms {
			if c.Variant == VariantR2Gen {
				l.norms[i].cond = mcln.NewConditional(c.DModel, memWidth, rng)
			} else {
				l.norms[i].plain = mcln.NewLayerNorm(c.DModel)
			}
		}
		d.Layers = append(d.Layers, l)
	}
	return d
}

// Forward decodes x (B, T, D) over the encoder output enc (B, N, D).
func (d *Decoder) Forward(g *radgen.Graph, x, enc, srcMask, tgtMask, memory *radgen.Tensor) *radgen.Tensor {
	for _, l := range d.Layers {
		x = l.Forward(g, x, enc, srcMask, tgtMask, memory)
	}
	return d.Norm.Forward(g, x)
}

// ForwardSources decodes x (B, T, D) with a source per layer: layer i
// attends to srcs[i] (B, N, D) (T_i = f(T_{i−1}, src_i), Liu et al.
// Eqs. 5 and 8).
func (d *Decoder) ForwardSources(g *radgen.Graph, x *radgen.Tensor, srcs []*radgen.Tensor, srcMask, tgtMask, memory *radgen.Tensor) *radgen.Tensor {
	if len(srcs) != len(d.Layers) {
		panic(fmt.Sprintf("r2gen: %d sources for %d decoder layers", len(srcs), len(d.Layers)))
	}
	for i, l := range d.Layers {
		x = l.Forward(g, x, srcs[i], srcMask, tgtMask, memory)
	}
	return d.Norm.Forward(g, x)
}

// VisitParams implements radgen.Module.
func (d *Decoder) VisitParams(visit func(string, *radgen.Tensor)) {
	for i, l := range d.Layers {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("layers.%d.", i), visit))
	}
	d.Norm.VisitParams(radgen.Prefixed("norm.", visit))
}

// Embeddings maps token ids to lut(id)·√D + PE(pos) (Vaswani et al. 2017,
// §3.4–3.5), with the sinusoidal table stored as a buffer as R2Gen does
// (tgt_embed.0.lut.weight, tgt_embed.1.pe).
type Embeddings struct {
	Table    *radgen.Tensor // (V, D)
	Position *radgen.Tensor // (1, P, D), a buffer
	Dropout  float64
}

// NewEmbeddings returns the token embedding of c.Vocab ids and the
// sinusoidal table of c.PositionLen positions.
func NewEmbeddings(c Config, rng *rand.Rand) *Embeddings {
	e := &Embeddings{Table: radgen.NewParam(c.Vocab, c.DModel), Position: Sinusoid(c.PositionLen, c.DModel), Dropout: c.Dropout}
	radgen.XavierUniform(e.Table, rng)
	return e
}

// Sinusoid returns PE(pos, 2i) = sin(pos/10000^(2i/D)), PE(pos, 2i+1) =
// cos(·), computed as R2Gen does through exp(2i·(−ln 10000/D)).
func Sinusoid(n, d int) *radgen.Tensor {
	pe := radgen.Zeros(1, n, d)
	data := pe.Data()
	for pos := 0; pos < n; pos++ {
		for i := 0; i < d; i += 2 {
			div := float32(math.Exp(float64(float32(i) * float32(-math.Log(10000.0)/float64(d)))))
			angle := float64(float32(pos) * div)
			data[pos*d+i] = float32(math.Sin(angle))
			if i+1 < d {
				data[pos*d+i+1] = float32(math.Cos(angle))
			}
		}
	}
	return pe
}

// Forward embeds ids (B·T values, row-major) starting at position start,
// returning (B, T, D).
func (e *Embeddings) Forward(g *radgen.Graph, ids []int, b, t, start int) *radgen.Tensor {
	d := e.Table.Dim(1)
	x := g.Scale(g.Embedding(e.Table, ids, b, t), math.Sqrt(float64(d)))
	pe := g.Slice(e.Position, 1, start, start+t) // (1, T, D)
	return g.Dropout(g.Add(x, pe), e.Dropout)
}

// VisitParams implements radgen.Module.
func (e *Embeddings) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("0.lut.weight", e.Table)
	visit("1.pe", e.Position)
}
