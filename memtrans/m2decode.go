package memtrans

// Incremental decoding for the Meshed-Memory Transformer: the stateful
// mode of aimagelab/meshed-memory-transformer (models/containers.py
// statefulness, decoders.py running_mask_self_attention / running_seq,
// attention.py running_keys / running_values) without re-projecting the
// prefix at every step.

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/f32"
	"github.com/radgen/radgen/internal/kernels"
	"github.com/radgen/radgen/mesh"
)

// m2CPUDecoding is the incremental decoding state of a batch of studies under
// an [M2Transformer]; it implements decode.Model, so any strategy of
// package decode (M²'s own beam search: decode.BeamSearch{Semantics:
// decode.M2}) can drive it.
//
// It computes what the published stateful decoder computes:
//   - each decoder self-attention attends the layer inputs of all earlier
//     steps of its row (M² concatenates the un-projected inputs into
//     running_keys and running_values and projects them again every step;
//     the projections are kept here instead, computed once per position,
//     and addressed through a per-row ancestry table so that Reorder moves
//     indices, never vectors);
//   - a step whose token is <pad> is masked as a key for later steps
//     (running_mask_self_attention) and its own output is zeroed (mask_pad);
//   - step t uses positional row t+1 whatever the token (running_seq);
//   - the cross-attention keys and values of every decoder layer over every
//     encoder level are computed once per study and shared by all of its
//     rows (beams), as is the study's region mask.
//
// After the first steps have sized the buffers, Step and Reorder allocate
// nothing of their own (the matrix products of internal/f32 may; see
// TestM2StepAllocs). The weights are read through views taken when
// decoding starts. An m2CPUDecoding belongs to one goroutine; the model it came from
// may serve many concurrently.
type m2CPUDecoding struct {
	m       *m2Model
	words   []float32 // (V, D) word embeddings
	pos     []float32 // (P, D) positional table
	out     m2Dense   // D → V
	layers  []m2Layer
	studies int
	rows    int
	t       int     // steps taken
	study   []int32 // row → study

	// Self-attention cache, per decoder layer: [posCap][rowCap][h·d_k]
	// keys and [posCap][rowCap][h·d_v] values; padKey[pos·rowCap + slot]
	// marks slots whose token was <pad>.
	selfK, selfV   [][]float32
	padKey         []bool
	anc, ancNext   []int32 // anc[r·posCap + j]: slot holding position j of row r
	rowCap, posCap int

	// Cross-attention keys and values per decoder layer, [B][N][R][h·d_k|v],
	// and the region mask [B][R] (true = masked).
	crossK, crossV [][]float32
	encMask        []bool
	regions        int
	levels         int

	// Scratch, sized for rowCap rows.
	x, s, q, ctx, tmp, cat, gate, acc []float32
	cs, es                            []float32 // [N][rows][h·d_v], [N][rows][D]
	ff                                []float32
	pad                               []float32
	inv                               []float32
	scores                            []float32
	logits                            []float32
	rowTmp                            []int32
	slots                             []int32   // [posCap]
	attn                              []float32 // [rows][R]: last layer's cross-attention
}

var (
	_ decode.Model             = (*m2CPUDecoding)(nil)
	_ decode.AttentionRecorder = (*m2CPUDecoding)(nil)
)

// m2Dense is a Linear layer's weights as raw slices, taken once when
// decoding starts (reading a tensor's storage allocates).
type m2Dense struct {
	w, b    []float32 // (out, in), (out) or nil
	out, in int
}

func m2DenseOf(l *radgen.Linear) m2Dense {
	d := m2Dense{w: l.Weight.Data(), out: l.Weight.Dim(0), in: l.Weight.Dim(1)}
	if l.Bias != nil {
		d.b = l.Bias.Data()
	}
	return d
}

// apply computes dst[r] = W·x[r] + b for rows rows.
func (l m2Dense) apply(dst, x []float32, rows int) {
	beta := float32(0)
	if l.b != nil {
		for r := range rows {
			copy(dst[r*l.out:(r+1)*l.out], l.b)
		}
		beta = 1
	}
	f32.Gemm(false, true, rows, l.out, l.in, 1, x[:rows*l.in], l.in, l.w, l.in, beta, dst[:rows*l.out], l.out)
}

// m2Norm is a LayerNorm's parameters as raw slices.
type m2Norm struct {
	w, b []float32
	eps  float64
}

func m2NormOf(ln *mesh.LayerNorm) m2Norm { return m2Norm{ln.Weight.Data(), ln.Bias.Data(), ln.Eps} }

