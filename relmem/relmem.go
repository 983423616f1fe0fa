package relmem

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// Relational is R2Gen's relational memory of [Relational.Slots] rows of
// width D. Parameter names: attn.linears.{0..3}, mlp.{0,2}, W, U.
type Relational struct {
	slots int
	Attn  *mesh.MultiHeadAttention // attention of the memory over [M; y] (Eq. 6)
	MLP0  *radgen.Linear           // mlp.0: D → D
	MLP2  *radgen.Linear           // mlp.2: D → D
	W, U  *radgen.Linear           // D → 2D: input and memory terms of the gates
}

// New returns a relational memory with slots rows of width d attended by
// heads heads, initialised as R2Gen does (Xavier-uniform matrices).
func New(slots, d, heads int, dropout float64, rng *rand.Rand) *Relational {
	if slots <= 0 {
		panic(fmt.Sprintf("relmem: %d memory slots", slots))
	}
	r := &Relational{
		slots: slots,
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

// Slots returns the number of memory rows S.
func (r *Relational) Slots() int { return r.slots }

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
	m := radgen.Zeros(b, r.slots, d)
	data := m.Data()
	for i := 0; i < b; i++ {
		for s := 0; s < r.slots && s < d; s++ {
			data[(i*r.slots+s)*d+s] = 1
		}
	}
	return m
}

// Step consumes one input y_{t−1} (B, D) and returns M_t (B, Slots, D) from
// M_{t−1} (B, Slots, D).
func (r *Relational) Step(g *radgen.Graph, input, memory *radgen.Tensor) *radgen.Tensor {
	b, d := input.Dim(0), input.Dim(1)
	y := g.Reshape(input, b, 1, d)
	// Eq. 6: Z = softmax(Q·Kᵀ/√d_k)·V, Q = M W_q, K = [M; y] W_k, V = [M; y] W_v.
	my := g.Concat(1, memory, y)
	z := r.Attn.Forward(g, memory, my, my, nil)
	// Eq. 7: M̃ = f_mlp(Z + M) + Z + M, R2Gen's f_mlp ending in a ReLU.
	next := g.Add(memory, z)
	next = g.Add(next, g.ReLU(r.MLP2.Forward(g, g.ReLU(r.MLP0.Forward(g, next)))))
	// Eqs. 8 and 9: G^i and G^f, the halves of W·y + U·tanh(M_{t−1}).
	gates := g.Add(r.W.Forward(g, y), r.U.Forward(g, g.Tanh(memory)))
	in, forget := g.Sigmoid(g.Slice(gates, 2, 0, d)), g.Sigmoid(g.Slice(gates, 2, d, 2*d))
	// Eq. 10: M_t = σ(G^i) ⊙ tanh(M̃) + σ(G^f) ⊙ M_{t−1}.
	return g.Add(g.Mul(in, g.Tanh(next)), g.Mul(forget, memory))
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
		states[i] = g.Reshape(memory, b, 1, r.slots*d)
	}
	return g.Concat(1, states...)
}

var _ radgen.Module = (*Relational)(nil)
