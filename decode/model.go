package decode

import (
	"context"
	"errors"
)

// Model is a batch of decoding rows that a strategy steps one token at a time.
// Its owner starts it on B encoded studies, one row per study (row i decodes
// study i), and hands it to a [Strategy]; see the package doc for the row
// layout the strategies use after that.
//
// A Model is used by one strategy at a time, from one goroutine.
type Model interface {
	// VocabSize returns V, the number of log-probabilities per row (for
	// R2Gen, len(idx2token)+1: id 0 is BOS, EOS and padding at once).
	VocabSize() int

	// Rows returns the current number of rows.
	Rows() int

	// Step feeds one token per row (len(tokens) == Rows(), each in [0, V))
	// and writes the log-probabilities of the next token, [Rows() × V]
	// row-major, into dst (len(dst) ≥ Rows()·V). The values must be
	// normalised log-probabilities (≤ 0; -Inf allowed), as log_softmax
	// gives. Step must not keep tokens or dst after it returns. It should
	// return ctx.Err() promptly if ctx is done while it works.
	Step(ctx context.Context, tokens []int, dst []float32) error

	// Reorder makes row i of the new state a copy of row src[i] of the old
	// one, for every i < len(src); afterwards Rows() == len(src). Indices
	// may repeat and len(src) may differ from Rows(): the first beam step
	// expands B rows to B·k. Every src[i] is in [0, Rows()).
	Reorder(src []int) error
}

// AttentionRecorder is implemented by models that can report, after each
// Step, how each row attended to its study (for R2Gen, the cross-attention
// weights over the image patches, averaged over heads, as R2Gen's attention
// plots do). Strategies with Attention set use it to return one row of
// weights per generated token.
type AttentionRecorder interface {
	Model

	// AttentionWidth returns A, the number of weights per row.
	AttentionWidth() int

	// Attention writes the weights of the last Step, [Rows() × A]
	// row-major, into dst.
	Attention(dst []float32) error
}

// Hypothesis is one decoded sequence.
type Hypothesis struct {
	// Tokens are the generated ids, without BOS. They end with EOS when the
	// model produced it, and otherwise stop at the maximum length. (R2Gen's
	// beam search can save a beam that went on after an EOS, with its 1000
	// handicap; such a hypothesis holds everything R2Gen's seq holds, and
	// ranks far below the others.)
	Tokens []int

	// LogProbs[i] is the log-probability of Tokens[i] as R2Gen reports it
	// (its seqLogprobs gathered at the token): for greedy decoding and
	// sampling, the model's value after the decoding-constraint and
	// trigram adjustments but before temperature, top-k or top-p; for beam
	// search, the model's value after the decoding constraint (and the
	// temperature renormalisation) but before the diversity penalty.
	LogProbs []float32

	// Score ranks the hypotheses of a study: for beam search, R2Gen's p
	// (the beam's summed log-probability, through the length penalty) or
	// M²'s final sequence log-probability; for greedy decoding and
	// sampling, the sum of LogProbs.
	Score float64

	// Attention holds [len(Tokens) × A] weights when the strategy was asked
	// for them: row i is the attention of the step that produced Tokens[i].
	Attention []float32
}

// Strategy is a decoding algorithm with its settings: [Greedy], [BeamSearch]
// or [Sample].
type Strategy interface {
	// Decode decodes every study of m (one row per study, as its owner
	// started it) and returns the hypotheses of each study, best first:
	// result[i] belongs to study i. It returns an error wrapping one of the
	// package's sentinels for bad settings or a model that breaks its
	// contract, the model's own errors wrapped, or ctx.Err().
	Decode(ctx context.Context, m Model) ([][]Hypothesis, error)
}

// Errors returned (wrapped, with details) by the strategies and by [Recompute].
var (
	// ErrNilModel: the model is nil.
	ErrNilModel = errors.New("decode: nil model")

	// ErrVocab: the model's vocabulary size is not positive.
	ErrVocab = errors.New("decode: vocabulary size must be positive")

	// ErrBeamSize: the beam size is ≤ 0, larger than the vocabulary, or not
	// a multiple of the number of groups.
	ErrBeamSize = errors.New("decode: beam size out of range")

	// ErrMaxLen: the maximum length is ≤ 0.
	ErrMaxLen = errors.New("decode: maximum length must be positive")

	// ErrToken: a token id (BOS, EOS, or one fed to Recompute) is outside
	// [0, V).
	ErrToken = errors.New("decode: token id out of range")

	// ErrShape: a slice passed to a [Model] method has the wrong length
	// (tokens ≠ rows, dst too short) or an index is out of range.
	ErrShape = errors.New("decode: wrong length or index")

	// ErrOption: another setting is invalid (a temperature ≤ 0, top-p
	// outside [0, 1], a negative count, a combination that the chosen
	// semantics do not define).
	ErrOption = errors.New("decode: invalid option")

	// ErrModel: the model broke its contract (a NaN or +Inf
	// log-probability, a wrong row count after Reorder, a negative row
	// count or attention width).
	ErrModel = errors.New("decode: model broke its contract")

	// ErrNoAttention: attention was requested from a model that does not
	// implement [AttentionRecorder].
	ErrNoAttention = errors.New("decode: model does not record attention")
)
