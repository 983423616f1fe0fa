package r2gen

import (
	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
)

// Name is the name R2Gen is registered under (arch.Register): checkpoints
// record it.
const Name = "r2gen"

func init() { arch.Register[Config](Name) }

// Dims implements arch.Config: R2Gen's ids are the report vocabulary's.
func (c Config) Dims() arch.Dims {
	return arch.Dims{Vocab: c.Vocab, Words: c.Vocab, VisualWidth: c.DVisual, MaxSeqLen: c.MaxSeqLen, MaxLen: c.PositionLen, Semantics: decode.R2Gen}
}

// Validate implements arch.Config.
func (c Config) Validate(patches int) error { return c.validateShape() }

// Cost implements arch.Config.
func (c Config) Cost(patches int) arch.Cost {
	k := c.cost(patches)
	return arch.Cost{Params: k.params, Activations: k.acts}
}

// New implements arch.Config: R2Gen's encoder–decoder, initialised as
// R2Gen's make_model does.
func (c Config) New(seed uint64) (arch.EncoderDecoder, error) { return New(c, seed) }

// Config implements arch.EncoderDecoder with the model's Config.
func (m *Model) Config() arch.Config { return m.config }

// LogProbs implements arch.EncoderDecoder: TeacherForce's LogProbs.
func (m *Model) LogProbs(g *radgen.Graph, feats *radgen.Tensor, in []int, b, t int) (*radgen.Tensor, error) {
	f, err := m.TeacherForce(g, feats, in, b, t)
	if err != nil {
		return nil, err
	}
	return f.LogProbs, nil
}

// Loss implements arch.EncoderDecoder: the language model's loss, plus
// Mem2Mem's penalty where configured (AuxLoss).
func (m *Model) Loss(g *radgen.Graph, feats *radgen.Tensor, batch arch.Batch) (*radgen.Tensor, error) {
	if err := arch.CheckBatch(batch, m.config.Dims()); err != nil {
		return nil, err
	}
	f, err := m.TeacherForce(g, feats, batch.In, batch.Size, batch.Len)
	if err != nil {
		return nil, err
	}
	loss := arch.LanguageModelLoss(g, f.LogProbs, batch.Targets, batch.Mask)
	if aux := m.AuxLoss(g, f); aux != nil { // e.g. Mem2Mem's penalty (seed 002, Eq. 12)
		loss = g.Add(loss, aux)
	}
	return loss, nil
}

// StartDecoding implements arch.EncoderDecoder with the paper modules'
// incremental steps (see Decoding).
func (m *Model) StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error) {
	return m.NewDecoding(feats, opts...)
}

// VisualEmbedding implements arch.VisualEmbedder: att_embed.
func (m *Model) VisualEmbedding() *radgen.Linear { return m.AttEmbed }

var (
	_ arch.EncoderDecoder = (*Model)(nil)
	_ arch.StepWeighted   = (*Model)(nil)
	_ arch.VisualEmbedder = (*Model)(nil)
	_ arch.Continuer      = (*Model)(nil)
	_ arch.FieldCoster    = Config{}
)
