package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Scorer scores hypotheses against references, as a caption metric does:
// it returns one score per hypothesis, out[i] the score of hyps[i] against
// refs[i] (at least one reference each), higher is better. [Vote] calls it
// once with every candidate of every study, so a metric whose statistics
// come from the scored set (CIDEr-D's document frequencies) sees all of
// them. Token ids are what the strategies return; an adapter in the caller's
// package turns them into the metric's text (package decode knows no
// tokenizer and no metric). A Scorer must not keep its arguments.
type Scorer func(ctx context.Context, refs [][][]int, hyps [][]int) ([]float64, error)

// Vote is METransformer's metric-based expert voting (Wang et al., CVPR
// 2023): each of a study's candidate reports — one per expert — is scored
// against the study's other candidates as references, and the candidate
// with the highest score, the one the other experts agree with most, is
// chosen. Ties go to the lower candidate index.
//
// The zero value is not usable: Score is required. A Vote is safe for
// concurrent use if its Scorer is.
type Vote struct {
	// Score is the metric, for example CIDEr-D or BLEU-4 of the caller's
	// metrics package behind a [Scorer] adapter.
	Score Scorer

	// EOS, when a candidate's last token, is left out before scoring, as
	// the end token is no word of the report. R2Gen's id 0 is the zero
	// value; set it to −1 to score every token.
	EOS int
}

// ErrVote is wrapped by the errors of [Vote.Select] about its input.
var ErrVote = errors.New("decode: invalid voting input")

// Ballot is the outcome of a vote in one study.
type Ballot struct {
	// Winner is the index of the chosen candidate.
	Winner int
	// Scores[j] is candidate j's score against the other candidates.
	Scores []float64
}

// Select votes in every study: candidates[i] holds study i's candidates
// (at least two, so that each has references). It returns one Ballot per
// study. The Scorer is called once, with the candidates of all studies in
// order (study-major), each against the other candidates of its study.
// Errors: ErrVote (wrapped) for a nil Scorer, a study with fewer than two
// candidates, or a Scorer that returns the wrong number of scores or a NaN;
// the Scorer's own errors, wrapped; ctx.Err().
func (v Vote) Select(ctx context.Context, candidates [][][]int) ([]Ballot, error) {
	if v.Score == nil {
		return nil, fmt.Errorf("%w: nil Scorer", ErrVote)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var refs [][][]int
	var hyps [][]int
	for i, c := range candidates {
		if len(c) < 2 {
			return nil, fmt.Errorf("%w: study %d has %d candidates, voting needs at least 2", ErrVote, i, len(c))
		}
		for j := range c {
			others := make([][]int, 0, len(c)-1)
			for k := range c {
				if k != j {
					others = append(others, v.trim(c[k]))
				}
			}
			refs = append(refs, others)
			hyps = append(hyps, v.trim(c[j]))
		}
	}
	scores, err := v.Score(ctx, refs, hyps)
	if err != nil {
		return nil, fmt.Errorf("decode: voting metric: %w", err)
	}
	if len(scores) != len(hyps) {
		return nil, fmt.Errorf("%w: metric returned %d scores for %d candidates", ErrVote, len(scores), len(hyps))
	}
	out := make([]Ballot, len(candidates))
	off := 0
	for i, c := range candidates {
		b := Ballot{Scores: scores[off : off+len(c) : off+len(c)]}
		for j, s := range b.Scores {
			if math.IsNaN(s) {
				return nil, fmt.Errorf("%w: metric returned NaN for candidate %d of study %d", ErrVote, j, i)
			}
			if s > b.Scores[b.Winner] {
				b.Winner = j
			}
		}
		out[i] = b
		off += len(c)
	}
	return out, nil
}

// SelectHypotheses votes among the best hypothesis of each expert:
// experts[i][j] holds the hypotheses that expert j decoded for study i,
// best first (as a [Strategy] returns them), and the first of each list is
// its candidate. It returns the winning hypothesis of every study and the
// ballots. Errors are those of [Vote.Select], and ErrVote for an expert
// without hypotheses.
func (v Vote) SelectHypotheses(ctx context.Context, experts [][][]Hypothesis) ([]Hypothesis, []Ballot, error) {
	cands := make([][][]int, len(experts))
	for i, e := range experts {
		cands[i] = make([][]int, len(e))
		for j, h := range e {
			if len(h) == 0 {
				return nil, nil, fmt.Errorf("%w: expert %d of study %d has no hypothesis", ErrVote, j, i)
			}
			cands[i][j] = h[0].Tokens
		}
	}
	ballots, err := v.Select(ctx, cands)
	if err != nil {
		return nil, nil, err
	}
	best := make([]Hypothesis, len(experts))
	for i, b := range ballots {
		best[i] = experts[i][b.Winner][0]
	}
	return best, ballots, nil
}

func (v Vote) trim(t []int) []int {
	if n := len(t); n > 0 && v.EOS >= 0 && t[n-1] == v.EOS {
		return t[:n-1]
	}
	return t
}