// m2Layer is one meshed decoder layer's weights as raw slices.
type m2Layer struct {
	selfQ, selfK, selfV, selfO m2Dense
	encQ, encO                 m2Dense
	ff1, ff2                   m2Dense
	alpha                      []m2Dense
	selfNorm, encNorm, ffNorm  m2Norm
}

func m2LayerOf(l *mesh.MeshedLayer) m2Layer {
	sa, ea := l.SelfAtt.Attention, l.EncAtt.Attention
	w := m2Layer{
		selfQ: m2DenseOf(sa.FCQ), selfK: m2DenseOf(sa.FCK), selfV: m2DenseOf(sa.FCV), selfO: m2DenseOf(sa.FCO),
		encQ: m2DenseOf(ea.FCQ), encO: m2DenseOf(ea.FCO),
		ff1: m2DenseOf(l.PWFF.FC1), ff2: m2DenseOf(l.PWFF.FC2),
		selfNorm: m2NormOf(l.SelfAtt.Norm), encNorm: m2NormOf(l.EncAtt.Norm), ffNorm: m2NormOf(l.PWFF.Norm),
	}
	for _, a := range l.Alpha {
		w.alpha = append(w.alpha, m2DenseOf(a))
	}
	return w
}

// startCPUDecoding encodes region features (B, R, d_in), masking regions by
// Config.Padding, and returns a decoding state with one row per study.
func (m *m2Model) startCPUDecoding(feats *radgen.Tensor) (*m2CPUDecoding, error) {
	if feats.Is64() {
		feats = feats.To32()
	}
	enc, err := m.encode(radgen.NoGrad(), feats)
	if err != nil {
		return nil, err
	}
	return m.startCPUDecodingEncoded(enc)
}

// StartDecodingEncoded returns a decoding state with one row per study of
// an encoding made by Encode or EncodeMasked (float32, NoGrad).
func (m *m2Model) startCPUDecodingEncoded(enc *m2Encoded) (*m2CPUDecoding, error) {
	c := m.Config
	if enc == nil || enc.Levels == nil || enc.Levels.Rank() != 4 || enc.Levels.Dim(1) != c.EncLayers || enc.Levels.Dim(3) != c.DModel {
		return nil, fmt.Errorf("memtrans: M² encoding is not (B, %d, R, %d)", c.EncLayers, c.DModel)
	}
	levels := enc.Levels
	if levels.Is64() {
		levels = levels.To32()
	}
	// Each layer's source: the levels themselves (meshed) or, with a
	// multi-view routing, its soft-integrated view as one level.
	sources := m.Decoder.Sources(radgen.NoGrad(), levels)
	b, n, r := levels.Dim(0), sources[0].Dim(1), levels.Dim(2)
	s := &m2CPUDecoding{m: m, studies: b, rows: b, regions: r, levels: n,
		words: m.Decoder.WordEmb.Data(), pos: m.Decoder.PosEmb.Data(), out: m2DenseOf(m.Decoder.FC)}
	for _, l := range m.Decoder.Layers {
		s.layers = append(s.layers, m2LayerOf(l))
	}
	s.encMask = make([]bool, b*r)
	if enc.Mask != nil {
		ms := enc.Mask.Shape()
		if enc.Mask.Len() != b*r || len(ms) != 4 {
			return nil, fmt.Errorf("memtrans: M² region mask %v for %d studies of %d regions", ms, b, r)
		}
		for i, v := range enc.Mask.Float64s() {
			s.encMask[i] = v != 0
		}
	}
	for i, l := range m.Decoder.Layers {
		data := sources[i].Data()
		att := l.EncAtt.Attention
		k := make([]float32, b*n*r*att.Heads*att.DK)
		v := make([]float32, b*n*r*att.Heads*att.DV)
		m2DenseOf(att.FCK).apply(k, data, b*n*r)
		m2DenseOf(att.FCV).apply(v, data, b*n*r)
		s.crossK, s.crossV = append(s.crossK, k), append(s.crossV, v)
	}
	s.study = make([]int32, b)
	for i := range s.study {
		s.study[i] = int32(i)
	}
	s.ensure(b, c.MaxLen)
	return s, nil
}

// VocabSize implements decode.Model.
func (s *m2CPUDecoding) VocabSize() int { return s.m.Config.Vocab }

// Rows implements decode.Model.
func (s *m2CPUDecoding) Rows() int { return s.rows }

// Position returns how many tokens each row has consumed.
func (s *m2CPUDecoding) position() int { return s.t }

