package m2

// M²'s meshed decoder. Mirrors aimagelab/meshed-memory-transformer
// models/transformer/decoders.py (MeshedDecoderLayer, MeshedDecoder).

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// MeshedLayer is one meshed decoder layer (Cornia et al. 2020, Eq. 9):
//
//	S    = AddNorm(S_mask(Y)) ⊙ pad                                 (self_att)
//	C_i  = AddNorm(C(X̃ⁱ, S)) ⊙ pad,  i = 1..N                       (Eq. 7, enc_att)
//	α_i  = σ(W_i [S; C_i] + b_i)                                     (Eq. 8, fc_alpha{i})
//	M    = (Σ_i α_i ⊙ C_i) / √N ⊙ pad                               (Eq. 6)
//	Ỹ    = AddNorm(F(M)) ⊙ pad                                       (pwff)
//
// where pad is 1 at real tokens and 0 at padding. The meshed
// cross-attention ([mesh.MeshedCrossAttention]) holds one cross-attention
// module, an [AttentionLayer] with its own residual and LayerNorm, shared
// by all N encoder levels, and the gates. Names: self_att.*, enc_att.*,
// pwff.*, fc_alpha1.* … fc_alphaN.*.
type MeshedLayer struct {
	SelfAtt *AttentionLayer
	Mesh    *mesh.MeshedCrossAttention // its Attention is the layer's enc_att, an *AttentionLayer
	PWFF    *PositionWiseFeedForward
}

// NewMeshedLayer returns a decoder layer for levels encoder levels, with
// Xavier-uniform matrices and zero gate biases (M²'s init: the published
// code zeroes fc_alpha biases explicitly and Transformer.init_weights
// re-initialises every matrix).
func NewMeshedLayer(d, dk, dv, h, dff, levels int, dropout float64, rng *rand.Rand) *MeshedLayer {
	if levels <= 0 {
		panic(fmt.Sprintf("m2: meshed layer over %d levels", levels))
	}
	// In the published order of initialisation: self_att, enc_att, pwff,
	// then the gates.
	self := NewAttentionLayer(mesh.NewScaledDotProductAttention(d, dk, dv, h, rng), dropout)
	enc := NewAttentionLayer(mesh.NewScaledDotProductAttention(d, dk, dv, h, rng), dropout)
	pwff := NewPositionWiseFeedForward(d, dff, dropout, rng)
	return &MeshedLayer{SelfAtt: self, Mesh: mesh.NewMeshedCrossAttention(enc, d, levels, rng), PWFF: pwff}
}

// EncAtt returns the layer's cross-attention (enc_att), or nil when
// Mesh.Attention is not an [AttentionLayer].
func (l *MeshedLayer) EncAtt() *AttentionLayer {
	a, _ := l.Mesh.Attention.(*AttentionLayer)
	return a
}

// VisitParams implements radgen.Module, in the published order.
func (l *MeshedLayer) VisitParams(visit func(string, *radgen.Tensor)) {
	l.SelfAtt.VisitParams(radgen.Prefixed("self_att.", visit))
	l.Mesh.Attention.VisitParams(radgen.Prefixed("enc_att.", visit))
	l.PWFF.VisitParams(radgen.Prefixed("pwff.", visit))
	l.Mesh.VisitGates(visit)
}

// Forward runs the layer on y (B, T, D) over the encoder levels (B, N, R,
// D). pad (B, T, 1) is 1 at real tokens and 0 at padding; selfMask
// (B|1, 1, T, T) and encMask (B|1, 1, 1, R) are masks (zero = masked),
// either may be nil.
func (l *MeshedLayer) Forward(g *radgen.Graph, y, levels, pad, selfMask, encMask *radgen.Tensor) *radgen.Tensor {
	s := l.SelfAtt.Forward(g, y, y, y, selfMask)
	if pad != nil {
		s = g.Mul(s, pad)
	}
	return l.feedForward(g, l.Mesh.Forward(g, s, levels, encMask, pad), pad)
}

// feedForward is the end of Eq. 9 after the meshed attention:
// Ỹ = AddNorm(F(M)) ⊙ pad, for Forward and Step alike. pad may be nil.
func (l *MeshedLayer) feedForward(g *radgen.Graph, m, pad *radgen.Tensor) *radgen.Tensor {
	out := l.PWFF.Forward(g, m)
	if pad != nil {
		out = g.Mul(out, pad)
	}
	return out
}

