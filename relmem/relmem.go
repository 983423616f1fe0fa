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
//
// It is StepPrepared of the memory prepared at once.
func (r *Relational) Step(g *radgen.Graph, input, memory *radgen.Tensor) *radgen.Tensor {
	return r.StepPrepared(g, input, r.Prepare(g, memory))
}

// Prepared is a memory M_{t−1} (B, Slots, D) with the products of its next
// step that read it alone: its rows' queries, keys and values (Eq. 6) and
// U·tanh(M) (Eqs. 8–9). A decoding prepares them as soon as the memory is
// known, within the graph's Ahead, so that they are computed beside the
// rest of its step.
type Prepared struct {
	Memory     *radgen.Tensor // M_{t−1}
	q, k, v, u *radgen.Tensor // M W_q, M W_k, M W_v, U·tanh(M)
}

// Prepare returns memory prepared for its next step.
func (r *Relational) Prepare(g *radgen.Graph, memory *radgen.Tensor) Prepared {
	var out [4]*radgen.Tensor
	xs := []*radgen.Tensor{memory, memory, memory, g.Tanh(memory)}
	ls := []*radgen.Linear{r.Attn.Linears[0], r.Attn.Linears[1], r.Attn.Linears[2], r.U}
	g.Linears(out[:], xs, ls, false)
	return Prepared{Memory: memory, q: out[0], k: out[1], v: out[2], u: out[3]}
}

// Reorder returns p with its rows (the first axis) taken in the order src,
// as a beam search reorders its rows.
func (p Prepared) Reorder(g *radgen.Graph, src []int) Prepared {
	return Prepared{
		Memory: g.IndexSelect(p.Memory, 0, src),
		q:      g.IndexSelect(p.q, 0, src),
		k:      g.IndexSelect(p.k, 0, src),
		v:      g.IndexSelect(p.v, 0, src),
		u:      g.IndexSelect(p.u, 0, src),
	}
}

// StepPrepared is Step from a prepared memory: it consumes one input y_{t−1}
// (B, D) and returns M_t (B, Slots, D). The input's terms, W·y and its keys
// and values, are the products left to it; W·y is computed ahead
// (Graph.Ahead), beside the attention and the MLP.
func (r *Relational) StepPrepared(g *radgen.Graph, input *radgen.Tensor, p Prepared) *radgen.Tensor {
	b, d := input.Dim(0), input.Dim(1)
	memory := p.Memory
	y := g.Reshape(input, b, 1, d)
	var wy [1]*radgen.Tensor
	g.Ahead(func() { g.Linears(wy[:], []*radgen.Tensor{y}, []*radgen.Linear{r.W}, false) })
	var kv [2]*radgen.Tensor
	g.Linears(kv[:], []*radgen.Tensor{y, y}, r.Attn.Linears[1:3], false)
	k, v := g.Concat(1, p.k, kv[0]), g.Concat(1, p.v, kv[1])         // [M; y] W_k, [M; y] W_v
	next := g.Add(memory, r.Attn.AttendProjected(g, p.q, k, v, nil)) // Z + M (Eq. 6)
	var mlp [1]*radgen.Tensor
	g.Linears(mlp[:], []*radgen.Tensor{next}, []*radgen.Linear{r.MLP0}, true)
	g.Linears(mlp[:], mlp[:], []*radgen.Linear{r.MLP2}, true)
	next = g.Add(next, mlp[0]) // Eq. 7
	gates := g.Add(wy[0], p.u) // Eqs. 8–9: W·y + U·tanh(M), (B, S, 2D)
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
