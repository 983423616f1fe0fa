package memtrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/accel"
)

// devDecoding is the incremental decoding state of a batch of studies on a
// device: the same computation as Decoding, step for step, with every
// tensor in device memory. It implements decode.Model; only the tokens go
// in and the log-probabilities come out at each step.
//
// Unlike Decoding's ancestry table, Reorder moves the rows of the
// key/value caches and the memory on the device (one gather each), which
// is cheap there and keeps every attention a strided batched GEMM:
//
//	self-attention   (R·H) × [1 × dk]·[dk × (t+1)]      over (R, H, P, dk) caches
//	cross-attention  H × G × [k × dk]·[dk × N]          G studies of k rows each
//	memory attention H × R × [S × dk]·[dk × (S+1)]     over [M; y] per row
//
// A devDecoding belongs to one goroutine.
type devDecoding struct {
	m *Transformer
	devRows
	w *devWeights
	n int // patches per study

	selfK, selfV   []accel.Ptr // per layer (rowCap, H, posCap, dk)
	crossK, crossV []accel.Ptr // per layer (B, N, D)
	memory, memAlt accel.Ptr   // (rowCap, S·D)

	// scratch, sized for rowCap rows
	kvIDs                                 accel.Ptr // int32: the [M; y] rows (rowCap·(S+1))
	x, h, q, k, v, ctx, tmp, gamma, beta  accel.Ptr
	hid, ff, scores, crossScores          accel.Ptr
	rmCat, rmIn, rmK, rmV, rmQ, rmScores  accel.Ptr
	rmCtx, rmHid, rmOut, rmTanh, rmU, rmW accel.Ptr
	// Mem2Mem: each study's encoder states and context keys (B, N, ·), and
	// per-step scratch.
	m2mH, m2mKeys                                  accel.Ptr
	m2mKeysRows, m2mHRows, m2mSum, m2mScores, m2mQ accel.Ptr
	m2mC, m2mInZ, m2mInU, m2mZ, m2mU, m2mRead      accel.Ptr
	kvIdsRows                                      int // rows the memory's gather ids were written for
}

var (
	_ decode.Model             = (*devDecoding)(nil)
	_ decode.AttentionRecorder = (*devDecoding)(nil)
)

// decodeOnDevice is decodeStudies of the R2Gen Transformer with the
// decoder steps on the model's device.
func (m *Model) decodeOnDevice(ctx context.Context, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	dw, err := m.dev.current()
	if err != nil {
		return nil, 0, err
	}
	if w, ok := dw.(*devM2Weights); ok {
		return m.M2().decodeOnDevice(ctx, w, feats, o)
	}
	dec, err := m.transformer.startDeviceDecoding(dw.(*devWeights), feats)
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	return decodeBest(ctx, dec, strategyFor(o, 0, 0, decode.R2Gen))
}

// startDeviceDecoding encodes feats on the CPU and returns a device
// decoding state with one row per study.
func (m *Transformer) startDeviceDecoding(w *devWeights, feats *radgen.Tensor) (*devDecoding, error) {
	c := m.Config
	if feats.Rank() != 3 || feats.Dim(2) != c.DVisual || feats.Dim(0) == 0 || feats.Dim(1) == 0 {
		return nil, fmt.Errorf("memtrans: visual features %v, want (B, N, %d)", feats.Shape(), c.DVisual)
	}
	if feats.Is64() {
		feats = feats.To32()
	}
	g := radgen.NoGrad()
	enc := m.Encode(g, feats)
	b, n := feats.Dim(0), feats.Dim(1)
	s := &devDecoding{devRows: newDevRows(w.e, b), m: m, w: w, n: n}
	fail := func(err error) (*devDecoding, error) {
		s.Close()
		return nil, err
	}
	// Cross-attention keys and values once per study, on the CPU as
	// Decoding computes them (the source of layer i is the encoder output
	// or its multi-view LN(g_i(S) + S_N)), then copied.
	for i, l := range m.Decoder.Layers {
		src := enc.Sources[i]
		for _, dst := range []*[]accel.Ptr{&s.crossK, &s.crossV} {
			lin := l.SrcAttn.Linears[1]
			if dst == &s.crossV {
				lin = l.SrcAttn.Linears[2]
			}
			p, err := s.upload(lin.Forward(g, src).Data())
			if err != nil {
				return fail(err)
			}
			*dst = append(*dst, p)
		}
	}
	if err := s.ensure(b, c.MaxSeqLen+1); err != nil {
		return fail(err)
	}
	switch {
	case m.Memory != nil:
		if err := s.e.CopyIn(s.memory, m.Memory.InitMemory(b).Data()); err != nil {
			return fail(err)
		}
	case m.Mem2Mem != nil:
		// M_0^(d) = M^(e) (Mem2Mem §3.2), and what Eq. 17 reads each step.
		if err := s.e.CopyIn(s.memory, enc.Bank.Data()); err != nil {
			return fail(err)
		}
		var err error
		if s.m2mH, err = s.upload(enc.Out.Data()); err != nil {
			return fail(err)
		}
		if s.m2mKeys, err = s.upload(m.Mem2Mem.ContextKeys(g, enc.Out).Data()); err != nil {
			return fail(err)
		}
	}
	return s, nil
}

