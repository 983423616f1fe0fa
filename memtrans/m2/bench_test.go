package m2_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/m2"
)

// BenchmarkM2Beam decodes a batch of studies with M²'s beam search on the
// incremental decoder and reports generated tokens per second (all beams).
func BenchmarkM2Beam(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  m2.Config
	}{
		{"tiny", m2.Tiny(200, 256)},
	} {
		m, err := m2.New(c.cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		feats := m2Feats(rand.New(rand.NewPCG(1, 1)), 4, 20, c.cfg.DIn)
		enc, err := m.Encode(radgen.NoGrad(), feats)
		if err != nil {
			b.Fatal(err)
		}
		st := decode.BeamSearch{Size: 5, MaxLen: 20, BOS: c.cfg.BOS, EOS: c.cfg.EOS, Semantics: decode.M2, FullLength: true}
		b.Run(fmt.Sprintf("%s/%s/B4", c.name, st), func(b *testing.B) {
			decodeEncodedLoop(b, m, enc, st)
			tokens := float64(b.N) * 4 * 5 * 20
			b.ReportMetric(tokens/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
