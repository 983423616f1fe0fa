package r2gen

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// StartRecompute encodes visual features (B, N, d_vf) once and returns a
// decode.Model that, like the published R2Gen, re-runs the relational memory
// and the decoder over each row's whole prefix at every step (O(T²) work).
// It exists as the baseline of benchmarks and as a cross-check of the
// incremental Decoding, which must give the same log-probabilities.
func (m *Model) StartRecompute(feats *radgen.Tensor) (*decode.Recompute, error) {
	if feats.Rank() != 3 || feats.Dim(2) != m.config.DVisual || feats.Dim(0) == 0 {
		return nil, fmt.Errorf("r2gen: visual features %v, want (B, N, %d)", feats.Shape(), m.config.DVisual)
	}
	enc := m.Encode(radgen.NoGrad(), feats)
	score := func(ctx context.Context, studies []int, prefixes []int, length int, dst []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		g := radgen.NoGrad()
		rows := len(studies)
		sel := enc.rows(g, studies)
		// The sampler's mask is subsequent_mask only: no padding mask.
		tgtMask := CausalMask(rows, length)
		f := &TeacherForced{Encoded: sel}
		m.decodeTokens(g, f, prefixes, rows, length, tgtMask)
		last := func(x *radgen.Tensor) *radgen.Tensor {
			if x == nil {
				return nil
			}
			return g.Reshape(g.Slice(x, 1, length-1, length), rows, -1)
		}
		copy(dst, m.logProbs(g, last(f.DecoderOut), last(f.Memory)).Data())
		return nil
	}
	return decode.NewRecompute(feats.Dim(0), m.config.Vocab, score)
}