func (s *devDecoding) sizes() (d, heads, dk, slots, dff, vocab int) {
	c := s.m.Config
	d, heads = c.DModel, s.w.layers[0].heads
	switch {
	case s.w.memory != nil:
		slots = s.w.memory.slots
	case s.w.m2m != nil:
		slots = s.w.m2m.slots
	}
	return d, heads, d / heads, slots, s.w.layers[0].ff1.out, c.Vocab
}

// ensure sizes every buffer for rows rows and positions positions,
// keeping the caches and memory of the current rows and positions.
func (s *devDecoding) ensure(rows, positions int) error {
	if rows <= s.rowCap && positions <= s.posCap {
		return nil
	}
	d, heads, dk, slots, dff, vocab := s.sizes()
	rc, pc := max(rows, s.rowCap), max(positions, s.posCap)
	cache := rc * heads * pc * dk
	grow := func(old accel.Ptr) (accel.Ptr, error) { return s.growCache(old, heads, dk, rc, pc) }
	for l := range s.w.layers {
		if l >= len(s.selfK) {
			s.selfK, s.selfV = append(s.selfK, 0), append(s.selfV, 0)
		}
		var err error
		if s.selfK[l], err = grow(s.selfK[l]); err != nil {
			return err
		}
		if s.selfV[l], err = grow(s.selfV[l]); err != nil {
			return err
		}
	}
	var err error
	realloc := func(p *accel.Ptr, n, keep int) {
		if err == nil {
			err = s.realloc(p, n, keep)
		}
	}
	realloc(&s.spareK, cache, 0)
	realloc(&s.spareV, cache, 0)
	sd := max(slots, 1) * d
	realloc(&s.memory, rc*sd, s.rows*sd)
	realloc(&s.memAlt, rc*sd, 0)
	for _, p := range []*accel.Ptr{&s.x, &s.h, &s.q, &s.k, &s.v, &s.ctx, &s.tmp, &s.gamma, &s.beta, &s.hid} {
		realloc(p, rc*d, 0)
	}
	realloc(&s.ff, rc*dff, 0)
	realloc(&s.logits, rc*vocab, 0)
	realloc(&s.scores, rc*heads*pc, 0)
	realloc(&s.crossScores, rc*heads*s.n, 0)
	realloc(&s.ids, rc, 0)
	realloc(&s.tokIDs, rc, 0)
	realloc(&s.kvIDs, rc*(slots+1), 0)
	if mm := s.w.m2m; mm != nil {
		n, da := s.n, mm.hidden
		realloc(&s.m2mKeysRows, rc*n*da, 0)
		realloc(&s.m2mHRows, rc*n*d, 0)
		realloc(&s.m2mSum, rc*max(n, slots)*da, 0)
		realloc(&s.m2mScores, rc*max(n, slots), 0)
		realloc(&s.m2mQ, rc*da, 0)
		for _, p := range []*accel.Ptr{&s.m2mC, &s.m2mInZ, &s.m2mInU, &s.m2mRead} {
			realloc(p, rc*d, 0)
		}
		realloc(&s.m2mZ, rc*sd, 0)
		realloc(&s.m2mU, rc*sd, 0)
	}
	if s.w.memory != nil {
		mh := s.w.memory.heads
		realloc(&s.rmCat, rc*(slots+1)*d, 0)
		realloc(&s.rmIn, rc*(slots+1)*d, 0)
		realloc(&s.rmK, rc*(slots+1)*d, 0)
		realloc(&s.rmV, rc*(slots+1)*d, 0)
		realloc(&s.rmQ, rc*sd, 0)
		realloc(&s.rmScores, rc*mh*slots*(slots+1), 0)
		for _, p := range []*accel.Ptr{&s.rmCtx, &s.rmHid, &s.rmOut, &s.rmTanh} {
			realloc(p, rc*sd, 0)
		}
		realloc(&s.rmU, rc*slots*2*d, 0)
		realloc(&s.rmW, rc*2*d, 0)
		s.kvIdsRows = 0
	}
	if err != nil {
		return err
	}
	s.rowCap, s.posCap = rc, pc
	return nil
}

