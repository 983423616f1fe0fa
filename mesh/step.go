package mesh

// Incremental decoding: the attention of one new position per row over
// the positions its row has consumed (a key/value cache), and over a
// source computed once per study and shared by the study's rows.
//
// Both are written in the root package's ops, so they run on the engine
// their inputs live on, and both reach the scaled dot-product of
// Vaswani et al. 2017, Eq. 1, through the one function that the full
// forward pass uses (scaledDotProduct).

import (
	"fmt"

	"github.com/radgen/radgen"
)

// KVCache holds the projected keys and values of the positions a batch of
// decoding rows has consumed, for one attention. Position j's keys and
// values are written once, for the rows that existed at step j; every row
// keeps an ancestry — for each position, which row of that step holds its
// history — so that [KVCache.Reorder] (a beam search keeping some rows and
// repeating others) moves indices, never cached vectors.
//
// The keys and values live on the device of the attention's inputs, every
// position's rows stacked in one [radgen.Rows] each: a step appends its
// rows there and gathers every row's history from there through the
// ancestry, with the root package's ops on every engine. So the cache is
// one path whether the graph records gradients or not, and a step's own
// results may be overwritten after it (a graph's radgen.Arena). Outside a
// recording graph the histories a step gathers live in buffers of the
// cache that the next step overwrites.
//
// A KVCache belongs to one decoding and one goroutine.
type KVCache struct {
	// keys and values hold every position's rows stacked in order,
	// (total, W) each; position j's rows start at first[j].
	keys, values radgen.Rows
	first        []int
	n            int    // positions cached
	width        [2]int // W of the keys and of the values
	// anc[r·stride + j]: the row of position j that row r continues, for
	// j < Len(); next is the buffer Reorder writes into.
	anc, next []int
	stride    int
	rows      int
	// idx holds the gather indices of the rows' histories split into
	// idxHeads heads (0: none yet for the cache as it is now), which the
	// keys and the values share when they have as many heads.
	idx      []int
	idxHeads int
}

// NewKVCache returns an empty cache for rows decoding rows.
func NewKVCache(rows int) *KVCache {
	if rows <= 0 {
		panic(fmt.Sprintf("mesh: key/value cache for %d rows", rows))
	}
	return &KVCache{rows: rows}
}

// Reset empties c for a new decoding of rows rows. It keeps the buffers
// that c has grown, so that a decoding reusing the cache of an earlier
// one of about the same length allocates nothing for it.
func (c *KVCache) Reset(rows int) {
	if rows <= 0 {
		panic(fmt.Sprintf("mesh: key/value cache reset to %d rows", rows))
	}
	c.keys.Reset()
	c.values.Reset()
	c.n, c.width, c.rows, c.idxHeads = 0, [2]int{}, rows, 0
	c.first = c.first[:0]
	// Lay the ancestry buffer out afresh for the new row count: as many
	// positions per row as before where it fits them, fewer where it does
	// not (append grows it when it must, Reorder the other buffer).
	c.stride = min(c.stride, cap(c.anc)/rows)
	c.anc = c.anc[:rows*c.stride]
	c.next = c.next[:0]
}

// Len returns the number of positions cached.
func (c *KVCache) Len() int { return c.n }

// Rows returns the number of rows.
func (c *KVCache) Rows() int { return c.rows }

// Reorder makes row i continue the history of row src[i], for every
// i < len(src); afterwards Rows() == len(src). Indices may repeat.
func (c *KVCache) Reorder(src []int) error {
	if len(src) == 0 {
		return fmt.Errorf("mesh: reorder to zero rows")
	}
	for _, r := range src {
		if r < 0 || r >= c.rows {
			return fmt.Errorf("mesh: reorder index %d of %d rows", r, c.rows)
		}
	}
	t, w := c.Len(), c.stride
	if n := len(src) * w; cap(c.next) < n {
		c.next = make([]int, n, 2*n)
	}
	next := c.next[:len(src)*w]
	for i, r := range src {
		copy(next[i*w:i*w+t], c.anc[r*w:r*w+t])
	}
	c.anc, c.next, c.rows = next, c.anc, len(src)
	c.idxHeads = 0
	return nil
}

