package metrics

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Scores over token ids, for self-critical training's reward and for
// expert voting: one score per hypothesis against its references, with the
// signature of decode.Scorer. The metrics of this package score
// whitespace-separated text; ids are written as decimal words, which gives
// the same n-gram statistics as the decoded words of a one-to-one tokenizer
// (R2Gen's is), without needing the tokenizer.

// CIDErDOfIDs gives each hypothesis (token ids) its CIDEr-D (CIDErD: σ = 6,
// clipped tf-idf, ×10) against its references. The
// document frequencies come from the references of the scored set: in
// SCST, the batch's studies (each counted once per sampled sequence, which
// leaves the idf unchanged); in voting, the candidates of the voted studies.
// A set of a single study makes every idf zero, and so every score; score
// batches of several studies.
func CIDErDOfIDs(ctx context.Context, refs [][][]int, hyps [][]int) ([]float64, error) {
	r, h, err := idText(ctx, refs, hyps)
	if err != nil {
		return nil, err
	}
	s, err := CIDErD(r, h)
	if err != nil {
		return nil, err
	}
	return s.PerSentence, nil
}

// BLEUOfIDs returns a scorer giving each hypothesis (token ids) its
// sentence BLEU-n (1 ≤ n ≤ 4, BLEU's per-sentence values, with the scorer's
// smoothing) against its references.
func BLEUOfIDs(n int) (func(ctx context.Context, refs [][][]int, hyps [][]int) ([]float64, error), error) {
	if n < 1 || n > 4 {
		return nil, fmt.Errorf("metrics: BLEU-%d: order outside [1, 4]", n)
	}
	return func(ctx context.Context, refs [][][]int, hyps [][]int) ([]float64, error) {
		r, h, err := idText(ctx, refs, hyps)
		if err != nil {
			return nil, err
		}
		s, err := BLEU(r, h)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(s.PerSentence))
		for i, p := range s.PerSentence {
			out[i] = p[n-1]
		}
		return out, nil
	}, nil
}

// idText writes token ids as space-separated decimal words.
func idText(ctx context.Context, refs [][][]int, hyps [][]int) ([][]string, []string, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(refs) != len(hyps) {
		return nil, nil, fmt.Errorf("%w: %d reference sets for %d hypotheses", ErrLengthMismatch, len(refs), len(hyps))
	}
	var b strings.Builder
	text := func(ids []int) string {
		b.Reset()
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(id))
		}
		return b.String()
	}
	r := make([][]string, len(refs))
	h := make([]string, len(hyps))
	for i := range hyps {
		h[i] = text(hyps[i])
		r[i] = make([]string, len(refs[i]))
		for j, ref := range refs[i] {
			r[i][j] = text(ref)
		}
	}
	return r, h, nil
}
