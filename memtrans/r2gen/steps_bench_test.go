package r2gen_test

import (
	"context"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// plainDecoder is the decoding a researcher writes from R2Gen's exported
// blocks, in plain ops, with nothing for the engine but the workspace's
// memory: the embedding, the relational memory's Step, every layer's
// Deltas and Step, the final norm and the logits.
type plainDecoder struct {
	m      *r2gen.Model
	g      *radgen.Graph
	ws     *arch.Workspace
	self   []*mesh.KVCache
	src    []*mesh.Source
	deltas []r2gen.NormDeltas
	memory *radgen.Tensor // (R, S, D)
	study  []int
	t      int
}

func newPlainDecoder(m *r2gen.Model, feats *radgen.Tensor) *plainDecoder {
	g := radgen.NoGrad()
	enc := m.Encode(g, feats)
	b := feats.Dim(0)
	p := &plainDecoder{m: m, g: g, ws: arch.TakeWorkspace(), memory: m.Memory.InitMemory(b)}
	p.self = p.ws.Caches(len(m.Decoder.Layers), b)
	p.deltas = make([]r2gen.NormDeltas, len(m.Decoder.Layers))
	for i, l := range m.Decoder.Layers {
		p.src = append(p.src, l.SrcAttn.Project(g, enc.Sources[i]))
	}
	for i := range b {
		p.study = append(p.study, i)
	}
	g.SetArena(p.ws.Arena)
	return p
}

// step consumes one token per row and writes the log-probabilities of the
// next.
func (p *plainDecoder) step(tokens []int, dst []float32) {
	m, g := p.m, p.g
	r, d := len(p.study), m.Logit.Weight.Dim(1)
	p.ws.Arena.Next()
	x := g.Reshape(m.Embed.Forward(g, tokens, r, 1, p.t), r, d)
	p.memory = m.Memory.Step(g, x, p.memory)
	memory := g.Reshape(p.memory, r, -1)
	for i, l := range m.Decoder.Layers {
		p.deltas[i] = l.Deltas(g, memory)
	}
	for i, l := range m.Decoder.Layers {
		x, _ = l.Step(g, x, p.deltas[i], p.self[i], p.src[i], p.study, false)
	}
	copy(dst, g.LogSoftmax(m.Logit.Forward(g, m.Decoder.Norm.Forward(g, x))).Data())
	p.t++
}

// reorder makes row i a copy of row src[i].
func (p *plainDecoder) reorder(src []int) {
	for _, c := range p.self {
		if err := c.Reorder(src); err != nil {
			panic(err)
		}
	}
	p.memory = p.g.IndexSelect(p.memory, 0, src)
	study := make([]int, len(src))
	for i, r := range src {
		study[i] = p.study[r]
	}
	p.study = study
}

func (p *plainDecoder) release() { p.ws.Release(p.g) }

// benchSteps times decoding steps of 3 beam rows of one study of the
// paper's IU X-Ray model, from position 10 to 50 and again: start begins a
// decoding of one row and returns its step and its reorder.
func benchSteps(b *testing.B, start func(m *r2gen.Model, feats *radgen.Tensor) (step func([]int, []float32), reorder func([]int), release func())) {
	c := r2gen.IUXray(761)
	m, err := r2gen.New(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	feats := randomFeats(1, 98, 2048, 5)
	lp := make([]float32, 3*c.Vocab)
	tok := []int{5, 6, 7}
	var step func([]int, []float32)
	var release func()
	pos := 0
	begin := func() {
		if release != nil {
			release()
		}
		var reorder func([]int)
		step, reorder, release = start(m, feats)
		step([]int{0}, lp[:c.Vocab])
		reorder([]int{0, 0, 0})
		for pos = 1; pos < 10; pos++ {
			step(tok, lp)
		}
	}
	begin()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if pos == 50 {
			b.StopTimer()
			begin()
			b.StartTimer()
		}
		step(tok, lp)
		pos++
	}
	b.StopTimer()
	release()
}

// BenchmarkStepR2Gen is one beam-3 step of R2Gen's own decoding
// (Model.NewDecoding), positions 10 to 50.
func BenchmarkStepR2Gen(b *testing.B) {
	benchSteps(b, func(m *r2gen.Model, feats *radgen.Tensor) (func([]int, []float32), func([]int), func()) {
		dec, err := m.NewDecoding(feats)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		step := func(tok []int, lp []float32) {
			if err := dec.Step(ctx, tok, lp); err != nil {
				b.Fatal(err)
			}
		}
		reorder := func(src []int) {
			if err := dec.Reorder(src); err != nil {
				b.Fatal(err)
			}
		}
		return step, reorder, dec.Release
	})
}

// BenchmarkStepPlainOps is BenchmarkStepR2Gen's step written by a
// researcher in plain ops from R2Gen's exported blocks (plainDecoder).
func BenchmarkStepPlainOps(b *testing.B) {
	benchSteps(b, func(m *r2gen.Model, feats *radgen.Tensor) (func([]int, []float32), func([]int), func()) {
		p := newPlainDecoder(m, feats)
		return p.step, p.reorder, p.release
	})
}

// The researcher's plain decoder gives R2Gen's own decoding's
// log-probabilities, bit for bit, through a beam's reorders.
func TestPlainDecoderMatchesR2Gen(t *testing.T) {
	c := r2gen.IUXray(61)
	c.DModel, c.DFF, c.Heads = 64, 128, 4
	m, err := r2gen.New(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	feats := randomFeats(2, 7, c.DVisual, 9)
	dec, err := m.NewDecoding(feats)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	p := newPlainDecoder(m, feats)
	defer p.release()
	ctx := context.Background()
	tokens := [][]int{{0, 0}, {3, 4, 5, 6}, {7, 8, 9, 1}, {2, 2, 2, 2}}
	reorders := [][]int{{0, 0, 1, 1}, {1, 0, 3, 2}, {0, 0, 2, 3}}
	for i, tok := range tokens {
		want, got := make([]float32, len(tok)*c.Vocab), make([]float32, len(tok)*c.Vocab)
		if err := dec.Step(ctx, tok, want); err != nil {
			t.Fatal(err)
		}
		p.step(tok, got)
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("step %d: value %d = %v, R2Gen's decoding %v", i, j, got[j], want[j])
			}
		}
		if i < len(reorders) {
			if err := dec.Reorder(reorders[i]); err != nil {
				t.Fatal(err)
			}
			p.reorder(reorders[i])
		}
	}
}
