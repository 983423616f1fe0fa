package decode

import (
	"context"
	"fmt"
)

// PrefixScorer scores whole prefixes, as the published R2Gen does at every
// step (its core re-runs the decoder and the relational memory over the full
// prefix): prefixes is (rows, length) row-major, each row beginning with the
// BOS that the first Step fed; studies[r] is the study row r decodes (in the
// numbering of [NewRecompute]); dst receives the log-probabilities of the
// token after each prefix, (rows, V). It must not keep its arguments.
type PrefixScorer func(ctx context.Context, studies []int, prefixes []int, length int, dst []float32) error

// Recompute is a [Model] that keeps every row's prefix and re-scores all of
// it at each Step: O(T²) work for T tokens, the published R2Gen's behaviour.
// It is the baseline for benchmarks and the cross-check for an incremental
// model, which must produce the same log-probabilities.
//
// A Recompute is not safe for concurrent use.
type Recompute struct {
	vocab  int
	score  PrefixScorer
	length int   // tokens fed to each row so far
	prefix []int // (rows, length)
	study  []int // (rows) the study of each row
	bufP   []int
	bufS   []int
}

var _ Model = (*Recompute)(nil)

// NewRecompute returns a Recompute over studies studies (one row each, row i
// decoding study i) and a vocabulary of vocab tokens.
func NewRecompute(studies, vocab int, score PrefixScorer) (*Recompute, error) {
	switch {
	case score == nil:
		return nil, fmt.Errorf("%w: nil PrefixScorer", ErrNilModel)
	case vocab <= 0:
		return nil, fmt.Errorf("%w: %d", ErrVocab, vocab)
	case studies < 0:
		return nil, fmt.Errorf("%w: %d studies", ErrShape, studies)
	}
	r := &Recompute{vocab: vocab, score: score, study: make([]int, studies)}
	for i := range r.study {
		r.study[i] = i
	}
	return r, nil
}

// VocabSize implements [Model].
func (r *Recompute) VocabSize() int { return r.vocab }

// Rows implements [Model].
func (r *Recompute) Rows() int { return len(r.study) }

// Step implements [Model]: it appends tokens to the prefixes and scores them.
func (r *Recompute) Step(ctx context.Context, tokens []int, dst []float32) error {
	n, L := len(r.study), r.length
	if len(tokens) != n {
		return fmt.Errorf("%w: %d tokens for %d rows", ErrShape, len(tokens), n)
	}
	if len(dst) < n*r.vocab {
		return fmt.Errorf("%w: dst holds %d log-probabilities, want %d×%d", ErrShape, len(dst), n, r.vocab)
	}
	for i, t := range tokens {
		if t < 0 || t >= r.vocab {
			return fmt.Errorf("%w: token %d in row %d, vocabulary %d", ErrToken, t, i, r.vocab)
		}
	}
	next := grow(r.bufP, n*(L+1))
	for i := range n {
		copy(next[i*(L+1):], r.prefix[i*L:(i+1)*L])
		next[i*(L+1)+L] = tokens[i]
	}
	r.bufP, r.prefix = r.prefix, next
	r.length++
	return r.score(ctx, r.study, r.prefix, r.length, dst[:n*r.vocab])
}

// Reorder implements [Model].
func (r *Recompute) Reorder(src []int) error {
	n, L := len(r.study), r.length
	for i, s := range src {
		if s < 0 || s >= n {
			return fmt.Errorf("%w: Reorder index %d at %d, %d rows", ErrShape, s, i, n)
		}
	}
	prefix := grow(r.bufP, len(src)*L)
	study := grow(r.bufS, len(src))
	for i, s := range src {
		copy(prefix[i*L:(i+1)*L], r.prefix[s*L:(s+1)*L])
		study[i] = r.study[s]
	}
	r.bufP, r.prefix = r.prefix, prefix
	r.bufS, r.study = r.study, study
	return nil
}