// MeshedDecoder is M²'s decoder: word embeddings plus a stored positional
// table, a stack of [MeshedLayer]s and a bias-free output projection
// followed by log-softmax (no final LayerNorm):
//
//	Y = word_emb(w) + pos_emb(p),  p = 1..T, 0 at padding tokens.
//
// There is no √D scaling of the word embeddings. The positional table is a
// frozen buffer (not trained, no gradient) whose rows are loaded, not
// regenerated: the published code builds a sinusoid table and its
// init_weights then overwrites it with Xavier-uniform values, so a
// checkpoint carries a random table. Names: word_emb.weight,
// pos_emb.weight, layers.i.*, fc.weight, and with routing views.i.*.
//
// With a multi-view [mesh.Routing] (Liu et al., layer-wise multi-view decoding),
// layer-wise routing takes the place of the mesh: decoder layer i reads a
// single source, LN(g_i(S) + S_N) (Liu et al. Eq. 8) over the encoder
// levels S, through the same gated cross-attention (Eqs. 6–8 with N = 1).
// The two papers do not combine the schemes; this is the combination in
// which a routing strategy decides what each decoder layer sees, as it does
// in R2Gen's decoder.
type MeshedDecoder struct {
	WordEmb *radgen.Tensor // (V, D)
	PosEmb  *radgen.Tensor // (P, D), P = max_len + 1; row 0 is the padding position
	Layers  []*MeshedLayer
	FC      *radgen.Linear    // D → V, no bias
	Pad     int               // padding token id (1 in M²'s vocabulary)
	Views   []*mesh.MultiView // per layer, with a multi-view routing; nil: meshed
}

// DecoderConfig sizes a [MeshedDecoder].
type DecoderConfig struct {
	Vocab   int          // output size
	MaxLen  int          // longest input; the positional table has MaxLen+1 rows (54 in M²)
	Pad     int          // <pad> id (1)
	D       int          // model width (512)
	DK, DV  int          // query/key and value widths per head (64, 64)
	Heads   int          // attention heads (8)
	DFF     int          // feed-forward width (2048)
	Layers  int          // decoder layers (3)
	Levels  int          // encoder levels N read by every layer (3)
	Dropout float64      // 0.1
	Routing mesh.Routing // layer-wise multi-view routing; mesh.RoutingNone: meshed (M²)
}

// NewMeshedDecoder returns a decoder initialised as M² leaves it: word
// embeddings, positional table and output weights Xavier-uniform (the
// published init_weights re-initialises every matrix, which also undoes
// nn.Embedding's zero padding row and the sinusoid table).
func NewMeshedDecoder(c DecoderConfig, rng *rand.Rand) *MeshedDecoder {
	if c.Vocab <= 0 || c.MaxLen <= 0 || c.Layers <= 0 || c.Pad < 0 || c.Pad >= c.Vocab || !c.Routing.Valid() ||
		c.Routing != mesh.RoutingNone && c.Layers > c.Levels {
		panic(fmt.Sprintf("m2: decoder config %+v", c))
	}
	dec := &MeshedDecoder{
		WordEmb: radgen.NewParam(c.Vocab, c.D),
		PosEmb:  radgen.Zeros(c.MaxLen+1, c.D),
		FC:      radgen.NewLinear(c.D, c.Vocab, false, rng),
		Pad:     c.Pad,
	}
	radgen.XavierUniform(dec.WordEmb, rng)
	radgen.XavierUniform(dec.PosEmb, rng)
	radgen.XavierUniform(dec.FC.Weight, rng)
	levels := c.Levels
	if c.Routing != mesh.RoutingNone {
		levels = 1
	}
	for range c.Layers {
		dec.Layers = append(dec.Layers, NewMeshedLayer(c.D, c.DK, c.DV, c.Heads, c.DFF, levels, c.Dropout, rng))
	}
	if c.Routing != mesh.RoutingNone {
		dec.Views = mesh.NewMultiViews(c.Routing, c.Layers, c.Levels, c.D, rng)
	}
	return dec
}

// VisitParams implements radgen.Module. The stateful-decoding buffers of
// the published state_dict (running_seq, running_mask_self_attention,
// running_keys, running_values) are empty state, not parameters, and are
// not listed.
func (dec *MeshedDecoder) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("word_emb.weight", dec.WordEmb)
	visit("pos_emb.weight", dec.PosEmb)
	for i, l := range dec.Layers {
		l.VisitParams(radgen.Prefixed(fmt.Sprintf("layers.%d.", i), visit))
	}
	dec.FC.VisitParams(radgen.Prefixed("fc.", visit))
	for i, v := range dec.Views {
		v.VisitParams(radgen.Prefixed(fmt.Sprintf("views.%d.", i), visit))
	}
}

