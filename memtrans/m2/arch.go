package m2

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
)

// Name is the name the Meshed-Memory Transformer is registered under
// (arch.Register): checkpoints record it.
const Name = "m2"

func init() { arch.Register[Config](Name) }

// cost is a model's size: parameter and activation values (upper
// estimates).
type cost struct{ params, acts float64 }

var (
	_ arch.EncoderDecoder = ReportModel{}
	_ arch.StepWeighted   = ReportModel{}
	_ arch.VisualEmbedder = ReportModel{}
	_ arch.FieldCoster    = Config{}
)

// ForReports returns c adapted to the facade's report vocabulary: the
// tokenizer's vocab ids (vocab = tokenizer size + 1; id 0 ends a report, as
// in R2Gen) followed by two ids of M²'s own, <bos> at vocab and <pad> at
// vocab+1, and a positional table for reports of maxSeqLen tokens (the
// decoder reads <bos> and up to maxSeqLen words).
func (c Config) ForReports(vocab, maxSeqLen int) Config {
	c.Vocab, c.BOS, c.Pad, c.EOS = vocab+2, vocab, vocab+1, 0
	c.MaxLen = maxSeqLen + 1
	// Every patch is a real region: nothing to mask.
	c.Padding = PadNone
	return c
}

// --- M²: Config implements arch.Config, ReportModel arch.EncoderDecoder ---

// Dims implements arch.Config: the report vocabulary, then M²'s <bos> and
// <pad> (see ForReports), and M²'s beam search.
func (c Config) Dims() arch.Dims {
	return arch.Dims{Vocab: c.Vocab, Words: c.Vocab - 2, VisualWidth: c.DIn, MaxSeqLen: c.MaxLen - 1, MaxLen: c.MaxLen, BOS: c.BOS, Semantics: decode.M2}
}

// Validate implements arch.Config: M²'s ids must be the facade's (see
// ForReports).
func (c Config) Validate(patches int) error {
	if err := c.ValidateShape(); err != nil {
		return err
	}
	if c.Vocab < 3 || c.EOS != 0 || c.BOS != c.Vocab-2 || c.Pad != c.Vocab-1 {
		return fmt.Errorf("%w: M² ids (vocab %d, bos %d, eos %d, pad %d) are not the facade's (see Config.ForReports)", arch.ErrConfig, c.Vocab, c.BOS, c.EOS, c.Pad)
	}
	return nil
}

// Cost implements arch.Config.
func (c Config) Cost(patches int) arch.Cost {
	k := c.cost(patches)
	return arch.Cost{Params: k.params, Activations: k.acts}
}

// New implements arch.Config: a Meshed-Memory Transformer over the
// facade's ids.
func (c Config) New(seed uint64) (arch.EncoderDecoder, error) {
	m, err := New(c, seed)
	if err != nil {
		return nil, err
	}
	return ReportModel{m}, nil
}

// ReportModel adapts a Model to the facade's ids: R2Gen's
// vocabulary, 0 ending a report, and M²'s <bos> and <pad> past it (see
// Config.ForReports).
type ReportModel struct{ *Model }

// Inputs maps R2Gen decoder inputs (b×t ids, t a row) to M²'s: the first id of each row
// (R2Gen's BOS 0) becomes <bos>, a later 0 (the end or padding) <pad>.
func (f ReportModel) Inputs(in []int, t int) []int {
	c := f.Model.Config
	out := make([]int, len(in))
	for i, id := range in {
		switch {
		case i%t == 0:
			out[i] = c.BOS
		case id == 0:
			out[i] = c.Pad
		default:
			out[i] = id
		}
	}
	return out
}

// Config implements arch.EncoderDecoder with the model's Config.
func (f ReportModel) Config() arch.Config { return f.Model.Config }

// LogProbs implements arch.EncoderDecoder: M²'s teacher forcing over the
// report ids mapped by Inputs.
func (f ReportModel) LogProbs(g *radgen.Graph, feats *radgen.Tensor, in []int, b, t int) (*radgen.Tensor, error) {
	if t <= 0 {
		return nil, fmt.Errorf("m2: %d tokens for a (%d, %d) batch", len(in), b, t)
	}
	enc, err := f.Encode(g, feats)
	if err != nil {
		return nil, err
	}
	return f.TeacherForce(g, enc, f.Inputs(in, t), b, t)
}