// ancestry returns row r's ancestry, one row index per position.
func (c *KVCache) ancestry(r int) []int { return c.anc[r*c.stride : r*c.stride+c.Len()] }

// append records the keys and values (Rows(), D) of a new position.
func (c *KVCache) append(g *radgen.Graph, k, v *radgen.Tensor) {
	if k.Rank() != 2 || v.Rank() != 2 || k.Dim(0) != c.rows || v.Dim(0) != c.rows {
		panic(fmt.Sprintf("mesh: cache of %d rows given keys %v and values %v", c.rows, k.Shape(), v.Shape()))
	}
	if c.n > 0 && (k.Dim(1) != c.width[0] || v.Dim(1) != c.width[1]) {
		panic(fmt.Sprintf("mesh: cache of keys %d and values %d wide given %v and %v", c.width[0], c.width[1], k.Shape(), v.Shape()))
	}
	c.width = [2]int{k.Dim(1), v.Dim(1)}
	c.first = append(c.first, c.keys.Len())
	c.keys.Append(g, k)
	c.values.Append(g, v)
	c.n++
	c.idxHeads = 0
	t := c.n - 1       // the new position
	if t >= c.stride { // room for more positions in every row
		w := max(2*c.stride, 16)
		anc := make([]int, c.rows*w, 2*c.rows*w)
		for r := range c.rows {
			copy(anc[r*w:r*w+t], c.anc[r*c.stride:r*c.stride+t])
		}
		c.anc, c.next, c.stride = anc, nil, w
	}
	for r := range c.rows {
		c.anc[r*c.stride+t] = r
	}
}

// gather returns every row's history of the keys (or the values), as
// (Rows(), Len(), W), through the ancestry, in gatherHeads's buffer. Keys
// and values may differ in width (M²'s d_k and d_v).
func (c *KVCache) gather(g *radgen.Graph, values bool) *radgen.Tensor {
	w := c.width[0]
	if values {
		w = c.width[1]
	}
	return g.Reshape(c.gatherHeads(g, values, 1), c.rows, c.n, w)
}

// gatherHeads returns every row's history of the keys (or the values)
// split into h heads, (Rows(), h, Len(), W/h): one gather of the stacked
// rows, each cut into its h heads, through the ancestry. Outside a
// recording graph the result lives in a buffer of the cache that the next
// call for the keys (or the values) overwrites: it serves one step.
func (c *KVCache) gatherHeads(g *radgen.Graph, values bool, h int) *radgen.Tensor {
	rows, w := &c.keys, c.width[0]
	if values {
		rows, w = &c.values, c.width[1]
	}
	if c.idxHeads != h {
		if n := c.rows * h * c.n; cap(c.idx) < n {
			c.idx = make([]int, 0, 2*n) // room for more positions
		}
		idx := c.idx[:0]
		for row := range c.rows {
			a := c.ancestry(row)
			for hd := range h {
				for j, r := range a {
					idx = append(idx, (c.first[j]+r)*h+hd)
				}
			}
		}
		c.idx, c.idxHeads = idx, h
	}
	return g.Reshape(rows.Gather(g, c.idx, h), c.rows, h, c.n, w/h)
}

// Step is Forward for one new position per row: x (R, D) holds each row's
// query input, which also supplies the new position's key and value; the
// row attends over its cached positions and the new one. It returns
// (R, D) and appends the new keys and values to c, whose Rows() must be R.
// There is no mask: a cache holds only positions the rows have consumed.
func (m *MultiHeadAttention) Step(g *radgen.Graph, x *radgen.Tensor, c *KVCache) *radgen.Tensor {
	return m.step(g, x, c, nil)
}

