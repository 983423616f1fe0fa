package memtrans

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/half"
	"github.com/radgen/radgen/internal/kernels"
)

// Decoding is the incremental decoding state of a batch of studies: it
// implements decode.Model, so any strategy of package decode can drive it.
//
// Unlike the published R2Gen, which re-runs the decoder and the relational
// memory over the whole prefix at every step (O(T²)), a Decoding keeps
//   - the self-attention keys and values of every layer, written once per
//     position and addressed through a per-row ancestry table, so Reorder
//     moves indices, never cached vectors;
//   - the relational memory of every row;
//   - the cross-attention keys and values of each study, computed once and
//     shared by all of its rows (beams or samples), never copied; with
//     multi-view routing each layer's come from its own source
//     LN(g_i(S) + S_N), which is per study too;
//   - with Mem2Mem, each row's memory (started from its study's bank) and
//     each study's encoder states and context keys, so a step costs the
//     same at every position.
//
// A step at small batch sizes costs what reading its weight matrices from
// memory costs, so it reads each matrix once per step for all rows, batches
// the products that do not depend on each other (the MCLN MLPs of all
// layers, which depend on the memory only, run together right after the
// memory update), and shares out the output columns of every batch among
// the cores (see internal/half). The matrices are the Transformer's float32
// weights or a half-precision snapshot of them ([WithHalfWeights],
// [Transformer.StartDecodingWith]). After the first steps have sized the
// buffers, Step and Reorder allocate nothing.
//
// A Decoding belongs to one goroutine; the Transformer it came from may
// serve many Decodings concurrently.
type cpuDecoding struct {
	m       *r2genModel
	w       *stepWeights // the step's linear layers
	run     half.Runner
	studies int
	rows    int
	t       int     // positions consumed so far
	study   []int32 // row → study

	// anc[r·cap + j] is the slab row that holds position j of row r.
	anc, ancNext []int32
	posCap       int

	selfK, selfV [][]float32 // per layer: [posCap][rowCap][D]
	rowCap       int
	crossK       [][]float32 // per layer: [studies][np][D]
	crossVT      [][]float32 // per layer: [studies][D][np], the values transposed
	n, np        int         // patches per study, and n rounded up to a multiple of 8 (zero padding)

	memory, memNext []float32 // [rows][S·D]

	// Mem2Mem: each study's encoder states H (B, N, D) and context keys
	// W_k H (B, N, d_a), computed once and read by every row of the study.
	m2mH, m2mKeys *radgen.Tensor
	studyIdx      []int

	// scratch, sized for rowCap rows
	x, h, q, ctx, ff []float32
	inv              []float32
	// MCLN: the hidden layers and the outputs of the γ and β MLPs of every
	// conditional norm, [layer][norm][γ, β][rows][D].
	condHid, condOut []float32
	scores           []float32 // [rows][max(posCap, N, S+1)]
	logits           []float32
	attn             []float32 // last layer's cross-attention, averaged over heads [rows][N]
	// relational memory: [M; y] and its keys and values, [rows][S+1][D]
	// each; queries, attention context, tanh(M), MLP hidden layer,
	// [rows][S][D] each; gates [rows][S][2D] and W·y [rows][2D].
	rmKV, rmQ, rmCtx, rmTanh, rmHid, gates, wy []float32
	rowTmp                                     []int32
}

var (
	_ decode.Model             = (*cpuDecoding)(nil)
	_ decode.AttentionRecorder = (*cpuDecoding)(nil)
)

// startCPUDecoding encodes visual features (B, N, d_vf) and returns a decoding
// state with one row per study, ready for a decode strategy. Its steps read
// the Transformer's float32 weights; see startDecodingWith for a
// half-precision snapshot.
func (m *r2genModel) startCPUDecoding(feats *radgen.Tensor) (*cpuDecoding, error) {
	return m.startDecoding(feats, nil)
}

