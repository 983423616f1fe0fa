package arch

import (
	"context"
	"errors"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// Config is an architecture's configuration: data, saved in a checkpoint
// as JSON beside the weights under the name its type is registered with
// (see [Register]), and decoded back into the same type on loading.
//
// Token ids are the report vocabulary's: the tokenizer's ids, where 0 is at
// once the start, the end and the padding of a report (R2Gen's convention),
// so Dims().Vocab is the tokenizer's size + 1. An architecture may add ids
// of its own past them (M²'s <bos> and <pad>); a decoding must then give
// them −Inf.
type Config interface {
	// Dims returns the sizes and ids the facade needs to feed the
	// architecture and decode its output.
	Dims() Dims
	// Validate reports the first inconsistency of the configuration for
	// studies of patches visual tokens; the errors name the field.
	Validate(patches int) error
	// Cost returns upper estimates, computed from the configuration alone
	// (in float64, so no configuration can overflow them), of the
	// encoder–decoder's parameter values and of the float32 activation
	// values one study of patches visual tokens needs in a training step.
	// The facade refuses a configuration beyond its budget before New is
	// called.
	Cost(patches int) Cost
	// New builds an encoder–decoder of this configuration, its weights
	// drawn from a generator seeded with seed.
	New(seed uint64) (EncoderDecoder, error)
}

// Dims are the sizes and ids of an architecture's interface to the facade.
type Dims struct {
	// Vocab is the width of a row of log-probabilities: at least the
	// report vocabulary (tokenizer size + 1), plus any ids of the
	// architecture's own.
	Vocab int
	// Words is the report vocabulary: tokenizer size + 1. Ids in
	// [Words, Vocab) are the architecture's own and never end up in a
	// report.
	Words int
	// VisualWidth is the width of the visual features the encoder takes
	// (2048 for ResNet-101 patches).
	VisualWidth int
	// MaxSeqLen is the longest report, in tokens, trained on and written
	// by default (R2Gen's max_seq_length).
	MaxSeqLen int
	// MaxLen is the longest report a decoding can write (its positional
	// table).
	MaxLen int
	// BOS is the id every decoding starts from (R2Gen: 0).
	BOS int
	// Semantics is the beam search's rules for this architecture's
	// decodings: decode.R2Gen or decode.M2.
	Semantics decode.Semantics
}

// Cost is the size of a model: parameter values, and float32 activation
// values per study in a training step.
type Cost struct {
	Params      float64
	Activations float64
}

// CheckHard reports an error wrapping ErrConfig and ErrBudget, naming the
// architecture what, when c is beyond what a constructor accepts whatever
// the facade's budget: 2^34 parameters (64 GiB of float32) and 2^36
// activation values, beyond which tensor shapes could overflow.
func (c Cost) CheckHard(what string) error {
	if c.Params > 1<<34 || c.Activations > 1<<36 {
		return fmt.Errorf("%w: %w: %s of about %.3g parameters and %.3g activation values", ErrConfig, ErrBudget, what, c.Params, c.Activations)
	}
	return nil
}

// Batch is a teacher-forced batch of Size reports of Len positions each:
// In holds the decoder's inputs (Size·Len ids, row-major: each report's
// tokens from its start id 0, without the last), Targets the ids each
// position predicts (the same reports shifted by one), and Mask is 1 where a
// target counts in the loss and 0 on padding.
type Batch struct {
	In, Targets []int
	Mask        []float32
	Size, Len   int
}

// EncoderDecoder is an architecture's encoder–decoder over visual features
// (B, N, VisualWidth): the part of a report generator after the visual
// extractor. The facade (memtrans) trains, saves, loads, decodes and serves
// any EncoderDecoder through these methods alone.
//
// Its parameters (radgen.Module) are named as its checkpoints name them;
// the facade prefixes them with "encoder_decoder.". An EncoderDecoder is
// used by one goroutine at a time while it trains; decodings on NoGrad
// graphs may run concurrently.
type EncoderDecoder interface {
	radgen.Module
	// Config returns the configuration the encoder–decoder was built from.
	Config() Config
	// LogProbs returns the teacher-forced log-probabilities (B, T, Vocab)
	// of the reports whose inputs are in (B·T ids, row-major, each row
	// starting with 0) for studies feats, recorded on g.
	LogProbs(g *radgen.Graph, feats *radgen.Tensor, in []int, b, t int) (*radgen.Tensor, error)
	// Loss returns the training objective of a teacher-forced batch,
	// recorded on g: the language model's loss (the mean negative
	// log-probability of the masked targets, as [LanguageModelLoss]) plus
	// any auxiliary loss of the architecture, as a scalar.
	Loss(g *radgen.Graph, feats *radgen.Tensor, batch Batch) (*radgen.Tensor, error)
	// StartDecoding begins an incremental decoding of the studies feats,
	// one row per study, on a graph that records no gradient and takes
	// opts (radgen.SubstituteWeights, for one). The first step takes
	// Dims().BOS for every row. Its Step must give the log-probabilities of
	// teacher forcing for the same prefix, and Reorder must follow beam
	// ancestry. A decoding that holds pooled memory implements
	// [Releaser]; one that records attention maps implements
	// decode.AttentionRecorder.
	StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error)
}

// Releaser is implemented by a decoding that holds pooled memory: the
// facade calls Release once the decoding is done with.
type Releaser interface {
	Release()
}

// StudyDecoder is implemented by an architecture that writes a study's
// report otherwise than by running the strategy over one decoding
// (METransformer: each expert writes a candidate and the experts vote). The
// facade calls DecodeStudies in place of StartDecoding and the strategy.
type StudyDecoder interface {
	DecodeStudies(ctx context.Context, feats *radgen.Tensor, strategy decode.Strategy, opts ...radgen.GraphOption) ([]Decoded, error)
}

// Decoded is one study's report as a StudyDecoder writes it.
type Decoded struct {
	// Best is the report.
	Best decode.Hypothesis
	// Candidates are the reports it was chosen from, Chosen its index
	// among them and Scores theirs (for example each expert's votes).
	Candidates []decode.Hypothesis
	Chosen     int
	Scores     []float64
}

// StepWeighted is implemented by an architecture whose decoding steps read
// weight matrices that may be stored in half precision
// (memtrans.WithHalfWeights): neither what a decoding applies once per study
// nor a recurrence's own weights.
type StepWeighted interface {
	StepWeights() []*radgen.Tensor
}

// Continuer is implemented by an architecture that can continue another
// model's training: ContinueFrom loads from src (names prefix + the
// tensor's name, as the other encoder–decoder's VisitParams names them)
// the tensors it shares with that model and leaves the rest as
// initialised, and leaves the receiver unchanged on error
// (memtrans.Model.ContinueFrom). R2Gen continues from R2Gen weights into
// its multi-view and Mem2Mem variants (Liu et al. §3.3.2).
type Continuer interface {
	ContinueFrom(src radgen.TensorSource, prefix string) error
}

// VisualEmbedder is implemented by an architecture whose first map over
// the visual features is a linear layer: a trainer with a frozen extractor
// standardises the features through it (memtrans.TrainConfig's
// CalibrateBatches).
type VisualEmbedder interface {
	VisualEmbedding() *radgen.Linear
}

// ErrReleased is the error of a step of a decoding after its Release.
var ErrReleased = errors.New("arch: step of a released decoding")