// Loss implements arch.EncoderDecoder: the language model's loss.
func (f ReportModel) Loss(g *radgen.Graph, feats *radgen.Tensor, batch arch.Batch) (*radgen.Tensor, error) {
	if err := arch.CheckBatch(batch, f.Model.Config.Dims()); err != nil {
		return nil, err
	}
	lp, err := f.LogProbs(g, feats, batch.In, batch.Size, batch.Len)
	if err != nil {
		return nil, err
	}
	// M²'s NLLLoss ignores <pad> targets; here the batch mask says which
	// targets count, so the end id 0 is learned as a word, as in R2Gen.
	return arch.LanguageModelLoss(g, lp, batch.Targets, batch.Mask), nil
}

// StartDecoding implements arch.EncoderDecoder with the meshed decoder's
// own steps (see Decoding), starting from <bos>.
func (f ReportModel) StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error) {
	return f.NewDecoding(feats, opts...)
}

// VisualEmbedding implements arch.VisualEmbedder: the encoder's input
// projection.
func (f ReportModel) VisualEmbedding() *radgen.Linear { return f.Encoder.FC }

// StepWeights implements arch.StepWeighted: the meshed decoder layers'
// matrices (the encoder attention's keys and values are projected once per
// study), the multi-view routings' and the logit layer's.
func (f ReportModel) StepWeights() []*radgen.Tensor {
	d := f.Decoder
	ws := []*radgen.Tensor{d.FC.Weight}
	for i, l := range d.Layers {
		self := l.SelfAtt.Attention
		ws = append(ws, self.FCQ.Weight, self.FCK.Weight, self.FCV.Weight, self.FCO.Weight)
		if enc := l.EncAtt(); enc != nil {
			ws = append(ws, enc.Attention.FCQ.Weight, enc.Attention.FCO.Weight)
		}
		ws = append(ws, l.PWFF.FC1.Weight, l.PWFF.FC2.Weight)
		for _, a := range l.Mesh.Gates {
			ws = append(ws, a.Weight)
		}
		if i < len(d.Views) && d.Views[i] != nil {
			v := d.Views[i]
			for _, mix := range v.Mix {
				ws = append(ws, mix.Weight)
			}
			if v.Score != nil {
				ws = append(ws, v.Score.Weight)
			}
		}
	}
	return ws
}

// cost estimates the Meshed-Memory Transformer over p regions.
func (c Config) cost(p int) cost {
	d, f, h := float64(c.DModel), float64(c.DFF), float64(c.Heads)
	qk, vv, s := h*float64(c.DK), h*float64(c.DV), float64(c.MemorySlots)
	ne, nd, v := float64(c.EncLayers), float64(c.DecLayers), float64(c.Vocab)
	t, n := float64(c.MaxLen+1), float64(p)
	att := 2*d*qk + 2*d*vv + 2*qk + 2*vv + 4*d
	params := float64(c.DIn)*d + d +
		ne*(att+s*(qk+vv)+2*d*f+f+7*d) +
		nd*(2*att+ne*(2*d*d+d)+2*d*f+f+7*d) +
		v*d + t*d + d*v + v
	acts := ne*(h*n*(n+s)+n*(f+8*d)) + nd*(h*t*(t+ne*n)+t*(f+(8+2*ne)*d)) + 3*t*v
	return cost{params, acts}
}

// FieldCost implements arch.FieldCoster: budget errors name the field
// that makes a model too large.
func (c Config) FieldCost() ([]arch.Field, func(patches int) arch.Cost) {
	return []arch.Field{{Name: "d_model", Value: &c.DModel, Reference: 512}, {Name: "d_k", Value: &c.DK, Reference: 64}, {Name: "d_v", Value: &c.DV, Reference: 64}, {Name: "heads", Value: &c.Heads, Reference: 8}, {Name: "d_ff", Value: &c.DFF, Reference: 2048},
		{Name: "enc_layers", Value: &c.EncLayers, Reference: 3}, {Name: "dec_layers", Value: &c.DecLayers, Reference: 3}, {Name: "memory_slots", Value: &c.MemorySlots, Reference: 40},
		{Name: "d_in", Value: &c.DIn, Reference: 2048}, {Name: "vocab", Value: &c.Vocab, Reference: 10000}, {Name: "max_len", Value: &c.MaxLen, Reference: 101}}, func(p int) arch.Cost { return c.Cost(p) }
}
