package r2gen_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// R2Gen's encoder–decoder on its own: teacher forcing over two reports of
// three positions for two studies of five patches.
func ExampleModel_TeacherForce() {
	c := r2gen.Tiny(12, 16)
	c.DModel, c.DFF, c.Layers = 16, 16, 1
	m, err := r2gen.New(c, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	feats := radgen.Zeros(2, 5, 16)
	g := radgen.NoGrad()
	f, err := m.TeacherForce(g, feats, []int{0, 3, 4, 0, 5, 6}, 2, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.LogProbs.Shape(), f.Memory.Shape())
	// Output: [2 3 12] [2 3 48]
}

// One R2Gen decoder layer outside a model: teacher forcing over three
// positions, then the same positions one step at a time, each step
// conditioning the layer's MCLN norms on that position's memory state.
func ExampleDecoderLayer_Step() {
	const d, slots = 8, 3
	rng := rand.New(rand.NewPCG(1, 2))
	l := r2gen.NewDecoderLayer(r2gen.LayerConfig{DModel: d, Heads: 2, DFF: 16, MemoryWidth: slots * d}, rng)
	fill := func(t *radgen.Tensor) *radgen.Tensor {
		for i := range t.Data() {
			t.Data()[i] = float32(rng.NormFloat64())
		}
		return t
	}
	x, memory, enc := fill(radgen.Zeros(1, 3, d)), fill(radgen.Zeros(1, 3, slots*d)), fill(radgen.Zeros(1, 5, d))
	g := radgen.NoGrad()
	whole := l.Forward(g, x, enc, nil, r2gen.CausalMask(1, 3), memory) // (1, 3, D)

	self, src := mesh.NewKVCache(1), l.SrcAttn.Project(g, enc)
	gap := 0.0
	for t := range 3 {
		xt := g.Reshape(g.Slice(x, 1, t, t+1), 1, d)
		mt := g.Reshape(g.Slice(memory, 1, t, t+1), 1, slots*d)
		out, _ := l.Step(g, xt, l.Deltas(g, mt), self, src, []int{0}, false)
		for i, v := range out.Data() {
			gap = max(gap, math.Abs(float64(v-whole.Data()[t*d+i])))
		}
	}
	fmt.Println(whole.Shape(), gap < 1e-5)
	// Output: [1 3 8] true
}
