package memtrans

import (
	"context"
	"fmt"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/testdevice"
)

// BenchmarkGenerateDevice decodes beam-3, 60-token IU X-Ray reports (eos
// forbidden) with the paper's configuration through the modules' steps on
// the device of RADGEN_DEVICE (cuda:N; skipped otherwise: the reference
// device is a test of correctness, not of speed). It reports reports/s for
// batch 1, 16 and 128, and the decoder step's weight traffic: the bytes of
// the weights each step reads once, per second of step, and as a fraction
// of the device's peak bandwidth.
//
//	RADGEN_DEVICE=cuda:0 go test -tags cuda ./memtrans -run '^$' -bench GenerateDevice
func BenchmarkGenerateDevice(b *testing.B) {
	dev := testdevice.Benched(b)
	if dev == radgen.CPU || dev == radgen.Reference() {
		b.Skip("set RADGEN_DEVICE=cuda:N (and build with -tags cuda) to benchmark a GPU")
	}
	m := paperModel(b)
	var weightBytes float64
	m.VisitParams(func(_ string, t *radgen.Tensor) {
		if t != m.Embed.Table && t != m.Embed.Position && t != m.AttEmbed.Weight {
			weightBytes += 4 * float64(t.Len())
		}
	})
	if err := radgen.ToDevice(m, dev); err != nil {
		b.Fatal(err)
	}
	e, err := accel.OpenCUDA(dev.Ordinal())
	if err != nil {
		b.Skipf("no GPU: %v", err)
	}
	defer e.Close()
	const maxLen = 60
	for _, batch := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("beam3/batch=%d", batch), func(b *testing.B) {
			feats := randomFeats(batch, 98, 2048, 4).To(dev)
			s := decode.BeamSearch{Size: 3, MaxLen: maxLen, FullLength: true}
			b.ResetTimer()
			for range b.N {
				dec, err := m.StartDecoding(feats)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Decode(context.Background(), noEOS{dec}); err != nil {
					b.Fatal(err)
				}
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