// VocabSize implements decode.Model.
func (s *devDecoding) VocabSize() int { return s.m.Config.Vocab }

// AttentionWidth implements decode.AttentionRecorder.
func (s *devDecoding) AttentionWidth() int { return s.n }

// Attention implements decode.AttentionRecorder: the last layer's
// cross-attention of the last step, averaged over heads.
func (s *devDecoding) Attention(dst []float32) error {
	// Scores are (H, R, N) whichever grouping the step used.
	_, heads, _, _, _, _ := s.sizes()
	return s.meanAttention(dst, s.crossScores, heads, s.rows, s.n)
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *devDecoding) Reorder(src []int) error {
	if err := s.checkReorder(src); err != nil {
		return err
	}
	if err := s.ensure(len(src), s.t+1); err != nil {
		return err
	}
	d, heads, dk, slots, _, _ := s.sizes()
	per := heads * s.posCap * dk
	return s.reorderCaches(src, s.selfK, s.selfV, per, per, &s.memory, &s.memAlt, slots*d)
}

// Step implements decode.Model.
func (s *devDecoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	c := s.m.Config
	R, V := s.rows, c.Vocab
	if err := checkStep(ctx, tokens, dst, R, V, s.t, c.PositionLen); err != nil {
		return err
	}
	if err := s.ensure(R, s.t+1); err != nil {
		return err
	}
	d := c.DModel
	// Embedding: lut(y)·√D + PE(t).
	try := newTry()
	try.do(s.embed(s.x, s.w.table, s.w.pos.Add(s.t*d), tokens, V, d, sqrtOf(d)))
	switch {
	case try.err != nil:
	case s.w.memory != nil:
		try.do(s.memoryStep())
	case s.w.m2m != nil:
		try.do(s.mem2memStep())
	}
	for l := range s.w.layers {
		if try.err != nil {
			break
		}
		try.do(s.layerStep(l))
		try.do(ctx.Err())
	}
	try.do(s.norm(s.h, s.x, s.w.final))
	try.do(s.logit())
	if try.err != nil {
		return try.err
	}
	return s.emit(dst, V)
}

// logit writes the logits of the final states s.h: W·h + b, or for BASE+RM
// W·[h; M_t] + b, the memory concatenated (Chen et al. 2020, Table 2), as
// two products over the column blocks of W.
func (s *devDecoding) logit() error {
	R, d, e, l := s.rows, s.m.Config.DModel, s.e, s.w.logit
	if l.in == d {
		return s.w.linear(s.logits, s.h, R, l)
	}
	sd := l.in - d
	t := newTry()
	t.do(e.GemmStrided(false, true, 1, R, l.out, d, 1, s.h, d, 0, l.w, l.in, 0, 0, s.logits, l.out, 0))
	t.do(e.GemmStrided(false, true, 1, R, l.out, sd, 1, s.memory, sd, 0, l.w.Add(d), l.in, 0, 1, s.logits, l.out, 0))
	if l.b != 0 {
		t.do(e.Add(s.logits, s.logits, l.b, R, l.out, accel.RowVector))
	}
	return t.err
}

// try keeps the first error of a sequence of queued operations.
type try struct{ err error }

func newTry() *try { return &try{} }

func (t *try) do(err error) {
	if t.err == nil {
		t.err = err
	}
}

