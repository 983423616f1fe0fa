package memtrans

import (
	"context"
	"fmt"
	"testing"

	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// BenchmarkDecodeStep times one incremental step of 3 beam rows, and the
// beam reorder that follows it, for the paper-sized model (IU X-Ray, 98
// patches) at positions 10 and 60, for R2Gen, multi-view GCA and FMA, and
// Mem2Mem. The cost must not grow with the position beyond the attention
// read. Multi-view sources are per study, so
// GCA's step costs what R2Gen's does; Mem2Mem's adds its O(r + N) read,
// context and write, independent of the position.
func BenchmarkDecodeStep(b *testing.B) {
	for _, v := range []struct {
		name string
		edit func(*r2gen.Config)
	}{
		{"r2gen", func(*r2gen.Config) {}},
		{"gca", func(c *r2gen.Config) { c.Routing = mesh.RoutingGCA }},
		{"fma", func(c *r2gen.Config) { c.Routing = mesh.RoutingFMA }},
		{"mem2mem", func(c *r2gen.Config) { c.Memory = r2gen.MemoryMem2Mem }},
	} {
		c := r2gen.IUXray(761)
		v.edit(&c)
		m, err := r2gen.New(c, 1)
		if err != nil {
			b.Fatal(err)
		}
		feats := randomFeats(1, 98, 2048, 5)
		for _, pos := range []int{10, 60} {
			b.Run(fmt.Sprintf("%s/pos=%d", v.name, pos), func(b *testing.B) {
				ctx := context.Background()
				lp := make([]float32, 3*c.Vocab)
				tok := []int{5, 6, 7}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					dec, err := m.NewDecoding(feats)
					if err != nil {
						b.Fatal(err)
					}
					if err := dec.Step(ctx, []int{0}, lp); err != nil {
						b.Fatal(err)
					}
					if err := dec.Reorder([]int{0, 0, 0}); err != nil {
						b.Fatal(err)
					}
					for dec.Len() < pos {
						if err := dec.Step(ctx, tok, lp); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					if err := dec.Step(ctx, tok, lp); err != nil {
						b.Fatal(err)
					}
					if err := dec.Reorder([]int{2, 0, 1}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*3), "ns/row-step")
			})
		}
	}
}