// Sources returns what each decoder layer reads, (B, N', R, D): the encoder
// levels (B, N, R, D) themselves for every layer when meshed, or with a
// routing layer i's soft-integrated source LN(g_i(S) + S_N) as a single
// level (N' = 1; Liu et al. Eq. 8).
func (dec *MeshedDecoder) Sources(g *radgen.Graph, levels *radgen.Tensor) []*radgen.Tensor {
	out := make([]*radgen.Tensor, len(dec.Layers))
	if dec.Views == nil {
		for i := range out {
			out[i] = levels
		}
		return out
	}
	b, n, r, d := levels.Dim(0), levels.Dim(1), levels.Dim(2), levels.Dim(3)
	s := make([]*radgen.Tensor, n)
	for j := range s {
		s[j] = g.Reshape(g.Slice(levels, 1, j, j+1), b, r, d)
	}
	for i, v := range dec.Views {
		out[i] = g.Reshape(v.Forward(g, s), b, 1, r, d)
	}
	return out
}

// MaxLen returns the longest input the positional table covers.
func (dec *MeshedDecoder) MaxLen() int { return dec.PosEmb.Dim(0) - 1 }

// Masks returns the teacher-forcing masks of MeshedDecoder.forward for
// tokens (B·T ids, row-major): pad (B, T, 1), 1 at real tokens, the
// positions (1..T, 0 at padding), and the self-attention mask (B, 1, T, T),
// 0 = masked, hiding future positions and padding keys.
func (dec *MeshedDecoder) Masks(tokens []int, b, t int) (pad *radgen.Tensor, positions []int, selfMask *radgen.Tensor) {
	pad = radgen.Zeros(b, t, 1)
	selfMask = radgen.Zeros(b, 1, t, t)
	positions = make([]int, b*t)
	pd, sd := pad.Data(), selfMask.Data()
	for i := range b {
		for q := range t {
			if tokens[i*t+q] != dec.Pad {
				pd[i*t+q] = 1
				positions[i*t+q] = q + 1
			}
			for k := range t {
				if k <= q && tokens[i*t+k] != dec.Pad {
					sd[(i*t+q)*t+k] = 1
				}
			}
		}
	}
	return pad, positions, selfMask
}

// Forward is the teacher-forced pass: tokens (B·T ids, row-major) over the
// encoder levels (B, N, R, D) with the encoder mask (B|1, 1, 1, R), zero =
// masked, or nil. It returns the log-probabilities (B, T, V). It panics
// on a token outside the vocabulary or T beyond the positional table.
func (dec *MeshedDecoder) Forward(g *radgen.Graph, tokens []int, b, t int, levels, encMask *radgen.Tensor) *radgen.Tensor {
	if len(tokens) != b*t || t > dec.MaxLen() {
		panic(fmt.Sprintf("m2: %d tokens as (%d, %d) with a positional table for %d", len(tokens), b, t, dec.MaxLen()))
	}
	pad, positions, selfMask := dec.Masks(tokens, b, t)
	if levels.Is64() {
		pad, selfMask = pad.To64(), selfMask.To64()
	}
	pad, selfMask = pad.To(levels.Device()), selfMask.To(levels.Device())
	y := dec.embed(g, tokens, positions, b, t)
	for i, src := range dec.Sources(g, levels) {
		y = dec.Layers[i].Forward(g, y, src, pad, selfMask, encMask)
	}
	return dec.logProbs(g, y)
}

// embed returns Y = word_emb(w) + pos_emb(p), (B, T, D), for tokens and
// positions (B·T each, row-major).
func (dec *MeshedDecoder) embed(g *radgen.Graph, tokens, positions []int, b, t int) *radgen.Tensor {
	return g.Add(g.Embedding(dec.WordEmb, tokens, b, t), g.Embedding(dec.PosEmb, positions, b, t))
}

// logProbs returns log_softmax(fc(y)) for the last layer's output y.
func (dec *MeshedDecoder) logProbs(g *radgen.Graph, y *radgen.Tensor) *radgen.Tensor {
	return g.LogSoftmax(dec.FC.Forward(g, y))
}

var (
	_ radgen.Module = (*MeshedLayer)(nil)
	_ radgen.Module = (*MeshedDecoder)(nil)
)