// AttentionWidth implements decode.AttentionRecorder: the number of image
// regions of a study.
func (s *m2CPUDecoding) AttentionWidth() int { return s.regions }

// Attention implements decode.AttentionRecorder: after a Step, the last
// decoder layer's cross-attention over the regions, averaged over heads
// and over the N encoder levels (the meshed gates weigh the levels per
// channel, so no single weighting of the levels is exact), [Rows() × R].
// Masked regions get weight 0.
func (s *m2CPUDecoding) Attention(dst []float32) error {
	if len(dst) < s.rows*s.regions {
		return fmt.Errorf("%w: attention buffer of %d for %d×%d", decode.ErrShape, len(dst), s.rows, s.regions)
	}
	copy(dst, s.attn[:s.rows*s.regions])
	return nil
}

// ensure sizes every buffer for rows rows and positions positions,
// preserving the cache.
func (s *m2CPUDecoding) ensure(rows, positions int) {
	if rows <= s.rowCap && positions <= s.posCap {
		return
	}
	c := s.m.Config
	hk, hv := c.Heads*c.DK, c.Heads*c.DV
	rc, pc := max(rows, s.rowCap), max(positions, s.posCap)
	relayout := func(old [][]float32, w int) [][]float32 {
		out := make([][]float32, len(s.m.Decoder.Layers))
		for l := range out {
			out[l] = make([]float32, pc*rc*w)
			if old != nil {
				for p := range s.t {
					copy(out[l][p*rc*w:p*rc*w+s.rowCap*w], old[l][p*s.rowCap*w:(p+1)*s.rowCap*w])
				}
			}
		}
		return out
	}
	s.selfK, s.selfV = relayout(s.selfK, hk), relayout(s.selfV, hv)
	padKey := make([]bool, pc*rc)
	for p := range s.t {
		copy(padKey[p*rc:p*rc+s.rowCap], s.padKey[p*s.rowCap:(p+1)*s.rowCap])
	}
	s.padKey = padKey
	anc := make([]int32, rc*pc)
	for r := range s.rows {
		copy(anc[r*pc:r*pc+s.t], s.anc[r*s.posCap:r*s.posCap+s.t])
	}
	s.anc, s.ancNext = anc, make([]int32, rc*pc)
	grow := func(buf []float32, n int) []float32 {
		if len(buf) >= n {
			return buf
		}
		return make([]float32, n)
	}
	d, n := c.DModel, s.levels
	w := max(d, hk, hv)
	for _, p := range []*[]float32{&s.x, &s.s, &s.q, &s.ctx, &s.tmp, &s.gate, &s.acc} {
		*p = grow(*p, rc*w)
	}
	s.cat = grow(s.cat, rc*2*d)
	s.cs = grow(s.cs, n*rc*hv)
	s.es = grow(s.es, n*rc*d)
	s.ff = grow(s.ff, rc*c.DFF)
	s.pad = grow(s.pad, rc)
	s.inv = grow(s.inv, n*rc)
	s.scores = grow(s.scores, max(pc, s.regions))
	s.logits = grow(s.logits, rc*c.Vocab)
	s.attn = grow(s.attn, rc*s.regions)
	if cap(s.rowTmp) < rc {
		s.rowTmp = make([]int32, rc)
	}
	if cap(s.slots) < pc {
		s.slots = make([]int32, pc)
	}
	s.rowCap, s.posCap = rc, pc
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *m2CPUDecoding) Reorder(src []int) error {
	if len(src) == 0 {
		return fmt.Errorf("%w: reorder to zero rows", decode.ErrShape)
	}
	for _, r := range src {
		if r < 0 || r >= s.rows {
			return fmt.Errorf("%w: reorder index %d of %d rows", decode.ErrShape, r, s.rows)
		}
	}
	s.ensure(len(src), s.t+1)
	pc := s.posCap
	study := s.rowTmp[:len(src)]
	for i, r := range src {
		copy(s.ancNext[i*pc:i*pc+s.t], s.anc[r*pc:r*pc+s.t])
		study[i] = s.study[r]
	}
	s.anc, s.ancNext = s.ancNext, s.anc
	if cap(s.study) < len(src) {
		s.study = make([]int32, len(src), s.rowCap)
	}
	s.study = s.study[:len(src)]
	copy(s.study, study)
	s.rows = len(src)
	return nil
}

