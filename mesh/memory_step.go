package mesh

// Incremental decoding with M²'s attention (Cornia et al. 2020, Eqs. 1–3):
// the attention of one new position per row over a key/value cache and
// the memory slots, and over a source projected once per study with the
// slots appended. Both reach Eq. 1 through the function Forward uses
// (ScaledDotProductAttention.attendSplit), and the source's through the
// one attend that MultiHeadAttention's steps use too (Source.attend).

import (
	"fmt"

	"github.com/radgen/radgen"
)

// Step is Forward for one new position per row: x (R, D) holds each row's
// query input, which also supplies the new position's key and value; the
// row attends over its cached positions, the new one and the memory slots
// (Eq. 3), if any. It returns (R, D) and appends the new keys (h·d_k wide)
// and values (h·d_v wide) to c, whose Rows() must be R.
func (a *ScaledDotProductAttention) Step(g *radgen.Graph, x *radgen.Tensor, c *KVCache) *radgen.Tensor {
	return a.StepMasked(g, x, c, nil)
}

// StepMasked is Step with a mask (R|1, 1, 1, c.Len()+1), as M²'s code
// writes it, or (R|1, 1, c.Len()+1), zero = masked, on any device, over
// each row's positions oldest first, the new one last; it never covers the
// slots. A nil mask masks nothing.
func (a *ScaledDotProductAttention) StepMasked(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor {
	if x.Rank() != 2 || x.Dim(1) != a.Width() {
		panic(fmt.Sprintf("mesh: attention step wants (R, %d), got %v", a.Width(), x.Shape()))
	}
	var unmasked *radgen.Tensor
	if mask != nil {
		unmasked = keepMask(mask, x.Dim(0), 1, c.Len()+1, a.Slots(), x.Device())
	}
	r := x.Dim(0)
	q := a.FCQ.Forward(g, x)
	c.append(g, a.FCK.Forward(g, x), a.FCV.Forward(g, x))
	var kh, vh *radgen.Tensor
	if a.Slots() == 0 {
		kh, vh = c.gatherHeads(g, false, a.Heads), c.gatherHeads(g, true, a.Heads)
	} else {
		k, v := a.withSlots(g, c.gather(g, false), c.gather(g, true))
		kh, vh = a.heads(g, k, a.DK), a.heads(g, v, a.DV)
	}
	q = g.Reshape(q, r, 1, a.Heads*a.DK)
	out, _ := a.attendSplit(g, q, kh, vh, unmasked, false)
	return g.Reshape(out, r, a.Width())
}

// Project returns the keys and values of the source src (B, N, D), memory
// slots appended (Eq. 3): the part of Forward that every decoding step of
// every row of the studies shares.
func (a *ScaledDotProductAttention) Project(g *radgen.Graph, src *radgen.Tensor) *Source {
	return a.ProjectMasked(g, src, nil)
}

// ProjectMasked is Project of a source with its mask (B|1, 1, 1, N) or
// (B|1, 1, N), zero = masked, on any device, or nil for none.
func (a *ScaledDotProductAttention) ProjectMasked(g *radgen.Graph, src, mask *radgen.Tensor) *Source {
	if src.Rank() != 3 || src.Dim(2) != a.Width() {
		panic(fmt.Sprintf("mesh: attention source %v, want (B, N, %d)", src.Shape(), a.Width()))
	}
	k, v := a.withSlots(g, a.FCK.Forward(g, src), a.FCV.Forward(g, src))
	s := &Source{keys: a.heads(g, k, a.DK), values: a.heads(g, v, a.DV), width: src.Dim(1), levels: 1}
	if mask != nil {
		s.unmasked = keepMask(mask, src.Dim(0), 1, src.Dim(1), a.Slots(), src.Device())
	}
	return s
}

// Attend is Forward for one query per row over a projected source: row i
// of q (R, D) attends to the source of study study[i]. When the rows are
// the studies' rows in order, R/B each (as package decode keeps them), the
// product reads each study's keys and values once for all of its rows;
// otherwise they are gathered per row. It returns (R, D) and, if weights
// is true, the attention probabilities (R, h, N+m), memory slots last.
// Over a source of L levels (see [Source]) the results are (L·R, D) and
// (L·R, h, N+m), level by level.
func (a *ScaledDotProductAttention) Attend(g *radgen.Graph, q *radgen.Tensor, src *Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	if q.Rank() != 2 || q.Dim(1) != a.Width() || len(study) != q.Dim(0) {
		panic(fmt.Sprintf("mesh: attention of %v queries for %d rows", q.Shape(), len(study)))
	}
	return src.attend(g, a, a.FCQ.Forward(g, q), study, weights)
}
