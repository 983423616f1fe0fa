package mesh

import "github.com/radgen/radgen"

// Attention is the contract of every attention module in this package and
// of any module that takes an attention's place in a layer: it attends
// queries q (B, Tq, D) over keys k and values v (B, Tk, D) and returns
// (B, Tq, D). mask, if not nil, broadcasts to (B, Tq, Tk) — (B|1, 1, Tk)
// for padding or (B|1, Tq, Tq) for causal self-attention, or the same with
// a unit dimension for the heads, (B|1, 1, Tq|1, Tk), as M²'s code writes
// its masks — and its zero entries are masked out. Its parameters are
// visited under the names its layer gives them.
//
// [MultiHeadAttention] (R2Gen's) and [ScaledDotProductAttention] (M²'s,
// with or without memory slots) implement it, so either serves as the
// self-attention of R2Gen's encoder layer or of a variant's.
type Attention interface {
	radgen.Module
	Forward(g *radgen.Graph, q, k, v, mask *radgen.Tensor) *radgen.Tensor
}

// IncrementalAttention is an [Attention] that also decodes one position
// per row at a time, as a decoder layer's step needs it:
//
//   - Step attends each row's new position x (R, D) over the positions its
//     row has consumed, kept in a [KVCache], and the new one (the causal
//     self-attention of one step); StepMasked also masks some of them,
//     mask (R|1, 1, c.Len()+1) or (R|1, 1, 1, c.Len()+1), zero = masked,
//     oldest position first.
//   - Project computes, once per batch of studies, the keys and values over
//     a source (B, N, D), such as an encoder's output, as a [Source];
//     ProjectMasked also records the source's mask (B|1, 1, N) or
//     (B|1, 1, 1, N), zero = masked. Attend attends one query per row
//     (R, D) over the source of the row's study, study[i] for row i, and
//     returns (R, D) with, if weights is true, the probabilities
//     (R, h, N'), N' the source's keys (memory slots included, last).
//     Over a source of L levels ([MeshedCrossAttention.Project]) each row
//     attends every level of its study: the results are (L·R, D) and
//     (L·R, h, N'), level by level, each level's rows in order.
//
// Each gives what Forward gives for the same queries, keys, values and
// mask, so that a layer's forward pass and its incremental step share
// their bodies. [MultiHeadAttention] and [ScaledDotProductAttention]
// implement it, with one [Source] type, so that a decoder layer's step
// reads the same whichever of them it holds.
type IncrementalAttention interface {
	Attention
	Step(g *radgen.Graph, x *radgen.Tensor, c *KVCache) *radgen.Tensor
	StepMasked(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor
	Project(g *radgen.Graph, src *radgen.Tensor) *Source
	ProjectMasked(g *radgen.Graph, src, mask *radgen.Tensor) *Source
	Attend(g *radgen.Graph, q *radgen.Tensor, src *Source, study []int, weights bool) (out, probs *radgen.Tensor)
}

var (
	_ Attention            = (*MultiHeadAttention)(nil)
	_ Attention            = (*ScaledDotProductAttention)(nil)
	_ IncrementalAttention = (*MultiHeadAttention)(nil)
	_ IncrementalAttention = (*ScaledDotProductAttention)(nil)
)