// norm applies n to R rows of x: MCLN with γ̂ = γ + mlpγ(M_t) and
// β̂ = β + mlpβ(M_t) (Chen et al. 2020, Eqs. 11–15), or a plain norm.
func (s *devDecoding) norm(dst, x accel.Ptr, n devNorm) error {
	R, d, e := s.rows, s.m.Config.DModel, s.e
	if !n.cond {
		return e.LayerNorm(dst, x, n.gamma, n.beta, R, d, n.eps, n.kind)
	}
	t := newTry()
	for _, p := range []struct {
		out      accel.Ptr
		l0, l2   devLinear
		constant accel.Ptr
	}{{s.gamma, n.gamma0, n.gamma2, n.gamma}, {s.beta, n.beta0, n.beta2, n.beta}} {
		t.do(s.w.linear(s.hid, s.memory, R, p.l0)) // memory (R, S·D) → (R, D)
		t.do(e.ReLU(s.hid, s.hid, R*p.l0.out))
		t.do(s.w.linear(p.out, s.hid, R, p.l2))
		t.do(e.Add(p.out, p.out, p.constant, R, d, accel.RowVector))
	}
	t.do(e.CondLayerNorm(dst, x, s.gamma, s.beta, R, d, n.eps, accel.NormR2Gen))
	return t.err
}

// layerStep runs decoder layer l on s.x in place.
func (s *devDecoding) layerStep(l int) error {
	R, d, e := s.rows, s.m.Config.DModel, s.e
	L := s.w.layers[l]
	heads := L.heads
	dk := d / heads
	scale := 1 / sqrtOf(dk)
	t, pc := s.t, s.posCap
	try := newTry()

	// Self-attention over the cache, this position appended.
	try.do(s.norm(s.h, s.x, L.norms[0]))
	try.do(s.w.linear(s.q, s.h, R, L.selfQ))
	try.do(s.w.linear(s.k, s.h, R, L.selfK))
	try.do(s.w.linear(s.v, s.h, R, L.selfV))
	try.do(e.AppendHeads(s.selfK[l], s.k, R, 1, heads, dk, d, 0, pc, t))
	try.do(e.AppendHeads(s.selfV[l], s.v, R, 1, heads, dk, d, 0, pc, t))
	try.do(e.GemmStrided(false, true, R*heads, 1, t+1, dk, scale, s.q, dk, dk, s.selfK[l], dk, pc*dk, 0, s.scores, t+1, t+1))
	try.do(e.Softmax(s.scores, s.scores, R*heads, t+1))
	try.do(e.GemmStrided(false, false, R*heads, 1, dk, t+1, 1, s.scores, t+1, t+1, s.selfV[l], dk, pc*dk, 0, s.ctx, dk, dk))
	try.do(s.w.linear(s.tmp, s.ctx, R, L.selfO))
	try.do(e.Add(s.x, s.x, s.tmp, R, d, accel.Same(R)))

	// Cross-attention over the study's patches. Rows grouped by study
	// (study-major, the same number each: every strategy's layout) share
	// their study's keys in one batched GEMM per head; otherwise each
	// row's keys are gathered first.
	try.do(s.norm(s.h, s.x, L.norms[1]))
	try.do(s.w.linear(s.q, s.h, R, L.srcQ))
	nd := s.n * d
	keys, vals, groups, per, err := s.crossSource(s.crossK[l], s.crossV[l], nd, nd)
	try.do(err)
	n := s.n
	for h := 0; h < heads && try.err == nil; h++ {
		try.do(e.GemmStrided(false, true, groups, per, n, dk, scale, s.q.Add(h*dk), d, per*d, keys.Add(h*dk), d, n*d, 0,
			s.crossScores.Add(h*R*n), n, per*n))
	}
	try.do(e.Softmax(s.crossScores, s.crossScores, heads*R, n))
	for h := 0; h < heads && try.err == nil; h++ {
		try.do(e.GemmStrided(false, false, groups, per, dk, n, 1, s.crossScores.Add(h*R*n), n, per*n, vals.Add(h*dk), d, n*d, 0,
			s.ctx.Add(h*dk), d, per*d))
	}
	try.do(s.w.linear(s.tmp, s.ctx, R, L.srcO))
	try.do(e.Add(s.x, s.x, s.tmp, R, d, accel.Same(R)))

	// Feed-forward.
	try.do(s.norm(s.h, s.x, L.norms[2]))
	try.do(s.w.linear(s.ff, s.h, R, L.ff1))
	try.do(e.ReLU(s.ff, s.ff, R*L.ff1.out))
	try.do(s.w.linear(s.tmp, s.ff, R, L.ff2))
	try.do(e.Add(s.x, s.x, s.tmp, R, d, accel.Same(R)))
	return try.err
}

