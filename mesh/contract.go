package mesh

import "github.com/radgen/radgen"

// Attention is the contract of every attention module in this package and
// of any module that takes an attention's place in a layer: it attends
// queries q (B, Tq, D) over keys k and values v (B, Tk, D) and returns
// (B, Tq, D). mask, if not nil, broadcasts to (B, Tq, Tk) — (B, 1, Tk) for
// padding or (B, Tq, Tq) for causal self-attention — and its zero entries
// are masked out. Its parameters are visited under the names its layer
// gives them.
//
// [MultiHeadAttention] (R2Gen's) and [ScaledDotProductAttention] (M²'s,
// with or without memory slots) implement it, so either serves as the
// self-attention of R2Gen's encoder layer or of a variant's.
type Attention interface {
	radgen.Module
	Forward(g *radgen.Graph, q, k, v, mask *radgen.Tensor) *radgen.Tensor
}

var (
	_ Attention = (*MultiHeadAttention)(nil)
	_ Attention = (*ScaledDotProductAttention)(nil)
)
