package metrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/metrics"
)

// Name is the name METransformer is registered under (arch.Register):
// checkpoints record it.
const Name = "metransformer"

func init() { arch.Register[Config](Name) }

// cost is a model's size: parameter and activation values (upper
// estimates).
type cost struct{ params, acts float64 }

// --- METransformer: Config implements arch.Config, Model
// arch.EncoderDecoder and arch.StudyDecoder ---

// Dims implements arch.Config.
func (c Config) Dims() arch.Dims {
	return arch.Dims{Vocab: c.Vocab, Words: c.Vocab, VisualWidth: c.DIn, MaxSeqLen: c.MaxSeqLen, MaxLen: c.MaxSeqLen + 1, Semantics: decode.R2Gen}
}

// Validate implements arch.Config: METransformer's positional table is
// sized for Patches visual tokens, which must be the extractor's.
func (c Config) Validate(patches int) error {
	if err := c.validateShape(); err != nil {
		return err
	}
	if c.Patches != patches {
		return fmt.Errorf("%w: METransformer takes %d visual tokens, the extractor gives %d per study", arch.ErrConfig, c.Patches, patches)
	}
	return nil
}

// Cost implements arch.Config.
func (c Config) Cost(patches int) arch.Cost {
	c.Patches = patches
	k := c.cost()
	return arch.Cost{Params: k.params, Activations: k.acts}
}

// New implements arch.Config.
func (c Config) New(seed uint64) (arch.EncoderDecoder, error) {
	return New(c, seed)
}

// Config implements arch.EncoderDecoder with the model's Config.
func (m *Model) Config() arch.Config { return m.config }

// LogProbs implements arch.EncoderDecoder with every expert's stream: row
// b·M + m of the result is expert m's for study b, as in its decodings.
func (m *Model) LogProbs(g *radgen.Graph, feats *radgen.Tensor, in []int, b, t int) (*radgen.Tensor, error) {
	f, err := m.TeacherForce(g, feats, in, b, t)
	if err != nil {
		return nil, err
	}
	return f.LogProbs, nil
}

// Loss implements arch.EncoderDecoder: every expert's language-model loss
// plus λ times the orthogonal loss of the expert tokens.
func (m *Model) Loss(g *radgen.Graph, feats *radgen.Tensor, batch arch.Batch) (*radgen.Tensor, error) {
	if err := arch.CheckBatch(batch, m.config.Dims()); err != nil {
		return nil, err
	}
	f, err := m.TeacherForce(g, feats, batch.In, batch.Size, batch.Len)
	if err != nil {
		return nil, err
	}
	total, _, _ := m.loss(g, f, batch.Targets, batch.Mask) // every expert's NLL + λ·orthogonal loss
	return total, nil
}

// StartDecoding implements arch.EncoderDecoder with one row per study and
// expert (row b·M + m is expert m's report of study b).
func (m *Model) StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error) {
	return m.startDecoding(feats, opts...)
}

// DecodeStudies implements arch.StudyDecoder: each expert writes a
// candidate with strategy and the experts vote.
func (m *Model) DecodeStudies(ctx context.Context, feats *radgen.Tensor, strategy decode.Strategy, opts ...radgen.GraphOption) ([]arch.Decoded, error) {
	// The experts vote by sentence BLEU-4 against the study's other
	// candidates, which depends on the study alone: a study's report is the
	// same alone and in any batch. CIDEr-D (metrics.CIDErDOfIDs) would take its
	// document frequencies from the whole batch, and gives every candidate
	// of a study scored alone 0.
	bleu, err := metrics.BLEUOfIDs(4)
	if err != nil {
		return nil, err
	}
	reps, err := m.generate(ctx, feats, strategy, decode.Vote{Score: decode.Scorer(bleu)}, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]arch.Decoded, len(reps))
	for i, r := range reps {
		out[i] = arch.Decoded{Best: r.Best, Candidates: r.Candidates, Chosen: r.Expert, Scores: r.Scores}
	}
	return out, nil
}

// VisualEmbedding implements arch.VisualEmbedder: the ViT's patch
// embedding.
func (m *Model) VisualEmbedding() *radgen.Linear { return m.ViT.Embed }

// StepWeights implements arch.StepWeighted: the decoder layers' bilinear
// attention matrices (the cross-attention's keys and values over the
// visual tokens are projected once per study), the fusions and the logit
// layer's.
func (m *Model) StepWeights() []*radgen.Tensor {
	ws := []*radgen.Tensor{m.Logit.Weight}
	for _, l := range m.Decoder {
		s, c := l.Self, l.Cross
		ws = append(ws, s.QueryKey.Weight, s.Key.Weight, s.QueryValue.Weight, s.Value.Weight, s.Mid.Weight, s.Spatial.Weight, s.Channel.Weight,
			c.QueryKey.Weight, c.QueryValue.Weight, c.Mid.Weight, c.Spatial.Weight, c.Channel.Weight)
		if l.Fuse != nil {
			ws = append(ws, l.Fuse.Weight)
		}
	}
	return ws
}

// cost estimates METransformer (its visual tokens are c.Patches).
func (c Config) cost() cost {
	d, f, h := float64(c.DModel), float64(c.DFF), float64(c.Heads)
	n, m, t, v := float64(c.Patches), float64(c.Experts), float64(c.MaxSeqLen+1), float64(c.Vocab)
	mid, lv, lb, ld := float64(c.DMid), float64(c.ViTLayers), float64(c.BilinearLayers), float64(c.DecoderLayers)
	k := n + m
	acts := lv*(h*k*k+k*(f+8*d)) + lb*m*n*(mid+4*d) + ld*m*t*(n+m+t)*(mid+4*d)/8 + ld*m*t*8*d + 3*m*t*v
	return cost{c.paramCount(), acts}
}

// FieldCost implements arch.FieldCoster: budget errors name the field
// that makes a model too large.
func (c Config) FieldCost() ([]arch.Field, func(patches int) arch.Cost) {
	return []arch.Field{{Name: "d_in", Value: &c.DIn, Reference: 2048}, {Name: "patches", Value: &c.Patches, Reference: 98}, {Name: "experts", Value: &c.Experts, Reference: 6}, {Name: "d_model", Value: &c.DModel, Reference: 512},
		{Name: "heads", Value: &c.Heads, Reference: 8}, {Name: "d_ff", Value: &c.DFF, Reference: 2048}, {Name: "d_mid", Value: &c.DMid, Reference: 256}, {Name: "vit_layers", Value: &c.ViTLayers, Reference: 3},
		{Name: "bilinear_layers", Value: &c.BilinearLayers, Reference: 1}, {Name: "decoder_layers", Value: &c.DecoderLayers, Reference: 3}, {Name: "vocab", Value: &c.Vocab, Reference: 10000},
		{Name: "max_seq_length", Value: &c.MaxSeqLen, Reference: 100}}, func(p int) arch.Cost { c.Patches = p; return c.Cost(p) }
}
