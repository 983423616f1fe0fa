package decode

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var time0 = time.Unix(0, 0)

// trivial is a model that costs almost nothing: the log-probabilities of a
// row are one of 16 fixed rows picked by the token fed, and EOS (id 0) has
// probability 0, so every decode runs to its maximum length. It measures the
// strategies' own work.
type trivial struct {
	V     int
	n     int
	table [][]float32
}

func newTrivial(V, B int) *trivial {
	m := &trivial{V: V, n: B}
	rng := rand.New(rand.NewPCG(uint64(V), 1))
	for range 16 {
		row := make([]float32, V)
		sum := 0.0
		for i := 1; i < V; i++ {
			sum += math.Exp(3 * rng.Float64())
		}
		lse := math.Log(sum)
		row[0] = float32(math.Inf(-1))
		for i := 1; i < V; i++ {
			row[i] = float32(3*rng.Float64() - lse)
		}
		m.table = append(m.table, row)
	}
	return m
}

func (m *trivial) reset(B int)    { m.n = B }
func (m *trivial) VocabSize() int { return m.V }
func (m *trivial) Rows() int      { return m.n }
func (m *trivial) Step(_ context.Context, tokens []int, dst []float32) error {
	for r, t := range tokens {
		copy(dst[r*m.V:(r+1)*m.V], m.table[(t+r)%16])
	}
	return nil
}
func (m *trivial) Reorder(src []int) error { m.n = len(src); return nil }

// BenchmarkStrategy measures the strategies' overhead per generated token
// (per study and step) with the trivial model at the paper's IU sizes:
// vocabulary 761, 60 tokens forced.
func BenchmarkStrategy(b *testing.B) {
	const V, T = 761, 60
	for _, s := range []Strategy{
		Greedy{MaxLen: T},
		Greedy{MaxLen: T, BlockTrigrams: true},
		Sample{MaxLen: T, TopK: 10},
		BeamSearch{Size: 3, MaxLen: T, FullLength: true},
		BeamSearch{Semantics: M2, Size: 3, MaxLen: T, FullLength: true},
	} {
		for _, B := range []int{1, 16} {
			b.Run(fmt.Sprintf("%v/batch%d", s, B), func(b *testing.B) {
				m := newTrivial(V, B)
				b.ReportAllocs()
				for b.Loop() {
					m.reset(B)
					if _, err := s.Decode(context.Background(), m); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*B*T), "ns/token")
			})
		}
	}
}

// BenchmarkRecompute compares the Recompute adapter with an incremental model
// of the same toy language model, greedy to 60 tokens. Like the published
// R2Gen, the recompute scorer runs the model over every position of the
// prefix and keeps the last; the incremental model runs one position per
// step. The ratio is the O(T²)/O(T) gap, about T/2.
func BenchmarkRecompute(b *testing.B) {
	const V, T, B = 761, 60, 1
	lm := hashLM{V: V, seed: 1, eos: 0, eosBias: -10, scale: 2}
	s := Greedy{MaxLen: T}
	allPositions := func(_ context.Context, studies []int, prefixes []int, length int, dst []float32) error {
		for r, st := range studies {
			h := lm.start(st)
			for i, t := range prefixes[r*length : (r+1)*length] {
				h = lm.push(h, t)
				lm.row(h, i+1, dst[r*V:(r+1)*V])
			}
		}
		return nil
	}
	b.Run("incremental", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Decode(context.Background(), newIncremental(lm, B)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recompute", func(b *testing.B) {
		for b.Loop() {
			r, _ := NewRecompute(B, V, allPositions)
			if _, err := s.Decode(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
