package r2gen

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/mesh"
)

// EncoderLayer is a pre-norm Transformer layer:
// x += Dropout(SelfAttn(LN₀(x))); x += Dropout(FFN(LN₁(x))).
// SelfAttn is R2Gen's multi-head attention; any [mesh.Attention] may take
// its place (M²'s memory-augmented attention, for one), its parameters
// then named under self_attn. as its own VisitParams names them.
type EncoderLayer struct {
	SelfAttn    mesh.Attention
	FeedForward *mesh.FeedForward
	Norms       [2]*mcln.LayerNorm // sublayer.{0,1}.norm
	Dropout     float64
}

// NewEncoderLayer returns an encoder layer of c's sizes with R2Gen's
// multi-head attention, initialised as R2Gen's make_model does.
func NewEncoderLayer(c LayerConfig, rng *rand.Rand) *EncoderLayer {
	c.check()
	return &EncoderLayer{
		SelfAttn:    mesh.NewMultiHeadAttention(c.DModel, c.Heads, c.Dropout, rng),
		FeedForward: mesh.NewFeedForward(c.DModel, c.DFF, c.Dropout, rng),
		Norms:       [2]*mcln.LayerNorm{mcln.NewLayerNorm(c.DModel), mcln.NewLayerNorm(c.DModel)},
		Dropout:     c.Dropout,
	}
}

// Forward runs the layer on x (B, N, D) with mask (B, 1, N) (see
// [SourceMask]) or nil.
func (l *EncoderLayer) Forward(g *radgen.Graph, x, mask *radgen.Tensor) *radgen.Tensor {
	h := l.Norms[0].Forward(g, x)
	x = g.Add(x, g.Dropout(l.SelfAttn.Forward(g, h, h, h, mask), l.Dropout))
	return g.Add(x, g.Dropout(l.FeedForward.Forward(g, l.Norms[1].Forward(g, x)), l.Dropout))
}

// VisitParams implements radgen.Module.
func (l *EncoderLayer) VisitParams(visit func(string, *radgen.Tensor)) {
	l.SelfAttn.VisitParams(radgen.Prefixed("self_attn.", visit))
	l.FeedForward.VisitParams(radgen.Prefixed("feed_forward.", visit))
	for i, n := range l.Norms {
		n.VisitParams(radgen.Prefixed(fmt.Sprintf("sublayer.%d.norm.", i), visit))
	}
}

// Encoder is a stack of EncoderLayers followed by a final LayerNorm.
type Encoder struct {
	Layers []*EncoderLayer
	Norm   *mcln.LayerNorm
}

// NewEncoder returns c.Layers encoder layers and the final norm.
func NewEncoder(c Config, rng *rand.Rand) *Encoder {
	e := &Encoder{Norm: mcln.NewLayerNorm(c.DModel)}
	for range c.Layers {
		e.Layers = append(e.Layers, NewEncoderLayer(c.EncoderLayer(), rng))
	}
	return e
}

// Forward encodes x (B, N, D).
func (e *Encoder) Forward(g *radgen.Graph, x, mask *radgen.Tensor) *radgen.Tensor {
	for _, l := range e.Layers {
		x = l.Forward(g, x, mask)
	}
	return e.Norm.Forward(g, x)
}

// ForwardLevels encodes x (B, N, D) and returns every layer's output
// S_1..S_N (B, N, D), each through the encoder's final LayerNorm; the last
// is Forward's result. R2Gen's layers are pre-norm, so the raw output of an
// inner layer is an un-normalised residual stream; sharing the final norm
// puts all levels on the scale the decoder was trained on, with no new
// parameters (layer-wise multi-view decoding, Liu et al. Eq. 1).
func (e *Encoder) ForwardLevels(g *radgen.Graph, x, mask *radgen.Tensor) []*radgen.Tensor {
	out := make([]*radgen.Tensor, len(e.Layers))
	for i, l := range e.Layers {
		x = l.Forward(g, x, mask)
		out[i] = e.Norm.Forward(g, x)
	}
	return out
}

// VisitParams implements radgen.Module.
func (e *Encoder) VisitParams(visit func(string, *radgen.Tensor)) {
	for i, l := range e.Layers {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("layers.%d.", i), visit))
	}
	e.Norm.VisitParams(radgen.Prefixed("norm.", visit))
}
