package metrans

import (
	"context"
	"fmt"
	"testing"

	"github.com/radgen/radgen/decode"
)

// BenchmarkMETransDecode decodes full-length greedy reports for every
// expert of 2 studies with a small METransformer (d=64, 3 experts, 2
// decoder layers, 49 patches), incrementally and by recomputing the prefix
// at every step, at 20 and 40 tokens; it reports generated tokens per
// second (all experts' streams counted).
func BenchmarkMETransDecode(b *testing.B) {
	c := Tiny(200, 64, 49)
	c.DModel, c.DFF, c.DMid, c.Heads = 64, 128, 32, 4
	m, err := New(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	const B = 2
	feats := randomFeats(B, 49, 64, 5)
	for _, T := range []int{20, 40} {
		for _, mode := range []string{"incremental", "recompute"} {
			b.Run(fmt.Sprintf("%s/T=%d", mode, T), func(b *testing.B) {
				for range b.N {
					var dm decode.Model
					if mode == "incremental" {
						dm, err = m.startDecoding(feats)
					} else {
						dm, err = m.StartRecompute(feats)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := (decode.Greedy{MaxLen: T}).Decode(context.Background(), noEOS{dm}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(B*c.Experts*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