// memoryStep advances every row's relational memory by the step's input
// s.x (Chen et al. 2020, Eqs. 6–10; relmem.Relational.Step).
func (s *devDecoding) memoryStep() error {
	R, d, e := s.rows, s.m.Config.DModel, s.e
	rm := s.w.memory
	S, heads := rm.slots, rm.heads
	dk := d / heads
	scale := 1 / sqrtOf(dk)
	t := newTry()
	// [M; y] per row: R·S memory rows then R inputs, gathered row-major.
	if s.kvIdsRows != R {
		ids := make([]int32, 0, R*(S+1))
		for r := range R {
			for j := range S {
				ids = append(ids, int32(r*S+j))
			}
			ids = append(ids, int32(R*S+r))
		}
		t.do(e.CopyInInt32(s.kvIDs, ids))
		s.kvIdsRows = R
	}
	t.do(e.CopyDevice(s.rmCat, s.memory, f32Bytes(R*S*d)))
	t.do(e.CopyDevice(s.rmCat.Add(R*S*d), s.x, f32Bytes(R*d)))
	t.do(e.Gather(s.rmIn, s.rmCat, s.kvIDs, R*(S+1), R*S+R, d, 1))
	t.do(s.w.linear(s.rmK, s.rmIn, R*(S+1), rm.k))
	t.do(s.w.linear(s.rmV, s.rmIn, R*(S+1), rm.v))
	t.do(s.w.linear(s.rmQ, s.memory, R*S, rm.q))
	for h := 0; h < heads && t.err == nil; h++ {
		t.do(e.GemmStrided(false, true, R, S, S+1, dk, scale, s.rmQ.Add(h*dk), d, S*d, s.rmK.Add(h*dk), d, (S+1)*d, 0,
			s.rmScores.Add(h*R*S*(S+1)), S+1, S*(S+1)))
	}
	t.do(e.Softmax(s.rmScores, s.rmScores, heads*R*S, S+1))
	for h := 0; h < heads && t.err == nil; h++ {
		t.do(e.GemmStrided(false, false, R, S, dk, S+1, 1, s.rmScores.Add(h*R*S*(S+1)), S+1, S*(S+1), s.rmV.Add(h*dk), d, (S+1)*d, 0,
			s.rmCtx.Add(h*dk), d, S*d))
	}
	// next = M + Attn; next += ReLU(mlp.2(ReLU(mlp.0(next)))).
	next := s.memAlt
	t.do(s.w.linear(next, s.rmCtx, R*S, rm.o))
	t.do(e.Add(next, next, s.memory, R*S, d, accel.Same(R*S)))
	t.do(s.w.linear(s.rmHid, next, R*S, rm.mlp0))
	t.do(e.ReLU(s.rmHid, s.rmHid, R*S*d))
	t.do(s.w.linear(s.rmOut, s.rmHid, R*S, rm.mlp2))
	t.do(e.ReLU(s.rmOut, s.rmOut, R*S*d))
	t.do(e.Add(next, next, s.rmOut, R*S, d, accel.Same(R*S)))
	// Gates W·y + U·tanh(M), and M_t = σ(G_i)·tanh(next) + σ(G_f)·M_{t−1}.
	t.do(e.Tanh(s.rmTanh, s.memory, R*S*d))
	t.do(s.w.linear(s.rmU, s.rmTanh, R*S, rm.u))
	t.do(s.w.linear(s.rmW, s.x, R, rm.w))
	t.do(e.RMGate(next, next, s.memory, s.rmW, s.rmU, R, S, d))
	if t.err == nil {
		s.memory, s.memAlt = s.memAlt, s.memory
	}
	return t.err
}