// startDecoding starts a decoding whose steps read w, or m's float32
// weights if w is nil.
func (m *r2genModel) startDecoding(feats *radgen.Tensor, w *stepWeights) (*cpuDecoding, error) {
	c := m.Config
	if feats.Rank() != 3 || feats.Dim(2) != c.DVisual || feats.Dim(0) == 0 || feats.Dim(1) == 0 {
		return nil, fmt.Errorf("memtrans: visual features %v, want (B, N, %d)", feats.Shape(), c.DVisual)
	}
	if feats.Is64() {
		feats = feats.To32()
	}
	if w == nil {
		w = newStepWeights(m, float32Linear, float32Linear)
	}
	g := radgen.NoGrad()
	enc := m.encode(g, feats)
	b, n := feats.Dim(0), feats.Dim(1)
	d := c.DModel
	np := (n + 7) &^ 7
	s := &cpuDecoding{m: m, w: w, studies: b, rows: b, n: n, np: np}
	for i, l := range m.Decoder.Layers {
		// K and V of the source attention, once per study (B, N, D), from
		// the layer's source: the encoder output, or its multi-view
		// LN(g_i(S) + S_N), which is per study too, so the per-step cost
		// does not change. They are kept as K (B, np, D) and Vᵀ (B, D, np),
		// zero-padded to np patches, so that both products of the
		// attention read whole blocks of eight.
		src := enc.Sources[i]
		k := l.SrcAttn.Linears[1].Forward(g, src).Data()
		v := l.SrcAttn.Linears[2].Forward(g, src).Data()
		kp, vt := make([]float32, b*np*d), make([]float32, b*np*d)
		for st := 0; st < b; st++ {
			copy(kp[st*np*d:], k[st*n*d:(st+1)*n*d])
			vs, ts := v[st*n*d:(st+1)*n*d], vt[st*np*d:(st+1)*np*d]
			for j := 0; j < n; j++ {
				for i, e := range vs[j*d : (j+1)*d] {
					ts[i*np+j] = e
				}
			}
		}
		s.crossK = append(s.crossK, kp)
		s.crossVT = append(s.crossVT, vt)
	}
	s.study = make([]int32, b)
	for i := range s.study {
		s.study[i] = int32(i)
	}
	s.ensure(b, c.MaxSeqLen+1)
	switch {
	case m.Memory != nil:
		copy(s.memory, m.Memory.InitMemory(b).Data())
	case m.Mem2Mem != nil:
		copy(s.memory, enc.Bank.Data()) // M_0^(d) = M^(e) (Mem2Mem §3.2)
		s.m2mH, s.m2mKeys = enc.Out, m.Mem2Mem.ContextKeys(g, enc.Out)
	}
	return s, nil
}

// VocabSize implements decode.Model.
func (s *cpuDecoding) VocabSize() int { return s.m.Config.Vocab }

// Rows implements decode.Model.
func (s *cpuDecoding) Rows() int { return s.rows }

// position returns how many tokens each row has consumed.
func (s *cpuDecoding) position() int { return s.t }

// AttentionWidth implements decode.AttentionRecorder: the number of image
// patches of a study.
func (s *cpuDecoding) AttentionWidth() int { return s.n }

// Attention implements decode.AttentionRecorder: after a Step, the
// last decoder layer's cross-attention over the patches, averaged over
// heads, [Rows() × N].
func (s *cpuDecoding) Attention(dst []float32) error {
	if len(dst) < s.rows*s.n {
		return fmt.Errorf("%w: attention buffer of %d for %d×%d", decode.ErrShape, len(dst), s.rows, s.n)
	}
	copy(dst, s.attn[:s.rows*s.n])
	return nil
}