// StepMasked is Step that also masks some of each row's positions: mask
// (R|1, 1, c.Len()+1) or (R|1, 1, 1, c.Len()+1), zero = masked, on any
// device, covers the row's cached positions, oldest first, and the new one
// last.
func (m *MultiHeadAttention) StepMasked(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor {
	if mask == nil {
		return m.step(g, x, c, nil)
	}
	if x.Rank() == 2 {
		checkMask(mask, x.Dim(0), 1, c.Len()+1)
	}
	return m.step(g, x, c, headsMask(g, mask.To(x.Device())))
}

// step is Step with the mask, if any, shaped (R|1, 1, 1, c.Len()+1).
func (m *MultiHeadAttention) step(g *radgen.Graph, x *radgen.Tensor, c *KVCache, mask *radgen.Tensor) *radgen.Tensor {
	if x.Rank() != 2 || x.Dim(1) != m.Width() {
		panic(fmt.Sprintf("mesh: attention step wants (R, %d), got %v", m.Width(), x.Shape()))
	}
	r, d := x.Dim(0), x.Dim(1)
	q := m.Linears[0].Forward(g, x)
	c.append(g, m.Linears[1].Forward(g, x), m.Linears[2].Forward(g, x))
	kh, vh := c.gatherHeads(g, false, m.Heads), c.gatherHeads(g, true, m.Heads)
	qh := g.Reshape(q, r, m.Heads, 1, d/m.Heads)
	ctx, _ := m.attendHeads(g, qh, kh, vh, mask, false)
	return g.Reshape(ctx, r, d)
}

// checkMask panics unless mask, (B|1, Tq|1, Tk) or (B|1, 1, Tq|1, Tk),
// fits b rows of tq queries over tk keys.
func checkMask(mask *radgen.Tensor, b, tq, tk int) {
	s := mask.Shape()
	if len(s) == 4 && s[1] == 1 {
		s = []int{s[0], s[2], s[3]}
	}
	if len(s) != 3 || (s[0] != b && s[0] != 1) || (s[1] != tq && s[1] != 1) || s[2] != tk {
		panic(fmt.Sprintf("mesh: attention mask %v, want (%d|1, %d|1, %d) or (%d|1, 1, %d|1, %d)", mask.Shape(), b, tq, tk, b, tq, tk))
	}
}

// Source is an attention's keys and values over a source (the encoder
// output of a batch of studies), projected once and read by every
// decoding step of every row of the studies, with the source's mask: what
// [IncrementalAttention.Project] and ProjectMasked return and Attend
// reads, for [MultiHeadAttention] and [ScaledDotProductAttention] alike.
//
// A source may hold L levels of every study (M²'s encoder levels, which
// [MeshedCrossAttention.Project] projects at once): then each row attends
// every level of its study, and Attend's results are L per row.
type Source struct {
	// keys and values are split into heads, (L·B, h, N', d_k) and
	// (L·B, h, N', d_v), N' = N plus the attention's memory slots (last);
	// level l of study b is at l·B + b.
	keys, values *radgen.Tensor
	unmasked     *radgen.Tensor // (L·B|1, 1, 1, N'), zero = masked; nil: nothing is
	width        int            // N
	levels       int            // L ≥ 1
}

// Studies returns B.
func (s *Source) Studies() int { return s.keys.Dim(0) / s.Levels() }

// Width returns N, the source positions of each study (an attention's
// memory slots not counted).
func (s *Source) Width() int { return s.width }

// Levels returns L, the levels of each study's source (1 unless
// [MeshedCrossAttention.Project] made it).
func (s *Source) Levels() int { return max(s.levels, 1) }

// Project returns the keys and values of the source src (B, N, D), the
// part of Forward that does not depend on the queries.
func (m *MultiHeadAttention) Project(g *radgen.Graph, src *radgen.Tensor) *Source {
	if src.Rank() != 3 || src.Dim(2) != m.Width() {
		panic(fmt.Sprintf("mesh: attention source %v, want (B, N, %d)", src.Shape(), m.Width()))
	}
	return &Source{keys: m.heads(g, m.Linears[1].Forward(g, src)), values: m.heads(g, m.Linears[2].Forward(g, src)),
		width: src.Dim(1), levels: 1}
}

// ProjectMasked is Project of a source with its mask (B|1, 1, N) or
// (B|1, 1, 1, N), zero = masked, on any device, or nil for none.
func (m *MultiHeadAttention) ProjectMasked(g *radgen.Graph, src, mask *radgen.Tensor) *Source {
	s := m.Project(g, src)
	if mask != nil {
		checkMask(mask, src.Dim(0), 1, src.Dim(1))
		s.unmasked = g.Reshape(mask.To(src.Device()), mask.Dim(0), 1, 1, src.Dim(1))
	}
	return s
}

// Attend is Forward for one query per row over a projected source: row i
// of q (R, D) attends to the source of study study[i]. When the rows are
// the studies' rows in order, R/B each (as package decode keeps them), the
// product reads each study's keys and values once for all of its rows;
// otherwise they are gathered per row. It returns (R, D) and, if weights
// is true, the attention probabilities (R, h, N). Over a source of L
// levels (see [Source]) the results are (L·R, D) and (L·R, h, N), level
// by level.
func (m *MultiHeadAttention) Attend(g *radgen.Graph, q *radgen.Tensor, src *Source, study []int, weights bool) (out, probs *radgen.Tensor) {
	if q.Rank() != 2 || q.Dim(1) != m.Width() || len(study) != q.Dim(0) {
		panic(fmt.Sprintf("mesh: attention of %v queries for %d rows", q.Shape(), len(study)))
	}
	return src.attend(g, m, m.Linears[0].Forward(g, q), study, weights)
}

// attendSplit implements sourceAttention: the heads of the projected
// queries qp (B', Tq, D), then Eq. 1 and the output projection.
func (m *MultiHeadAttention) attendSplit(g *radgen.Graph, qp, kh, vh, unmasked *radgen.Tensor, keep bool) (*radgen.Tensor, *radgen.Tensor) {
	return m.attendHeads(g, m.heads(g, qp), kh, vh, unmasked, keep)
}

// sourceAttention is what [Source.attend] needs of an attention: Eq. 1 and
// the output projection for projected queries qp (B', Tq, h·d_k) over keys
// kh (B', h, N', d_k) and values vh (B', h, N', d_v) split into heads, with
// a mask (B'|1, 1, 1, N'), zero = masked, or nil. It returns (B', Tq, D)
// and, if keep is true, the probabilities (B', h, Tq, N').
type sourceAttention interface {
	attendSplit(g *radgen.Graph, qp, kh, vh, unmasked *radgen.Tensor, keep bool) (out, probs *radgen.Tensor)
}

// attend is Attend over s for projected queries qp (R, h·d_k), written
// once for every attention a of the package. Over L levels each row's
// query is repeated for every level (row k of level l at l·R + k), so that
// one product attends every level, and the rows, if grouped by study, are
// still grouped.
func (s *Source) attend(g *radgen.Graph, a sourceAttention, qp *radgen.Tensor, study []int, weights bool) (out, probs *radgen.Tensor) {
	b, lv := s.Studies(), s.Levels()
	for _, st := range study {
		if st < 0 || st >= b {
			panic(fmt.Sprintf("mesh: row of study %d over a source of %d", st, b))
		}
	}
	if lv > 1 {
		r := qp.Dim(0)
		rowOf, srcOf := make([]int, lv*r), make([]int, lv*r)
		for l := range lv {
			for k, st := range study {
				rowOf[l*r+k], srcOf[l*r+k] = k, l*b+st
			}
		}
		qp, study = g.IndexSelect(qp, 0, rowOf), srcOf
	}
	r, hk := qp.Dim(0), qp.Dim(1)
	nb, w := s.keys.Dim(0), s.keys.Dim(2)
	var ctx *radgen.Tensor
	if per, ok := grouped(study, nb); ok {
		ctx, probs = a.attendSplit(g, g.Reshape(qp, nb, per, hk), s.keys, s.values, s.unmasked, weights)
	} else {
		k, v := g.IndexSelect(s.keys, 0, study), g.IndexSelect(s.values, 0, study)
		unmasked := s.unmasked
		if unmasked != nil && unmasked.Dim(0) > 1 {
			unmasked = g.IndexSelect(unmasked, 0, study)
		}
		ctx, probs = a.attendSplit(g, g.Reshape(qp, r, 1, hk), k, v, unmasked, weights)
	}
	if probs != nil {
		probs = g.Reshape(g.Permute(probs, 0, 2, 1, 3), r, probs.Dim(1), w) // (B', h, per, N') → (R, h, N')
	}
	return g.Reshape(ctx, r, ctx.Dim(2)), probs
}

// grouped reports whether the rows are b studies' rows in order, the same
// number each: study[i] == i / per.
func grouped(study []int, b int) (per int, ok bool) {
	if b <= 0 || len(study)%b != 0 {
		return 0, false
	}
	per = len(study) / b
	for i, s := range study {
		if s != i/per {
			return 0, false
		}
	}
	return per, true
}
