package memtrans

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/f32"
)

// stepWeightBytes returns the bytes of the weight matrices that one step of
// R2Gen's module decoding reads: every matrix of the decoder layers (the
// self-attention, the source attention's query and output projections,
// the feed-forward layer, the MCLN MLPs), of the relational memory and of
// the logit layer. The source attention's key and value projections run
// once per study, the embedding reads a row per token and the encoder runs
// before the first step; none of them counts.
func stepWeightBytes(m *r2genModel) int64 {
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

// readBandwidth returns the bytes per second that the skinny product of
// internal/f32 (the kernels decoding streams weights through) reads when
// it sums the rows of a 256 MB float32 matrix, on GOMAXPROCS goroutines:
// the most a decoding step could stream on this machine.
func readBandwidth() float64 {
	const k, n = 4096, 16384 // 64 Mi floats, 256 MB
	big := make([]float32, k*n)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range big {
		big[i] = float32(r.Float64())
	}
	ones := make([]float32, k)
	for i := range ones {
		ones[i] = 1
	}
	sums := make([]float32, n)
	f32.Gemm(false, true, 1, n, k, 1, ones, k, big, k, 0, sums, n) // warm up
	best := time.Duration(1 << 62)
	for range 5 {
		start := time.Now()
		f32.Gemm(false, true, 1, n, k, 1, ones, k, big, k, 0, sums, n)
		best = min(best, time.Since(start))
	}
	return float64(len(big)*4) / best.Seconds()
}

// BenchmarkDecodeBandwidth measures how close one float32 step of the
// module decoding (paper IU configuration, beam 3, one study) comes to
// streaming its weights at the machine's read bandwidth: weights-GB/s is
// the weight bytes a step reads (stepWeightBytes) per second of step,
// read-GB/s what the same kernels read from a 256 MB matrix, and ratio the
// first over the second. ns/op times the decoding of a 60-token report,
// the encoder excluded; allocs/op counts what its 60 steps allocate once
// the arena of an earlier decoding has grown to their size.
func BenchmarkDecodeBandwidth(b *testing.B) {
	m := paperModel(b)
	const maxLen = 60
	feats := randomFeats(1, 98, 2048, 4)
	s := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
	weights := stepWeightBytes(m)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		model, err := m.startModuleDecoding(feats)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.Decode(context.Background(), noEOS{model}); err != nil {
			b.Fatal(err)
		}
		model.release() // the next decoding steps on this one's arena, as Generate's do
	}
	b.StopTimer()
	stepSeconds := b.Elapsed().Seconds() / float64(b.N*maxLen)
	stream := float64(weights) / stepSeconds / 1e9
	read := readBandwidth() / 1e9
	b.ReportMetric(float64(weights)/1e6, "weight-MB/step")
	b.ReportMetric(stream, "weights-GB/s")
	b.ReportMetric(read, "read-GB/s")
	b.ReportMetric(stream/read, "ratio")
}