// ensure sizes every buffer for rows rows and positions positions,
// preserving contents.
func (s *cpuDecoding) ensure(rows, positions int) {
	c := s.m.Config
	d := c.DModel
	S := c.MemorySlots
	sd := S * d
	if rows <= s.rowCap && positions <= s.posCap {
		return
	}
	newRowCap, newPosCap := max(rows, s.rowCap), max(positions, s.posCap)
	// Slabs: [pos][rowCap][D]; re-lay out existing positions.
	relayout := func(old [][]float32) [][]float32 {
		out := make([][]float32, len(s.m.Decoder.Layers))
		for l := range out {
			out[l] = make([]float32, newPosCap*newRowCap*d)
			if old != nil {
				for p := 0; p < s.t; p++ {
					copy(out[l][p*newRowCap*d:p*newRowCap*d+s.rowCap*d], old[l][p*s.rowCap*d:(p+1)*s.rowCap*d])
				}
			}
		}
		return out
	}
	s.selfK, s.selfV = relayout(s.selfK), relayout(s.selfV)
	anc := make([]int32, newRowCap*newPosCap)
	for r := 0; r < s.rows; r++ {
		copy(anc[r*newPosCap:r*newPosCap+s.t], s.anc[r*s.posCap:r*s.posCap+s.t])
	}
	s.anc, s.ancNext = anc, make([]int32, newRowCap*newPosCap)
	grow := func(buf []float32, n int) []float32 {
		if len(buf) >= n {
			return buf
		}
		out := make([]float32, n)
		copy(out, buf)
		return out
	}
	R := newRowCap
	s.memory = grow(s.memory, R*sd)
	s.memNext = grow(s.memNext, R*sd)
	for _, p := range []*[]float32{&s.x, &s.h, &s.q, &s.ctx} {
		*p = grow(*p, R*d)
	}
	s.ff = grow(s.ff, R*max(c.DFF, d+sd))
	s.inv = grow(s.inv, R*max(S, 1))
	conds := 2 * 3 * len(s.m.Decoder.Layers) * R * d
	s.condHid = grow(s.condHid, conds)
	s.condOut = grow(s.condOut, conds)
	s.scores = grow(s.scores, R*max(newPosCap, s.np, S+1))
	s.logits = grow(s.logits, R*c.Vocab)
	s.attn = grow(s.attn, R*s.n)
	s.rmKV = grow(s.rmKV, 3*R*(S+1)*d)
	for _, p := range []*[]float32{&s.rmQ, &s.rmCtx, &s.rmTanh, &s.rmHid} {
		*p = grow(*p, R*sd)
	}
	s.gates = grow(s.gates, R*S*2*d)
	s.wy = grow(s.wy, R*2*d)
	if cap(s.rowTmp) < R {
		s.rowTmp = make([]int32, R)
	}
	s.rowCap, s.posCap = newRowCap, newPosCap
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *cpuDecoding) Reorder(src []int) error {
	for _, r := range src {
		if r < 0 || r >= s.rows {
			return fmt.Errorf("%w: reorder index %d of %d rows", decode.ErrShape, r, s.rows)
		}
	}
	if len(src) == 0 {
		return fmt.Errorf("%w: reorder to zero rows", decode.ErrShape)
	}
	s.ensure(len(src), s.t+1)
	sd := s.m.Config.MemorySlots * s.m.Config.DModel
	pc := s.posCap
	study := s.rowTmp[:len(src)]
	for i, r := range src {
		copy(s.ancNext[i*pc:i*pc+s.t], s.anc[r*pc:r*pc+s.t])
		if s.m.hasMemory() {
			copy(s.memNext[i*sd:(i+1)*sd], s.memory[r*sd:(r+1)*sd])
		}
		study[i] = s.study[r]
	}
	s.anc, s.ancNext = s.ancNext, s.anc
	s.memory, s.memNext = s.memNext, s.memory
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
func (s *cpuDecoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	c := s.m.Config
	R, d, V := s.rows, c.DModel, c.Vocab
	if err := checkStep(ctx, tokens, dst, R, V, s.t, c.PositionLen); err != nil {
		return err
	}
	s.ensure(R, s.t+1)
	t := s.t
	// Embedding: lut(y)·√D + PE(t).
	table, pe := s.m.Embed.Table.Data(), s.m.Embed.Position.Data()[t*d:(t+1)*d]
	scale := float32(math.Sqrt(float64(d)))
	x := s.x[:R*d]
	for r, tok := range tokens {
		row := x[r*d : (r+1)*d]
		for i, e := range table[tok*d : (tok+1)*d] {
			row[i] = e*scale + pe[i]
		}
	}
	switch {
	case s.m.Memory != nil:
		s.memoryStep(x)
	case s.m.Mem2Mem != nil:
		s.mem2memStep(x)
	}
	s.condDeltas()
	for l := range s.m.Decoder.Layers {
		s.layerStep(l, x)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	// Final LayerNorm, logit, log-softmax.
	s.plainNorm(s.h[:R*d], x, s.m.Decoder.Norm.Gamma.Data(), s.m.Decoder.Norm.Beta.Data(), R)
	in := s.h[:R*d]
	if c.Variant == VariantBaseRM {
		sd := c.MemorySlots * d
		w := d + sd
		cat := s.ff[:R*w]
		for r := 0; r < R; r++ {
			copy(cat[r*w:r*w+d], in[r*d:(r+1)*d])
			copy(cat[r*w+d:(r+1)*w], s.memory[r*sd:(r+1)*sd])
		}
		in = cat
	}
	logits := s.logits[:R*V]
	s.run.Add(s.w.logit.op(R, in, logits, false, false))
	s.run.Run()
	kernels.LogSoftmax(dst[:R*V], logits, V)
	s.t++
	return nil
}

// plainNorm applies R2Gen's LayerNorm with shared γ, β to R rows.
func (s *cpuDecoding) plainNorm(dst, x, gamma, beta []float32, R int) {
	d := len(gamma)
	kernels.Normalize(dst[:R*d], s.inv[:R], x[:R*d], d, 1e-6, kernels.NormR2Gen)
	for r := 0; r < R; r++ {
		row := dst[r*d : (r+1)*d]
		for i := range row {
			row[i] = row[i]*gamma[i] + beta[i]
		}
	}
}

// condDeltas computes the MCLN MLP outputs f_mlp(M_t) of every conditional
// norm of the decoder (R2Gen Eqs. 11–14) into condOut. They depend on the
// memory only, so all 2·3·layers input layers run as one batch, and then
// all output layers: two passes over the MLP weights, each shared out among
// the cores, rather than eighteen small ones between the sublayers.
func (s *cpuDecoding) condDeltas() {
	R, d := s.rows, s.m.Config.DModel
	conds := false
	for pass := 0; pass < 2; pass++ {
		for l := range s.w.layers {
			for i := range 3 {
				n := &s.w.layers[l].norms[i]
				if n.g0.w.N == 0 {
					continue // a plain LayerNorm
				}
				conds = true
				for k, mlp := range [2][2]*stepLinear{{&n.g0, &n.g2}, {&n.b0, &n.b2}} {
					o := ((l*3+i)*2 + k) * R * d
					hid, out := s.condHid[o:o+R*d], s.condOut[o:o+R*d]
					if pass == 0 {
						s.run.Add(mlp[0].op(R, s.memory, hid, true, false))
					} else {
						s.run.Add(mlp[1].op(R, hid, out, false, false))
					}
				}
			}
		}
		if !conds {
			return
		}
		s.run.Run()
	}
}

// condNorm applies sublayer norm i of decoder layer l: MCLN with
// γ̂ = γ + f_mlp(M_t), β̂ = β + f_mlp(M_t) (R2Gen Eqs. 11–15; the MLP
// outputs come from condDeltas), or the plain norm of the BASE variants.
func (s *cpuDecoding) condNorm(dst, x []float32, l, i int) {
	R, d := s.rows, s.m.Config.DModel
	n := s.m.Decoder.Layers[l].norms[i]
	if n.cond == nil {
		s.plainNorm(dst, x, n.plain.Gamma.Data(), n.plain.Beta.Data(), R)
		return
	}
	o := (l*3 + i) * 2 * R * d
	dg, db := s.condOut[o:o+R*d], s.condOut[o+R*d:o+2*R*d]
	gamma, beta := n.cond.Gamma.Data()[:d], n.cond.Beta.Data()[:d]
	kernels.Normalize(dst[:R*d], s.inv[:R], x[:R*d], d, n.cond.Eps, kernels.NormR2Gen)
	for r := 0; r < R; r++ {
		row, g, b := dst[r*d:(r+1)*d], dg[r*d:(r+1)*d], db[r*d:(r+1)*d]
		for j := range row {
			row[j] = row[j]*(g[j]+gamma[j]) + (b[j] + beta[j])
		}
	}
}

// layerStep runs decoder layer l on x (R rows) in place.
func (s *cpuDecoding) layerStep(l int, x []float32) {
	R, d := s.rows, s.m.Config.DModel
	lw := &s.w.layers[l]
	h := s.h[:R*d]
	heads := s.m.Decoder.Layers[l].SelfAttn.Heads
	dk := d / heads
	scale := float32(1 / math.Sqrt(float64(dk)))
	t := s.t
	rc, pc := s.rowCap, s.posCap

	// Self-attention over the cached prefix.
	s.condNorm(h, x, l, 0)
	q := s.q[:R*d]
	slabK := s.selfK[l][t*rc*d : (t*rc+R)*d]
	slabV := s.selfV[l][t*rc*d : (t*rc+R)*d]
	s.run.Add(lw.self[0].op(R, h, q, false, false))
	s.run.Add(lw.self[1].op(R, h, slabK, false, false))
	s.run.Add(lw.self[2].op(R, h, slabV, false, false))
	s.run.Run()
	ctx := s.ctx[:R*d]
	clear(ctx)
	for r := 0; r < R; r++ {
		s.anc[r*pc+t] = int32(r)
		anc := s.anc[r*pc : r*pc+t+1]
		for hd := 0; hd < heads; hd++ {
			qh := q[r*d+hd*dk : r*d+hd*dk+dk]
			sc := s.scores[:t+1]
			for j, a := range anc {
				kv := s.selfK[l][(j*rc+int(a))*d+hd*dk:]
				sc[j] = dot8(qh, kv[:dk]) * scale
			}
			softmaxFast(sc)
			out := ctx[r*d+hd*dk : r*d+hd*dk+dk]
			for j, a := range anc {
				axpy8(out, s.selfV[l][(j*rc+int(a))*d+hd*dk:][:dk], sc[j])
			}
		}
	}
	s.run.Add(lw.self[3].op(R, ctx, x, false, true)) // x += SelfAttn
	s.run.Run()

	// Cross-attention over the study's patches (keys/values shared by rows).
	s.condNorm(h, x, l, 1)
	s.run.Add(lw.srcQ.op(R, h, q, false, false))
	s.run.Run()
	s.crossAttention(l, q, ctx, heads, scale)
	s.run.Add(lw.srcO.op(R, ctx, x, false, true)) // x += SrcAttn
	s.run.Run()

	// Feed-forward.
	s.condNorm(h, x, l, 2)
	dff := lw.ff1.w.N
	ff := s.ff[:R*dff]
	s.run.Add(lw.ff1.op(R, h, ff, true, false))
	s.run.Run()
	s.run.Add(lw.ff2.op(R, ff, x, false, true)) // x += FFN
	s.run.Run()
}

// crossAttention writes into ctx (R rows) the attention of the queries q
// over the patches of each row's study in layer l, and, for the last
// layer, the head-averaged weights into attn. The rows of one study (its
// beams or samples, consecutive after any reorder of package decode) share
// each product: scores = q_h·K_hᵀ and ctx_h = softmax(scores)·V_h, per head
// h, with the study's K (np×D) and Vᵀ (D×np) read in place; the padding
// patches score 0 and get weight 0.
func (s *cpuDecoding) crossAttention(l int, q, ctx []float32, heads int, scale float32) {
	R, d, n, np := s.rows, s.m.Config.DModel, s.n, s.np
	dk := d / heads
	last := l == len(s.m.Decoder.Layers)-1
	if last {
		clear(s.attn[:R*n])
	}
	for r0 := 0; r0 < R; {
		st := int(s.study[r0])
		r1 := r0 + 1
		for r1 < R && int(s.study[r1]) == st {
			r1++
		}
		rows := r1 - r0
		keys := s.crossK[l][st*np*d : (st+1)*np*d]
		valsT := s.crossVT[l][st*np*d : (st+1)*np*d]
		sc := s.scores[:rows*np]
		for hd := 0; hd < heads; hd++ {
			half.Mul(half.Op{M: rows, X: q[r0*d+hd*dk:], LDX: d,
				W: half.Weights{N: np, K: dk, LD: d, F32: keys[hd*dk:]}, Y: sc})
			for i := 0; i < rows; i++ {
				row := sc[i*np : i*np+n]
				for j := range row {
					row[j] *= scale
				}
				softmaxFast(row)
				clear(sc[i*np+n : (i+1)*np])
				if last {
					axpy(s.attn[(r0+i)*n:(r0+i+1)*n], row, 1/float32(heads))
				}
			}
			half.Mul(half.Op{M: rows, X: sc, W: half.Weights{N: dk, K: np, LD: np, F32: valsT[hd*dk*np:]},
				Y: ctx[r0*d+hd*dk:], LDY: d})
		}
		r0 = r1
	}
}

// memoryStep advances every row's relational memory by one input
// (R2Gen Eqs. 6–10; see relmem.Relational.Step).
func (s *cpuDecoding) memoryStep(y []float32) {
	rm, mw := s.m.Memory, s.w.memory
	R, d, S := s.rows, s.m.Config.DModel, rm.Slots
	heads := rm.Attn.Heads
	dk := d / heads
	scale := float32(1 / math.Sqrt(float64(dk)))
	sd := S * d
	// kv rows: [M; y] per row, (R·(S+1), D)
	kvIn := s.rmKV[:R*(S+1)*d]
	for r := 0; r < R; r++ {
		copy(kvIn[r*(S+1)*d:], s.memory[r*sd:(r+1)*sd])
		copy(kvIn[(r*(S+1)+S)*d:], y[r*d:(r+1)*d])
	}
	th := s.rmTanh[:R*sd]
	for i, v := range s.memory[:R*sd] {
		th[i] = tanhFast(v)
	}
	// Everything that reads M_{t−1} and y only, in one batch: the queries,
	// keys and values, and the two terms of the gates, W·y and U·tanh(M).
	keys := s.rmKV[R*(S+1)*d : 2*R*(S+1)*d]
	vals := s.rmKV[2*R*(S+1)*d : 3*R*(S+1)*d]
	q := s.rmQ[:R*sd]
	gates := s.gates[:R*S*2*d]
	wy := s.wy[:R*2*d]
	s.run.Add(mw.q.op(R*S, s.memory, q, false, false))
	s.run.Add(mw.k.op(R*(S+1), kvIn, keys, false, false))
	s.run.Add(mw.v.op(R*(S+1), kvIn, vals, false, false))
	s.run.Add(mw.u.op(R*S, th, gates, false, false))
	s.run.Add(mw.w.op(R, y, wy, false, false))
	s.run.Run()
	ctx := s.rmCtx[:R*sd]
	clear(ctx)
	for r := 0; r < R; r++ {
		for i := 0; i < S; i++ {
			for hd := 0; hd < heads; hd++ {
				qh := q[(r*S+i)*d+hd*dk:][:dk]
				sc := s.scores[:S+1]
				for j := 0; j <= S; j++ {
					sc[j] = dot8(qh, keys[(r*(S+1)+j)*d+hd*dk:][:dk]) * scale
				}
				softmaxFast(sc)
				out := ctx[(r*S+i)*d+hd*dk:][:dk]
				for j := 0; j <= S; j++ {
					axpy8(out, vals[(r*(S+1)+j)*d+hd*dk:][:dk], sc[j])
				}
			}
		}
	}
	// next = M + Attn
	next := s.memNext[:R*sd]
	copy(next, s.memory[:R*sd])
	s.run.Add(mw.o.op(R*S, ctx, next, false, true))
	s.run.Run()
	// next += ReLU(mlp.2(ReLU(mlp.0(next))))
	hid := s.rmHid[:R*sd]
	s.run.Add(mw.mlp0.op(R*S, next, hid, true, false))
	s.run.Run()
	s.run.Add(mw.mlp2.op(R*S, hid, next, true, true))
	s.run.Run()
	// gates = W·y + U·tanh(M): (R, S, 2D)
	for r := 0; r < R; r++ {
		for i := 0; i < S; i++ {
			g := gates[(r*S+i)*2*d : (r*S+i+1)*2*d]
			addTo(g, wy[r*2*d:(r+1)*2*d])
		}
	}
	// M_t = σ(G_i)·tanh(next) + σ(G_f)·M_{t−1}
	for r := 0; r < R; r++ {
		for i := 0; i < S; i++ {
			g := gates[(r*S+i)*2*d : (r*S+i+1)*2*d]
			nx := next[(r*S+i)*d : (r*S+i+1)*d]
			mo := s.memory[(r*S+i)*d : (r*S+i+1)*d]
			for j := 0; j < d; j++ {
				ig := sigmoidFast(g[j])
				fg := sigmoidFast(g[d+j])
				nx[j] = ig*tanhFast(nx[j]) + fg*mo[j]
			}
		}
	}
	s.memory, s.memNext = s.memNext, s.memory
}

// mem2memStep writes every row's token into its Mem2Mem memory, reads it,
// and replaces the rows' decoder input x by W_m[x; m] (Mem2Mem Eqs. 13–20;
// see relmem.Mem2Mem.Forward). Its cost per step is that of r slots and the
// study's N encoder states, independent of the position.
func (s *cpuDecoding) mem2memStep(x []float32) {
	mm := s.m.Mem2Mem
	R, d, S := s.rows, s.m.Config.DModel, mm.Slots
	g := radgen.NoGrad()
	s.studyIdx = s.studyIdx[:0]
	for _, st := range s.study[:R] {
		s.studyIdx = append(s.studyIdx, int(st))
	}
	xt := radgen.FromFloat32(x[:R*d], R, d)
	h := g.IndexSelect(s.m2mH, 0, s.studyIdx)
	keys := g.IndexSelect(s.m2mKeys, 0, s.studyIdx)
	c := g.Reshape(mm.Context(g, g.Reshape(xt, R, 1, d), keys, h), R, d)     // Eq. 17
	mem := mm.Write(g, radgen.FromFloat32(s.memory[:R*S*d], R, S, d), xt, c) // Eqs. 18–20
	in := mm.Augment(g, xt, mm.Read(g, mem, xt))                             // Eqs. 13–15
	copy(s.memory[:R*S*d], mem.Data())
	copy(x[:R*d], in.Data())
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// The step's elementwise functions: exp through a 32-entry table of 2^(j/32)
// and a degree-5 polynomial, in float64, to a relative error below 10⁻¹⁴,
// so that the float32 results are those of math.Exp (the step computes tens
// of thousands of exponentials: softmaxes, sigmoid gates).
var exp2Table = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return t
}()

// fastExp returns e^x for −708 ≤ x ≤ 709 (normal float64 results), and 0
// or +Inf beyond.
func fastExp(x float64) float64 {
	const (
		invLn2x32 = 32 / math.Ln2
		ln2Hi     = 0x1.62e42fee00000p-6  // ln2/32 split in two, the high part with
		ln2Lo     = 0x1.a39ef35793c76p-38 // trailing zeros so that k·ln2Hi is exact
		shifter   = 0x1.8p52
	)
	switch {
	case x < -708:
		return 0
	case x > 709:
		return math.Inf(1)
	case x != x:
		return x
	}
	t := x*invLn2x32 + shifter // round to nearest, in the low bits of t
	k := t - shifter
	r := (x - k*ln2Hi) - k*ln2Lo // |r| ≤ ln2/64
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120)))))
	ki := int64(k)
	return math.Float64frombits(math.Float64bits(exp2Table[ki&31]*p) + uint64(ki>>5)<<52)
}

