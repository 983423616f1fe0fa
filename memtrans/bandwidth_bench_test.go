package memtrans

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/f32"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// stepWeightBytes returns the bytes of the weight matrices that one step of
// R2Gen's module decoding reads: every matrix of the decoder layers (the
// self-attention, the source attention's query and output projections,
// the feed-forward layer, the MCLN MLPs), of the relational memory and of
// the logit layer. The source attention's key and value projections run
// once per study, the embedding reads a row per token and the encoder runs
// before the first step; none of them counts.
func stepWeightBytes(m *r2gen.Model) int64 {
	var n int64
	m.VisitParams(func(name string, p *radgen.Tensor) {
		if p.Rank() != 2 {
			return
		}
		perStep := strings.HasPrefix(name, "model.decoder.") || strings.HasPrefix(name, "model.rm.") || strings.HasPrefix(name, "logit.")
		if strings.Contains(name, ".src_attn.linears.1.") || strings.Contains(name, ".src_attn.linears.2.") {
			perStep = false
		}
		if perStep {
			n += int64(p.Len()) * 4
		}
	})
	return n
}

// readBench measures the bytes per second that the skinny product of
// internal/f32 (the kernels decoding streams weights through) reads when
// it sums the rows of a 256 MB float32 matrix, on GOMAXPROCS goroutines:
// the most a decoding step could stream on this machine.
type readBench struct {
	big, ones, sums []float32
}

func newReadBench() *readBench {
	const k, n = 4096, 16384 // 64 Mi floats, 256 MB
	r := &readBench{big: make([]float32, k*n), ones: make([]float32, k), sums: make([]float32, n)}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range r.big {
		r.big[i] = float32(rng.Float64())
	}
	for i := range r.ones {
		r.ones[i] = 1
	}
	r.pass() // warm up
	return r
}

// pass sums the matrix's rows once and returns how long that took.
func (r *readBench) pass() time.Duration {
	k, n := len(r.ones), len(r.sums)
	start := time.Now()
	f32.Gemm(false, true, 1, n, k, 1, r.ones, k, r.big, k, 0, r.sums, n)
	return time.Since(start)
}

// bandwidth returns the read bandwidth of the fastest of passes passes.
func (r *readBench) bandwidth(passes int) float64 {
	best := time.Duration(1 << 62)
	for range passes {
		best = min(best, r.pass())
	}
	return float64(len(r.big)*4) / best.Seconds()
}

// BenchmarkDecodeBandwidth measures how close one float32 step of the
// module decoding (paper IU configuration, beam 3, one study) comes to
// streaming its weights at the machine's read bandwidth: weights-GB/s is
// the weight bytes a step reads (stepWeightBytes) per second of step,
// read-GB/s what the same kernels read from a 256 MB matrix, and ratio the
// first over the second. This machine's speed drifts by 10–20% over
// seconds, so each decoding is paired with a read measurement taken just
// before it (the faster of three passes): ratio is the median of the
// decodings' ratios and read-GB/s the median of their reads, while
// ratio-best-read divides the run's weights-GB/s by the fastest read of
// the run, the least favourable pairing. ns/op times the decoding of a
// 60-token report, the encoder excluded; allocs/op counts what its 60
// steps allocate once the arena of an earlier decoding has grown to their
// size.
func BenchmarkDecodeBandwidth(b *testing.B) {
	m := paperModel(b)
	const maxLen = 60
	feats := randomFeats(1, 98, 2048, 4)
	s := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
	weights := float64(stepWeightBytes(m))
	reader := newReadBench()
	var ratios, reads []float64
	bestRead := 0.0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		model, err := m.NewDecoding(feats)
		if err != nil {
			b.Fatal(err)
		}
		read := reader.bandwidth(3)
		reads, bestRead = append(reads, read), max(bestRead, read)
		b.StartTimer()
		start := time.Now()
		if _, err := s.Decode(context.Background(), noEOS{model}); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		model.Release() // the next decoding steps on this one's arena, as Generate's do
		ratios = append(ratios, weights*maxLen/elapsed.Seconds()/read)
	}
	b.StopTimer()
	stream := weights * float64(b.N*maxLen) / b.Elapsed().Seconds()
	b.ReportMetric(weights/1e6, "weight-MB/step")
	b.ReportMetric(stream/1e9, "weights-GB/s")
	b.ReportMetric(median(reads)/1e9, "read-GB/s")
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(stream/bestRead, "ratio-best-read")
}

// median returns the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
