package arch

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// TeacherForcingGap checks what every architecture promises of its
// incremental decoding (see [EncoderDecoder.StartDecoding]): that each step
// gives the log-probabilities of teacher forcing for the same prefix, and
// that Reorder follows beam ancestry.
//
// It decodes the studies feats (B, N, VisualWidth) together, one row per
// study, by beam search of size beam returning all beam hypotheses of each
// study (so rows are reordered along their ancestry at every step) for at
// most maxLen tokens, under net's own beam rules (Dims().Semantics). Then it
// teacher-forces every hypothesis over its study alone (LogProbs, one
// report of its tokens shifted behind the start id 0) and returns the
// largest absolute difference between a token's log-probability in the
// decoding and in teacher forcing, and the number of tokens compared.
//
// An architecture whose decoding has k rows per study (METransformer: one
// per expert, row b·k + j expert j's of study b) is checked row by row,
// against row j of its teacher forcing over study b.
//
// A decoding that computes what teacher forcing computes differs by
// rounding only: the built-in architectures stay within 1e-5 in float32;
// their tests and examples/variant's allow 1e-4. A larger gap is a bug of
// the decoding (a cache read at the wrong position, a state not reordered,
// a mask that differs from teacher forcing's), or a teacher forcing whose
// results depend on the batch.
func TeacherForcingGap(ctx context.Context, net EncoderDecoder, feats *radgen.Tensor, beam, maxLen int) (gap float64, tokens int, err error) {
	d := net.Config().Dims()
	if feats == nil || feats.Rank() != 3 || feats.Dim(0) == 0 {
		return 0, 0, fmt.Errorf("arch: teacher-forcing check over features %v, want (B, N, %d)", shapeOf(feats), d.VisualWidth)
	}
	if beam < 1 || maxLen < 1 || maxLen > d.MaxLen {
		return 0, 0, fmt.Errorf("arch: teacher-forcing check with beam %d and %d tokens (the decoding's table holds %d)", beam, maxLen, d.MaxLen)
	}
	dec, err := net.StartDecoding(feats)
	if err != nil {
		return 0, 0, err
	}
	b := feats.Dim(0)
	k := dec.Rows() / b // rows per study
	if k < 1 || dec.Rows() != k*b {
		if r, ok := dec.(Releaser); ok {
			r.Release()
		}
		return 0, 0, fmt.Errorf("arch: a decoding of %d studies has %d rows", b, dec.Rows())
	}
	hyps, err := decode.BeamSearch{Size: beam, N: beam, MaxLen: maxLen, BOS: d.BOS, Semantics: d.Semantics}.Decode(ctx, dec)
	if r, ok := dec.(Releaser); ok {
		r.Release()
	}
	if err != nil {
		return 0, 0, err
	}
	for row, hs := range hyps {
		one := radgen.NoGrad().IndexSelect(feats, 0, []int{row / k})
		for _, h := range hs {
			if len(h.LogProbs) != len(h.Tokens) {
				return 0, 0, fmt.Errorf("arch: hypothesis of %d tokens with %d log-probabilities", len(h.Tokens), len(h.LogProbs))
			}
			// Up to the first end (id 0) only: R2Gen's beam may keep a
			// beam that went on past it, and teacher forcing reads id 0
			// as padding.
			t := len(h.Tokens)
			for i, id := range h.Tokens {
				if id == 0 {
					t = i + 1
					break
				}
			}
			if t == 0 {
				continue
			}
			in := append([]int{0}, h.Tokens[:t-1]...)
			lp, err := net.LogProbs(radgen.NoGrad(), one, in, 1, t)
			if err != nil {
				return 0, 0, fmt.Errorf("arch: teacher forcing of a decoded report: %w", err)
			}
			if lp.Rank() != 3 || lp.Dim(0) != k || lp.Dim(1) != t || lp.Dim(2) != d.Vocab {
				return 0, 0, fmt.Errorf("arch: teacher forcing gave log-probabilities %v, want (%d, %d, %d)", lp.Shape(), k, t, d.Vocab)
			}
			v := lp.To(radgen.CPU).Float64s()[(row%k)*t*d.Vocab:]
			for p, id := range h.Tokens[:t] {
				diff := math.Abs(v[p*d.Vocab+id] - float64(h.LogProbs[p]))
				if math.IsNaN(diff) {
					return math.Inf(1), tokens, fmt.Errorf("arch: log-probability of token %d at position %d is NaN in the decoding or in teacher forcing", id, p)
				}
				gap = max(gap, diff)
				tokens++
			}
		}
	}
	return gap, tokens, nil
}

func shapeOf(t *radgen.Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape()
}