// sigmoidFast is sigmoid through fastExp.
func sigmoidFast(x float32) float32 { return float32(1 / (1 + fastExp(-float64(x)))) }

// tanhFast returns tanh x to float32 precision through fastExp.
func tanhFast(x float32) float32 {
	a := math.Abs(float64(x))
	switch {
	case a < 0x1p-12:
		return x // tanh x = x(1 − x²/3 + …): exact in float32
	case a > 20:
		return float32(math.Copysign(1, float64(x)))
	}
	e := fastExp(2 * a)
	return float32(math.Copysign((e-1)/(e+1), float64(x)))
}

// softmaxFast is kernels.Softmax (float64 sum) on one row through fastExp.
func softmaxFast(x []float32) {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		e := fastExp(float64(v - m))
		x[i] = float32(e)
		s += e
	}
	inv := 1 / s
	for i, v := range x {
		x[i] = float32(float64(v) * inv)
	}
}

func relu(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func addTo(dst, x []float32) {
	for i, v := range x {
		dst[i] += v
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(dst, x []float32, a float32) {
	for i, v := range x {
		dst[i] += a * v
	}
}

// dot8 is dot with eight partial sums, so that the additions do not wait
// for each other (the attention heads' dot products, 64 long in R2Gen).
func dot8(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		a8, b8 := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += a8[0] * b8[0]
		s1 += a8[1] * b8[1]
		s2 += a8[2] * b8[2]
		s3 += a8[3] * b8[3]
		s4 += a8[4] * b8[4]
		s5 += a8[5] * b8[5]
		s6 += a8[6] * b8[6]
		s7 += a8[7] * b8[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// axpy8 is axpy unrolled by eight.
func axpy8(dst, x []float32, a float32) {
	dst = dst[:len(x)]
	i := 0
	for ; i+8 <= len(x); i += 8 {
		d8, x8 := dst[i:i+8:i+8], x[i:i+8:i+8]
		d8[0] += a * x8[0]
		d8[1] += a * x8[1]
		d8[2] += a * x8[2]
		d8[3] += a * x8[3]
		d8[4] += a * x8[4]
		d8[5] += a * x8[5]
		d8[6] += a * x8[6]
		d8[7] += a * x8[7]
	}
	for ; i < len(x); i++ {
		dst[i] += a * x[i]
	}
}

func softmaxInPlace(x []float32) { kernels.Softmax(x, x, len(x)) }
