package m2

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
)

// Decoding is the incremental decoding state of a batch of
// studies under an M2Transformer, built from the modules' own steps
// ([MeshedSteps]: the meshed layer's step over a key/value cache and
// over its sources projected once per study), so it runs on whatever
// device the model's parameters and the features live on, the CPU
// included. It implements decode.Model, so any strategy of package decode
// (M²'s own beam search: decode.BeamSearch{Semantics: decode.M2}) can
// drive it, and computes what the published stateful decoder computes:
// positional row t+1 at step t whatever the token (running_seq), <pad>
// masked as a key from its step on (running_mask_self_attention) and its
// row's output zeroed (mask_pad), every routing. Unlike the published
// decoder, which projects every earlier layer input again at every step,
// each position's keys and values are projected once and addressed
// through an ancestry, so that Reorder moves indices, never vectors.
//
// An Decoding belongs to one goroutine; the model may serve many
// concurrently.
type Decoding struct {
	m       *Model
	g       *radgen.Graph
	steps   *MeshedSteps
	regions int // R, regions per study

	// space holds each step's results on the CPU, in its arena: a step's
	// tensors (the log-probabilities, the attention) stay valid through
	// the next step, which is as long as they are read; the caches copy
	// what they keep.
	space *arch.Workspace
}

var (
	_ decode.Model             = (*Decoding)(nil)
	_ decode.AttentionRecorder = (*Decoding)(nil)
)

// NewDecoding encodes region features (B, R, d_in), on the device
// of the model's parameters, masking regions by Config.Padding, and
// returns a decoding state with one row per study whose steps run on a
// no-grad graph made with opts (radgen.SubstituteWeights).
func (m *Model) NewDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (*Decoding, error) {
	if err := m.checkFeats(feats); err != nil {
		return nil, err
	}
	w := m.Decoder.FC.Weight
	if feats.Is64() != w.Is64() {
		if feats.Is64() {
			feats = feats.To32()
		} else {
			feats = feats.To64()
		}
	}
	if feats.Device() != w.Device() {
		feats = feats.To(w.Device())
	}
	enc, err := m.Encode(radgen.NoGrad(), feats)
	if err != nil {
		return nil, err
	}
	return m.NewDecodingEncoded(enc, opts...)
}

// NewDecodingEncoded returns a decoding state with one row per
// study of an encoding made by Encode or EncodeMasked on the device of the
// model's parameters, whose steps run on a no-grad graph made with opts.
func (m *Model) NewDecodingEncoded(enc *Encoded, opts ...radgen.GraphOption) (*Decoding, error) {
	c := m.Config
	if enc == nil || enc.Levels == nil || enc.Levels.Rank() != 4 || enc.Levels.Dim(1) != c.EncLayers || enc.Levels.Dim(3) != c.DModel {
		return nil, fmt.Errorf("m2: M² encoding is not (B, %d, R, %d)", c.EncLayers, c.DModel)
	}
	b, r := enc.Levels.Dim(0), enc.Levels.Dim(2)
	if enc.Mask != nil {
		if s := enc.Mask.Shape(); len(s) != 4 || enc.Mask.Len() != b*r || s[3] != r {
			return nil, fmt.Errorf("m2: M² region mask %v for %d studies of %d regions", s, b, r)
		}
	}
	if dev := m.Decoder.FC.Weight.Device(); enc.Levels.Device() != dev {
		return nil, fmt.Errorf("m2: M² encoding on %v, the decoder on %v", enc.Levels.Device(), dev)
	}
	g := radgen.NoGrad(opts...)
	space := arch.TakeWorkspace()
	space.Start(g) // the sources StartWith projects outlive every step
	steps := m.Decoder.StartWith(g, enc.Levels, enc.Mask, space.Caches(len(m.Decoder.Layers), b))
	s := &Decoding{m: m, g: g, steps: steps, regions: r, space: space}
	g.SetArena(s.space.Arena)
	return s, nil
}

// Release implements arch.Releaser: it gives the decoding's step space (its arena and self-attention
// caches) back for later decodings, once the strategy is done with it: the
// decoding steps no more.
func (s *Decoding) Release() {
	if s.space != nil {
		s.space.Release(s.g)
		s.space = nil
	}
}

// VocabSize implements decode.Model.
func (s *Decoding) VocabSize() int { return s.m.Config.Vocab }

// Rows implements decode.Model.
func (s *Decoding) Rows() int { return s.steps.Rows() }

// AttentionWidth implements decode.AttentionRecorder: the number of image
// regions of a study.
func (s *Decoding) AttentionWidth() int { return s.regions }

// Attention implements decode.AttentionRecorder: after a Step, the last
// decoder layer's cross-attention over the regions, averaged over heads
// and encoder levels (see [MeshedSteps.Attention]), [Rows() × R].
func (s *Decoding) Attention(dst []float32) error {
	a := s.steps.Attention(s.g)
	if a == nil {
		return fmt.Errorf("%w: no attention before a step", decode.ErrShape)
	}
	return arch.CopyLogProbs(dst, a)
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *Decoding) Reorder(src []int) error {
	if err := s.steps.Reorder(src); err != nil {
		return fmt.Errorf("%w: %v", decode.ErrShape, err)
	}
	return nil
}

// Step implements decode.Model: it consumes one token per row and writes
// the next token's log-probabilities.
func (s *Decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	c := s.m.Config
	R, V := s.steps.Rows(), c.Vocab
	if err := arch.CheckStep(ctx, tokens, dst, R, V, s.steps.Len(), s.m.Decoder.MaxLen()); err != nil {
		return err
	}
	if s.space == nil {
		return arch.ErrReleased
	}
	s.space.Arena.Next()
	lp := s.steps.Step(s.g, tokens)
	if err := ctx.Err(); err != nil {
		return err
	}
	return arch.CopyLogProbs(dst, lp)
}
