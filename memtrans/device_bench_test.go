package memtrans

import (
	"context"
	"fmt"
	"testing"

	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/accel"
)

// BenchmarkGenerateDevice decodes beam-3, 60-token IU X-Ray reports (eos
// forbidden) with the paper's configuration on the device of RADGEN_DEVICE
// (cuda:N; skipped otherwise: the reference device is a test of
// correctness, not of speed). It reports reports/s for batch 1, 16 and 128,
// and the decoder step's weight traffic: the bytes of the weights each step
// reads once, per second of step, and as a fraction of the device's peak
// bandwidth (issue 8).
//
//	RADGEN_DEVICE=cuda:0 go test -tags cuda ./memtrans -run '^$' -bench GenerateDevice
func BenchmarkGenerateDevice(b *testing.B) {
	dev := testDevice(b)
	if dev.kind != deviceCUDA {
		b.Skip("set RADGEN_DEVICE=cuda:N (and build with -tags cuda) to benchmark a GPU")
	}
	e, err := accel.OpenCUDA(dev.ordinal)
	if err != nil {
		b.Skipf("no GPU: %v", err)
	}
	defer e.Close()
	m := paperModel(b)
	w, err := uploadWeights(e, m)
	if err != nil {
		b.Fatal(err)
	}
	defer w.free()
	var weightBytes float64
	for _, t := range w.tensors {
		if t.t != m.Embed.Table && t.t != m.Embed.Position {
			weightBytes += 4 * float64(t.t.Len())
		}
	}
	const maxLen = 60
	for _, batch := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("beam3/batch=%d", batch), func(b *testing.B) {
			feats := randomFeats(batch, 98, 2048, 4)
			s := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
			b.ResetTimer()
			for range b.N {
				dec, err := m.startDeviceDecoding(w, feats)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Decode(context.Background(), noEOS{dec}); err != nil {
					b.Fatal(err)
				}
				dec.Close()
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(batch)/sec, "reports/s")
			perStep := sec / maxLen
			b.ReportMetric(weightBytes/perStep/1e9, "weight-GB/s")
			if pb, ok := e.(accel.PeakBandwidther); ok && pb.PeakBandwidth() > 0 {
				b.ReportMetric(weightBytes/perStep/pb.PeakBandwidth(), "bandwidth-fraction")
			}
		})
	}
}