// Step implements decode.Model: it consumes one token per row and writes
// the next token's log-probabilities.
func (s *m2CPUDecoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := s.m.Config
	R, d, V := s.rows, c.DModel, c.Vocab
	if len(tokens) != R || len(dst) < R*V {
		return fmt.Errorf("%w: %d tokens and %d outputs for %d rows", decode.ErrShape, len(tokens), len(dst), R)
	}
	for _, tok := range tokens {
		if tok < 0 || tok >= V {
			return fmt.Errorf("%w: token %d outside [0, %d)", decode.ErrToken, tok, V)
		}
	}
	if s.t >= s.m.Decoder.MaxLen() {
		return fmt.Errorf("memtrans: M² step %d beyond the positional table (%d positions)", s.t+1, s.m.Decoder.MaxLen())
	}
	s.ensure(R, s.t+1)
	// Y = word_emb(w) + pos_emb(t+1): no √D scaling; M²'s running_seq
	// gives step t position t+1 whatever the token.
	words, pe := s.words, s.pos[(s.t+1)*d:(s.t+2)*d]
	x := s.x[:R*d]
	pad := s.pad[:R]
	for r, tok := range tokens {
		row := x[r*d : (r+1)*d]
		for i, e := range words[tok*d : (tok+1)*d] {
			row[i] = e + pe[i]
		}
		pad[r] = 1
		if tok == c.Pad {
			pad[r] = 0
		}
		s.padKey[s.t*s.rowCap+r] = tok == c.Pad
		s.anc[r*s.posCap+s.t] = int32(r)
	}
	for l := range s.layers {
		s.layerStep(l, &s.layers[l], x)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	logits := s.logits[:R*V]
	s.out.apply(logits, x, R)
	kernels.LogSoftmax(dst[:R*V], logits, V)
	s.t++
	return nil
}

// addNorm writes LayerNorm(x + y) ⊙ pad for rows rows of width D into dst
// (dst may be y): the AddNorm of Eqs. 5 and 9 followed by mask_pad.
func (s *m2CPUDecoding) addNorm(dst, x, y []float32, rows int, ln m2Norm, pad []float32) {
	d := s.m.Config.DModel
	for i := range dst[:rows*d] {
		dst[i] = x[i] + y[i]
	}
	kernels.Normalize(dst[:rows*d], s.inv[:rows], dst[:rows*d], d, ln.eps, kernels.NormStandard)
	w, b := ln.w, ln.b
	for r := range rows {
		row := dst[r*d : (r+1)*d]
		p := pad[r%len(pad)]
		for i := range row {
			row[i] = (row[i]*w[i] + b[i]) * p
		}
	}
}

// m2Attend computes softmax(q·Kᵀ/√d_k)·V for one head into out (d_v
// wide). Key j is row slot(j) of keys and vals (row widths kw and vw; the
// head's slice starts at ko and vo), where slot(j) is slots[j], or j when
// slots is nil; it is skipped where masked[slot(j)] is true (masked may be
// nil). With every key masked the result is NaN, as torch's −∞ fill gives.
//
// If rec is not nil, w times the attention weights are added to rec[:n].
func m2Attend(out, q []float32, n int, keys []float32, kw, ko int, vals []float32, vw, vo int,
	slots []int32, masked []bool, scale float32, sc []float32, rec []float32, w float32) {
	dk, dv := len(q), len(out)
	sc = sc[:n]
	mx := float32(math.Inf(-1))
	for j := range n {
		slot := j
		if slots != nil {
			slot = int(slots[j])
		}
		if masked != nil && masked[slot] {
			sc[j] = float32(math.Inf(-1))
			continue
		}
		sc[j] = dot(q, keys[slot*kw+ko:slot*kw+ko+dk]) * scale
		mx = max(mx, sc[j])
	}
	if math.IsInf(float64(mx), -1) {
		nan := float32(math.NaN())
		for i := range out {
			out[i] = nan
		}
		if rec != nil {
			axpy(rec[:n], sc, w) // no distribution: the recorded weights are −∞
		}
		return
	}
	softmaxInPlace(sc)
	if rec != nil {
		axpy(rec[:n], sc, w)
	}
	for j := range n {
		if sc[j] == 0 {
			continue
		}
		slot := j
		if slots != nil {
			slot = int(slots[j])
		}
		axpy(out, vals[slot*vw+vo:slot*vw+vo+dv], sc[j])
	}
}

// layerStep runs meshed decoder layer l (Cornia et al. 2020, Eq. 9) on x
// (R rows) in place.
func (s *m2CPUDecoding) layerStep(l int, layer *m2Layer, x []float32) {
	c := s.m.Config
	R, d, h, dk, dv := s.rows, c.DModel, c.Heads, c.DK, c.DV
	hk, hv := h*dk, h*dv
	scale := float32(1 / math.Sqrt(float64(dk)))
	pad := s.pad[:R]
	t, rc, pc := s.t, s.rowCap, s.posCap

	// Masked self-attention over the row's prefix: S = AddNorm(S_mask(Y)) ⊙ pad.
	q := s.q[:R*hk]
	layer.selfQ.apply(q, x, R)
	layer.selfK.apply(s.selfK[l][t*rc*hk:(t*rc+R)*hk], x, R)
	layer.selfV.apply(s.selfV[l][t*rc*hv:(t*rc+R)*hv], x, R)
	ctx := s.ctx[:R*hv]
	clear(ctx)
	keys, vals := s.selfK[l], s.selfV[l]
	slots := s.slots[:t+1]
	for r := range R {
		// Slab slot of each position: position j of row r is slot
		// j·rowCap + anc[j].
		for j, a := range s.anc[r*pc : r*pc+t+1] {
			slots[j] = int32(j*rc) + a
		}
		for hd := range h {
			m2Attend(ctx[r*hv+hd*dv:r*hv+hd*dv+dv], q[r*hk+hd*dk:r*hk+hd*dk+dk], t+1,
				keys, hk, hd*dk, vals, hv, hd*dv, slots, s.padKey, scale, s.scores, nil, 0)
		}
	}
	tmp := s.tmp[:R*d]
	layer.selfO.apply(tmp, ctx, R)
	sOut := s.s[:R*d]
	s.addNorm(sOut, x, tmp, R, layer.selfNorm, pad)

	// One shared cross-attention over every encoder level:
	// C_i = AddNorm(C(X̃ⁱ, S)) ⊙ pad (Eq. 7); the query is the same for all.
	layer.encQ.apply(q, sOut, R)
	N, nr := s.levels, s.regions
	cs := s.cs[:N*R*hv]
	clear(cs)
	ck, cv := s.crossK[l], s.crossV[l]
	var rec []float32
	recW := 1 / float32(N*h)
	if l == len(s.layers)-1 {
		rec = s.attn[:R*nr]
		clear(rec)
	}
	for i := range N {
		for r := range R {
			st := int(s.study[r])
			base := (st*N + i) * nr
			mask := s.encMask[st*nr : (st+1)*nr]
			var rr []float32
			if rec != nil {
				rr = rec[r*nr : (r+1)*nr]
			}
			for hd := range h {
				m2Attend(cs[(i*R+r)*hv+hd*dv:(i*R+r)*hv+hd*dv+dv], q[r*hk+hd*dk:r*hk+hd*dk+dk], nr,
					ck[base*hk:], hk, hd*dk, cv[base*hv:], hv, hd*dv, nil, mask, scale, s.scores, rr, recW)
			}
		}
	}
	es := s.es[:N*R*d]
	layer.encO.apply(es, cs, N*R)
	for i := range N {
		e := es[i*R*d : (i+1)*R*d]
		s.addNorm(e, sOut, e, R, layer.encNorm, pad)
	}

	// Meshed cross-attention, Eqs. 6 and 8:
	// M = Σ_i σ(W_i [S; C_i] + b_i) ⊙ C_i / √N, then ⊙ pad.
	acc, gate, cat := s.acc[:R*d], s.gate[:R*d], s.cat[:R*2*d]
	clear(acc)
	for i := range N {
		e := es[i*R*d : (i+1)*R*d]
		for r := range R {
			copy(cat[r*2*d:r*2*d+d], sOut[r*d:(r+1)*d])
			copy(cat[r*2*d+d:(r+1)*2*d], e[r*d:(r+1)*d])
		}
		layer.alpha[i].apply(gate, cat, R)
		for j, g := range gate {
			acc[j] += e[j] * sigmoid(g)
		}
	}
	inv := float32(math.Sqrt(float64(N)))
	for r := range R {
		for j := range d {
			acc[r*d+j] = acc[r*d+j] / inv * pad[r]
		}
	}

	// Ỹ = AddNorm(F(M)) ⊙ pad (Eqs. 4, 9).
	ff := s.ff[:R*layer.ff1.out]
	layer.ff1.apply(ff, acc, R)
	relu(ff)
	layer.ff2.apply(tmp, ff, R)
	s.addNorm(x, acc, tmp, R, layer.ffNorm, pad)
}
