package metrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
)

// Decoding is the incremental decoding state of a batch of studies
// under a [Model]; it implements decode.Model. Its rows start as one
// per study and expert (row b·M + m decodes expert m's report of study b),
// and a strategy then expands and reorders them.
//
// It computes what the model's teacher-forced decoder (decodeTokens)
// computes for the last position of each prefix, without re-running the
// prefix:
//   - each decoder layer's bilinear self-attention keeps the projected keys
//     and values (mesh.BilinearKeys) of every earlier position of every
//     row, so a step projects only the new position's;
//   - the bilinear cross-attention keys and values over each expert's
//     adjusted visual tokens (Eq. 10) are projected once per study and
//     expert when decoding starts and shared by all rows (beams) of that
//     stream.
//
// The attention itself still reads every earlier position (the spatial
// softmax and the channel mean of Eqs. 6–7 run over all of them), so a
// step costs O(t) in the prefix length t, against O(t²) for re-running
// the prefix. A Decoding belongs to one goroutine; the model it came
// from may serve many concurrently.
type Decoding struct {
	m      *Model
	t      int   // steps taken
	stream []int // row → stream (study·M + expert)
	cross  []mesh.BilinearKeys
	self   []mesh.BilinearKeys  // per layer, (rows, t, D_B); nil before the first step
	opts   []radgen.GraphOption // of every step's graph
}

var _ decode.Model = (*Decoding)(nil)

// startDecoding encodes visual features (B, N, d_in) and returns an
// incremental decoding state with B·M rows, ready for a decode strategy.
// The steps' graphs take opts (radgen.SubstituteWeights, say).
func (m *Model) startDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (*Decoding, error) {
	feats = m.matchDtype(feats)
	g := radgen.NoGrad()
	enc, err := m.encode(g, feats)
	if err != nil {
		return nil, err
	}
	s := &Decoding{m: m, stream: make([]int, enc.Adjusted.Dim(0)), opts: opts}
	for i := range s.stream {
		s.stream[i] = i
	}
	for _, l := range m.Decoder {
		s.cross = append(s.cross, l.Cross.ProjectKeys(g, enc.Adjusted, enc.Adjusted))
	}
	s.self = make([]mesh.BilinearKeys, len(m.Decoder))
	return s, nil
}

// VocabSize implements decode.Model.
func (s *Decoding) VocabSize() int { return s.m.config.Vocab }

// Rows implements decode.Model.
func (s *Decoding) Rows() int { return len(s.stream) }

// Step implements decode.Model: it consumes one token per row and writes
// the log-probabilities of the next, (Rows() × V), into dst.
func (s *Decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := s.m.config
	r := len(s.stream)
	if len(tokens) != r {
		return fmt.Errorf("%w: %d tokens for %d rows", decode.ErrShape, len(tokens), r)
	}
	if len(dst) < r*c.Vocab {
		return fmt.Errorf("%w: dst holds %d log-probabilities, want %d×%d", decode.ErrShape, len(dst), r, c.Vocab)
	}
	if s.t > c.MaxSeqLen {
		return fmt.Errorf("%w: step %d beyond the positional table (%d rows)", decode.ErrShape, s.t+1, c.MaxSeqLen+1)
	}
	for i, id := range tokens {
		if id < 0 || id >= c.Vocab {
			return fmt.Errorf("%w: token %d in row %d, vocabulary %d", decode.ErrToken, id, i, c.Vocab)
		}
	}
	g := radgen.NoGrad(s.opts...)
	x := g.Add(g.Embedding(s.m.Words, tokens, r, 1), g.Slice(s.m.Positions, 0, s.t, s.t+1)) // (R, 1, D)
	var ec *radgen.Tensor
	for i, l := range s.m.Decoder {
		kv := l.Self.ProjectKeys(g, x, x)
		if s.self[i].K != nil {
			kv = mesh.BilinearKeys{K: g.Concat(1, s.self[i].K, kv.K), V: g.Concat(1, s.self[i].V, kv.V)}
		}
		s.self[i] = kv
		// The new position attends itself and every earlier one: the
		// causal mask of decodeTokens, restricted to its last row.
		cross := mesh.BilinearKeys{K: g.IndexSelect(s.cross[i].K, 0, s.stream), V: g.IndexSelect(s.cross[i].V, 0, s.stream)}
		var next *radgen.Tensor
		next, ec = l.apply(g, x,
			func(x *radgen.Tensor) *radgen.Tensor { att, _ := l.Self.Attend(g, x, kv, nil); return att },
			func(mid *radgen.Tensor) *radgen.Tensor { att, _ := l.Cross.Attend(g, mid, cross, nil); return att })
		if next != nil {
			x = next
		}
	}
	if err := arch.CopyLogProbs(dst, g.LogSoftmax(s.m.Logit.Forward(g, g.Reshape(ec, r, c.DModel)))); err != nil {
		return err
	}
	s.t++
	return nil
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *Decoding) Reorder(src []int) error {
	r := len(s.stream)
	for i, v := range src {
		if v < 0 || v >= r {
			return fmt.Errorf("%w: Reorder index %d at %d, %d rows", decode.ErrShape, v, i, r)
		}
	}
	g := radgen.NoGrad()
	stream := make([]int, len(src))
	for i, v := range src {
		stream[i] = s.stream[v]
	}
	s.stream = stream
	for i, kv := range s.self {
		if kv.K != nil {
			s.self[i] = mesh.BilinearKeys{K: g.IndexSelect(kv.K, 0, src), V: g.IndexSelect(kv.V, 0, src)}
		}
	}
	return nil
}

// matchDtype converts feats to the dtype of the model's weights.
func (m *Model) matchDtype(feats *radgen.Tensor) *radgen.Tensor {
	if feats == nil || feats.Is64() == m.Words.Is64() {
		return feats
	}
	if feats.Is64() {
		return feats.To32()
	}
	return feats.To64()
}
