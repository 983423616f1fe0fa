package relmem

// Mem2Mem in Transformer form.
//
// Reference: "Mem2Mem: Learning to Summarize Long Texts with
// Memory-to-Memory Transfer" (anonymous submission), §3, Eqs. 7
// and 9–20. The paper reports that with r ≪ L slots the write costs O(rT)
// against the O(NT) of a scratchpad over all encoder states. The paper builds Mem2Mem on a hierarchical RNN
// (HRED); here it drives a Transformer decoder the way R2Gen's relational
// memory does:
//   - H is the encoder output (B, L, D) (the sentence-level states h_j^(s));
//   - the decoder hidden state h_t^(d) that queries and writes the memory is
//     the embedded token of position t, the input of the decoder at t, so
//     that the memory of every position can be computed before the
//     (parallel, causal) decoder runs, as in R2Gen;
//   - the memory state after writing token t conditions position t, again
//     as R2Gen's memory does.
// Departures: the gate projections of Eqs. 18–19 carry one bias each (on
// the h term), which the paper omits; Attn (Eq. 7) has no biases.

import (
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// Mem2Mem is the encoder memory bank, its transfer to the decoder and the
// decoder's read and gated write (Mem2Mem §3.1–3.2). Parameter names
// (relative to the module):
//
//	bank.w2.weight    (d_a, D)   W_a2 of Eqs. 9–10
//	bank.w1.weight    (r, d_a)   W_a1 of Eq. 10
//	context.{q,k}.weight (d_a, D), context.v.weight (1, d_a)   Attn of Eq. 17
//	read.{q,k}.weight    (d_a, D), read.v.weight (1, d_a)      Attn of Eq. 13
//	combine.weight    (D, 2D)    W_m of Eq. 15
//	write.h.{weight,bias} (2D, D), write.c.weight (2D, D), write.m.weight (2D, D):
//	                  [W_z·; W_u·] of Eqs. 18–19, rows 0..D−1 the gate z, D..2D−1 the update u
//
// A Mem2Mem is safe for concurrent use by NoGrad graphs.
type Mem2Mem struct {
	slots, hidden int            // r and d_a
	BankW2        *radgen.Linear // bank.w2: W_a2
	BankW1        *radgen.Linear // bank.w1: W_a1
	CtxQ, CtxK    *radgen.Linear // context.q, context.k
	CtxV          *radgen.Linear // context.v
	ReadQ, ReadK  *radgen.Linear // read.q, read.k
	ReadV         *radgen.Linear // read.v
	Combine       *radgen.Linear // combine: W_m
	WriteH        *radgen.Linear // write.h
	WriteC        *radgen.Linear // write.c
	WriteM        *radgen.Linear // write.m
}

// NewMem2Mem returns a Mem2Mem of slots rows of width d with attention
// hidden size hidden (d_a), with PyTorch's default Linear initialisation
// drawn from rng.
func NewMem2Mem(slots, d, hidden int, rng *rand.Rand) *Mem2Mem {
	if slots <= 0 || d <= 0 || hidden <= 0 {
		panic(fmt.Sprintf("relmem: Mem2Mem of %d slots, width %d, hidden %d", slots, d, hidden))
	}
	return &Mem2Mem{
		slots: slots, hidden: hidden,
		BankW2:  radgen.NewLinear(d, hidden, false, rng),
		BankW1:  radgen.NewLinear(hidden, slots, false, rng),
		CtxQ:    radgen.NewLinear(d, hidden, false, rng),
		CtxK:    radgen.NewLinear(d, hidden, false, rng),
		CtxV:    radgen.NewLinear(hidden, 1, false, rng),
		ReadQ:   radgen.NewLinear(d, hidden, false, rng),
		ReadK:   radgen.NewLinear(d, hidden, false, rng),
		ReadV:   radgen.NewLinear(hidden, 1, false, rng),
		Combine: radgen.NewLinear(2*d, d, false, rng),
		WriteH:  radgen.NewLinear(d, 2*d, true, rng),
		WriteC:  radgen.NewLinear(d, 2*d, false, rng),
		WriteM:  radgen.NewLinear(d, 2*d, false, rng),
	}
}

// Width returns the row width D.
func (m *Mem2Mem) Width() int { return m.BankW2.Weight.Dim(1) }

// VisitParams implements radgen.Module.
func (m *Mem2Mem) VisitParams(visit func(string, *radgen.Tensor)) {
	for _, p := range []struct {
		name string
		l    *radgen.Linear
	}{{"bank.w2.", m.BankW2}, {"bank.w1.", m.BankW1}, {"context.q.", m.CtxQ}, {"context.k.", m.CtxK},
		{"context.v.", m.CtxV}, {"read.q.", m.ReadQ}, {"read.k.", m.ReadK}, {"read.v.", m.ReadV},
		{"combine.", m.Combine}, {"write.h.", m.WriteH}, {"write.c.", m.WriteC}, {"write.m.", m.WriteM}} {
		p.l.VisitParams(radgen.Prefixed(p.name, visit))
	}
}

// Bank builds the encoder memory bank from H (B, L, D):
//
//	A = softmax(W_a1 tanh(W_a2 Hᵀ))   (Eq. 10; softmax over the L states)
//	M^(e) = A H                       (Eq. 11)
//
// returning M^(e) (B, r, D), the initial decoder memory M_0^(d), and A
// (B, r, L) for the penalty of Eq. 12.
func (m *Mem2Mem) Bank(g *radgen.Graph, h *radgen.Tensor) (memory, attn *radgen.Tensor) {
	if h.Rank() != 3 || h.Dim(2) != m.Width() {
		panic(fmt.Sprintf("relmem: Mem2Mem bank over %v, want (B, L, %d)", h.Shape(), m.Width()))
	}
	scores := m.BankW1.Forward(g, g.Tanh(m.BankW2.Forward(g, h))) // (B, L, r) = (W_a1 tanh(W_a2 Hᵀ))ᵀ
	attn = g.Softmax(g.Transpose(scores, 1, 2))                   // (B, r, L)
	return g.MatMul(attn, h, false), attn
}

// BankPenalty returns ‖AAᵀ − I‖²_F (Eq. 12) averaged over the batch, a
// scalar, for the bank's attention A (B, r, L) from [Mem2Mem.Bank]: it
// pushes the r slots to attend to different encoder states.
func BankPenalty(g *radgen.Graph, attn *radgen.Tensor) *radgen.Tensor {
	if attn.Rank() != 3 {
		panic(fmt.Sprintf("relmem: penalty of %v, want (B, r, L)", attn.Shape()))
	}
	b, r := attn.Dim(0), attn.Dim(1)
	eye := radgen.Zeros(r, r)
	for i := range r {
		eye.Data()[i*r+i] = 1
	}
	if attn.Is64() {
		eye = eye.To64()
	}
	diff := g.Sub(g.MatMul(attn, attn, true), eye) // AAᵀ − I  (B, r, r)
	return g.Scale(g.Sum(g.Mul(diff, diff)), 1/float64(b))
}

// additive returns Attn weights softmax_k(v·tanh(q_t + k_k)) (Eq. 7) for
// projected queries q (B, T, d_a) and keys k (B, K, d_a): (B, T, K).
func additive(g *radgen.Graph, v *radgen.Linear, q, k *radgen.Tensor) *radgen.Tensor {
	b, t, da := q.Dim(0), q.Dim(1), q.Dim(2)
	n := k.Dim(1)
	sum := g.Add(g.Reshape(q, b, t, 1, da), g.Reshape(k, b, 1, n, da)) // (B, T, K, d_a)
	return g.Softmax(g.Reshape(v.Forward(g, g.Tanh(sum)), b, t, n))
}

// ContextKeys returns W_k H (B, L, d_a), the keys of the context attention
// of Eq. 17, once per study.
func (m *Mem2Mem) ContextKeys(g *radgen.Graph, h *radgen.Tensor) *radgen.Tensor {
	return m.CtxK.Forward(g, h)
}

// Context returns c_t = Σ_j β_tj h_j (Eq. 17) with β_t = Attn(x_t, H)
// (Eq. 7) for queries x (B, T, D), keys from ContextKeys (B, L, d_a) and H
// (B, L, D): (B, T, D).
func (m *Mem2Mem) Context(g *radgen.Graph, x, keys, h *radgen.Tensor) *radgen.Tensor {
	return g.MatMul(additive(g, m.CtxV, m.CtxQ.Forward(g, x), keys), h, false)
}

// Write is the gated write of Eqs. 18–20 for one position: from the memory
// M (B, r, D), the writer's state x (B, D) (h_{t+1}^(d)) and its context c
// (B, D) (c_t^(s)),
//
//	z_k = σ(W_z1 x + W_z2 c + W_z3 M_k)    (Eq. 18)
//	u_k = tanh(W_u1 x + W_u2 c + W_u3 M_k) (Eq. 19)
//	M_k ← z_k ⊙ M_k + (1 − z_k) ⊙ u_k      (Eq. 20)
//
// returning the new memory (B, r, D).
func (m *Mem2Mem) Write(g *radgen.Graph, memory, x, c *radgen.Tensor) *radgen.Tensor {
	b, d := x.Dim(0), x.Dim(1)
	in := g.Add(m.WriteH.Forward(g, x), m.WriteC.Forward(g, c)) // (B, 2D)
	return m.write(g, memory, g.Reshape(in, b, 1, 2*d))
}

// write applies Eqs. 18–20 given the precomputed x and c terms (B, 1, 2D).
func (m *Mem2Mem) write(g *radgen.Graph, memory, in *radgen.Tensor) *radgen.Tensor {
	d := memory.Dim(2)
	parts := g.Split(g.Add(m.WriteM.Forward(g, memory), in), 2, d, d)
	z, u := g.Sigmoid(parts[0]), g.Tanh(parts[1])
	return g.Add(u, g.Mul(z, g.Sub(memory, u))) // z⊙M + (1−z)⊙u
}

// Read returns the read vector m_t = Σ_k ψ_tk M_k with ψ_t = Attn(x_t, M)
// (Eqs. 13–14) for queries x (B, D) over the memory (B, r, D): (B, D).
func (m *Mem2Mem) Read(g *radgen.Graph, memory, x *radgen.Tensor) *radgen.Tensor {
	b, d := x.Dim(0), x.Dim(1)
	q := g.Reshape(m.ReadQ.Forward(g, x), b, 1, m.hidden)
	return g.Reshape(m.read(g, memory, q), b, d)
}

// read: q is the projected query (B, 1, d_a); the result (B, 1, D).
func (m *Mem2Mem) read(g *radgen.Graph, memory, q *radgen.Tensor) *radgen.Tensor {
	return g.MatMul(additive(g, m.ReadV, q, m.ReadK.Forward(g, memory)), memory, false)
}

// Augment returns the memory-augmented decoder input h^(m) = W_m[x; m]
// (Eq. 15) for x and read vectors m, both (…, D).
func (m *Mem2Mem) Augment(g *radgen.Graph, x, read *radgen.Tensor) *radgen.Tensor {
	return m.Combine.Forward(g, g.Concat(x.Rank()-1, x, read))
}

// Forward runs the decoder memory over inputs x (B, T, D) (the embedded
// tokens) from the initial memory init (B, r, D) (Bank's M^(e)), with the
// encoder states h (B, L, D) for the context of Eq. 17. At each position t
// it writes x_t (Eqs. 17–20) and then reads with x_t (Eqs. 13–14). It
// returns the memory after each write, flattened (B, T, r·D), and the read
// vectors (B, T, D).
func (m *Mem2Mem) Forward(g *radgen.Graph, x, h, init *radgen.Tensor) (states, reads *radgen.Tensor) {
	b, t, d := x.Dim(0), x.Dim(1), x.Dim(2)
	r := m.slots
	c := m.Context(g, x, m.ContextKeys(g, h), h)                // (B, T, D)
	in := g.Add(m.WriteH.Forward(g, x), m.WriteC.Forward(g, c)) // (B, T, 2D)
	q := m.ReadQ.Forward(g, x)                                  // (B, T, d_a)
	mem := init
	st := make([]*radgen.Tensor, t)
	rd := make([]*radgen.Tensor, t)
	for i := range t {
		mem = m.write(g, mem, g.Slice(in, 1, i, i+1))
		rd[i] = m.read(g, mem, g.Slice(q, 1, i, i+1))
		st[i] = g.Reshape(mem, b, 1, r*d)
	}
	if t == 1 {
		return st[0], rd[0]
	}
	return g.Concat(1, st...), g.Concat(1, rd...)
}
