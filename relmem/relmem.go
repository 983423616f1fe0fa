package relmem

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Relational is R2Gen's relational memory of Slots rows of width D.
// Parameter names: attn.linears.{0..3}, mlp.{0,2}, W, U.
type Relational struct {
	Slots int
	Attn  *mesh.MultiHeadAttention
	MLP0  *radgen.Linear // mlp.0: D → D
	MLP2  *radgen.Linear // mlp.2: D → D
	W, U  *radgen.Linear // D → 2D: input and memory terms of the gates
}

// New returns a relational memory with slots rows of width d attended by
// heads heads, initialised as R2Gen does (Xavier-uniform matrices).
func New(slots, d, heads int, dropout float64, rng *rand.Rand) *Relational {
	if slots <= 0 {
		panic(fmt.Sprintf("relmem: %d memory slots", slots))
	}
	r := &Relational{
		Slots: slots,
		Attn:  mesh.NewMultiHeadAttention(d, heads, dropout, rng),
		MLP0:  radgen.NewLinear(d, d, true, rng),
		MLP2:  radgen.NewLinear(d, d, true, rng),
		W:     radgen.NewLinear(d, 2*d, true, rng),
		U:     radgen.NewLinear(d, 2*d, true, rng),
	}
	for _, l := range []*radgen.Linear{r.MLP0, r.MLP2, r.W, r.U} {
		radgen.XavierUniform(l.Weight, rng)
	}
	return r
}

// Width returns the row width D.
func (r *Relational) Width() int { return r.MLP0.Weight.Dim(0) }

// VisitParams implements radgen.Module.
func (r *Relational) VisitParams(visit func(string, *radgen.Tensor)) {
	r.Attn.VisitParams(radgen.Prefixed("attn.", visit))
	r.MLP0.VisitParams(radgen.Prefixed("mlp.0.", visit))
	r.MLP2.VisitParams(radgen.Prefixed("mlp.2.", visit))
	r.W.VisitParams(radgen.Prefixed("W.", visit))
	r.U.VisitParams(radgen.Prefixed("U.", visit))
}

// InitMemory returns M_0 for a batch of b: each study's memory is the
// Slots×Slots identity, zero-padded (or truncated) to width D, as float32
// (b, Slots, D).
func (r *Relational) InitMemory(b int) *radgen.Tensor {
	d := r.Width()
	m := radgen.Zeros(b, r.Slots, d)
	data := m.Data()
	for i := 0; i < b; i++ {
		for s := 0; s < r.Slots && s < d; s++ {
			data[(i*r.Slots+s)*d+s] = 1
		}
	}
	return m
}

// Step consumes one input y_{t−1} (B, D) and returns M_t (B, Slots, D) from
// M_{t−1} (B, Slots, D):
//
//	Z = softmax(Q·Kᵀ/√d_k)·V, Q = M W_q, K = [M; y] W_k, V = [M; y] W_v   (Eq. 6)
//	M̃ = f_mlp(Z + M) + Z + M      (Eq. 7; R2Gen's f_mlp ends in a ReLU)
//	[G^i | G^f] = W·y + U·tanh(M)  (Eqs. 9 and 8: one matrix each, split in halves)
//	M_t = σ(G^i) ⊙ tanh(M̃) + σ(G^f) ⊙ M_{t−1}   (Eq. 10)
func (r *Relational) Step(g *radgen.Graph, input, memory *radgen.Tensor) *radgen.Tensor {
	b, d := input.Dim(0), input.Dim(1)
	y := g.Reshape(input, b, 1, d)
	// The gates' products (Eqs. 8–9) read only the input and the old
	// memory: they run beside the attention and the MLP.
	var wu [2]*radgen.Tensor
	terms := g.Batch()
	terms.Linears(wu[:], []*radgen.Tensor{y, g.Tanh(memory)}, []*radgen.Linear{r.W, r.U}, false)
	terms.Start()
	kv := g.Concat(1, memory, y)                                  // [M; y]  (B, S+1, D)
	next := g.Add(memory, r.Attn.Forward(g, memory, kv, kv, nil)) // Z + M (Eq. 6)
	var mlp [1]*radgen.Tensor
	g.Linears(mlp[:], []*radgen.Tensor{next}, []*radgen.Linear{r.MLP0}, true)
	g.Linears(mlp[:], mlp[:], []*radgen.Linear{r.MLP2}, true)
	next = g.Add(next, mlp[0]) // Eq. 7
	terms.Finish()
	gates := g.Add(wu[0], wu[1]) // Eqs. 8–9: W·y + U·tanh(M), (B, S, 2D)
	in, forget := g.Sigmoid(g.Slice(gates, 2, 0, d)), g.Sigmoid(g.Slice(gates, 2, d, 2*d))
	return g.Add(g.Mul(in, g.Tanh(next)), g.Mul(forget, memory)) // Eq. 10
}

// Forward runs the memory over inputs (B, T, D) from memory (B, S, D) and
// returns every state flattened, (B, T, S·D): position t holds the memory
// after consuming input t.
func (r *Relational) Forward(g *radgen.Graph, inputs, memory *radgen.Tensor) *radgen.Tensor {
	b, t, d := inputs.Dim(0), inputs.Dim(1), inputs.Dim(2)
	states := make([]*radgen.Tensor, t)
	for i := 0; i < t; i++ {
		x := g.Reshape(g.Slice(inputs, 1, i, i+1), b, d)
		memory = r.Step(g, x, memory)
		states[i] = g.Reshape(memory, b, 1, r.Slots*d)
	}
	return g.Concat(1, states...)
}

var _ radgen.Module = (*Relational)(nil)
