//go:build cuda

package cuda

// Benchmarks (skip without a GPU). BenchmarkDecodeProxy is the skeleton of
// the generation benchmark: until the model runs on the engine, it
// generates with an R2Gen-shaped decoder built from this package's launchers
// and random weights, and reports reports/s for 1, 16 and 128 IU studies
// with beam 3, plus the fraction of the GPU's DRAM bandwidth a step reaches.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// R2Gen's sizes (IU X-Ray): d_model 512, 8 heads, d_ff 512, 3 layers, 3
// memory slots, vocabulary 760 + 1, 98 visual tokens, at most 60 tokens.
const (
	pxD      = 512
	pxH      = 8
	pxDK     = pxD / pxH
	pxFF     = 512
	pxLayers = 3
	pxSlots  = 3
	pxVocab  = 761
	pxTenc   = 98
	pxMaxLen = 60
)

type proxyCLN struct{ gamma, beta, g1, g1b, g2, g2b, b1, b1b, b2, b2b Ptr }

type proxyLayer struct {
	qkv, qkvB, selfO, selfOB Ptr // self-attention, Q/K/V fused (3D, D)
	srcQ, srcQB, srcO, srcOB Ptr // cross-attention
	ff1, ff1B, ff2, ff2B     Ptr
	cln                      [3]proxyCLN
	encK, encV               Ptr    // (studies, H, Tenc, dk): once per study, shared by its beams
	cacheK, cacheV           [2]Ptr // (n, H, maxLen, dk), ping-pong for beam reordering
}

// stepProxy is an R2Gen decoder (memory-driven conditional layer norm,
// relational memory, incremental self-attention with a key/value cache,
// cross-attention over the encoded study, logits and log-softmax) for
// studies × beam sequences. It does what a beam search does to the state at
// every step (reorder by beam index, copy the log-probabilities to the host)
// but picks tokens synthetically: the top-k itself is not timed.
type stepProxy struct {
	e                     *Engine
	tb                    testing.TB
	rng                   *rand.Rand
	studies, beam, n      int
	bufs                  []Ptr
	weightBytes           float64
	lut, pe, normG, normB Ptr
	logitW, logitB        Ptr
	layers                [pxLayers]proxyLayer
	rmQ, rmK, rmV, rmO    [2]Ptr // weight, bias
	rmMLP1, rmMLP2        [2]Ptr
	rmW, rmU              [2]Ptr // (2D, D)
	encMask               Ptr    // (studies, 1, Tenc) bytes, all 1
	cur                   int    // which cache of each pair is current
	// state and scratch
	memx, memInit, mx4, rmIdx, beamIdx, tokens     Ptr
	x, hbuf, qkv, qh, scores, ctxh, ctx, o, f      Ptr
	mh, gam, bet, rq, rk, rv, rqh, rkh, rvh, rctxh Ptr
	rctx, next, h1, gw, tm, gu, mtmp, logits, logp Ptr
	hostLogp                                       []float32
	hostTokens                                     []int32
}

func newStepProxy(tb testing.TB, e *Engine, studies, beam int) *stepProxy {
	tb.Helper()
	n := studies * beam
	p := &stepProxy{e: e, tb: tb, rng: rand.New(rand.NewPCG(42, uint64(n))), studies: studies, beam: beam, n: n}
	const D, S = pxD, pxSlots
	p.lut = p.weight(pxVocab, D)
	p.weightBytes -= float64(pxVocab * D * 4) // only n rows of the table are read
	pe := make([]float32, pxMaxLen*D)
	for pos := 0; pos < pxMaxLen; pos++ {
		for i := 0; i < D; i += 2 {
			div := math.Exp(float64(i) * -(math.Log(10000) / D))
			pe[pos*D+i] = float32(math.Sin(float64(pos) * div))
			pe[pos*D+i+1] = float32(math.Cos(float64(pos) * div))
		}
	}
	p.pe = p.upload(pe)
	for l := range p.layers {
		L := &p.layers[l]
		L.qkv, L.qkvB = p.weight(3*D, D), p.bias(3*D)
		L.selfO, L.selfOB = p.weight(D, D), p.bias(D)
		L.srcQ, L.srcQB = p.weight(D, D), p.bias(D)
		L.srcO, L.srcOB = p.weight(D, D), p.bias(D)
		L.ff1, L.ff1B = p.weight(pxFF, D), p.bias(pxFF)
		L.ff2, L.ff2B = p.weight(D, pxFF), p.bias(D)
		for j := range L.cln {
			c := &L.cln[j]
			c.gamma, c.beta = p.upload(ones(D)), p.bias(D)
			c.g1, c.g1b, c.g2, c.g2b = p.weight(D, S*D), p.bias(D), p.weight(D, D), p.bias(D)
			c.b1, c.b1b, c.b2, c.b2b = p.weight(D, S*D), p.bias(D), p.weight(D, D), p.bias(D)
		}
		L.encK = p.weight(studies*pxH*pxTenc, pxDK) // counted: read every step
		L.encV = p.weight(studies*pxH*pxTenc, pxDK)
		for c := 0; c < 2; c++ {
			L.cacheK[c] = p.buf(n * pxH * pxMaxLen * pxDK)
			L.cacheV[c] = p.buf(n * pxH * pxMaxLen * pxDK)
		}
	}
	for _, w := range []*[2]Ptr{&p.rmQ, &p.rmK, &p.rmV, &p.rmO, &p.rmMLP1, &p.rmMLP2} {
		w[0], w[1] = p.weight(D, D), p.bias(D)
	}
	p.rmW[0], p.rmW[1] = p.weight(2*D, D), p.bias(2*D)
	p.rmU[0], p.rmU[1] = p.weight(2*D, D), p.bias(2*D)
	p.normG, p.normB = p.upload(ones(D)), p.bias(D)
	p.logitW, p.logitB = p.weight(pxVocab, D), p.bias(pxVocab)

	mask := make([]byte, studies*pxTenc)
	for i := range mask {
		mask[i] = 1
	}
	p.encMask = p.alloc(len(mask))
	must(tb, e.CopyInBytes(p.encMask, mask))
	// R2Gen init_memory: identity rows padded with zeros, per sequence.
	memInit := make([]float32, n*S*D)
	for i := 0; i < n; i++ {
		for s := 0; s < S; s++ {
			memInit[(i*S+s)*D+s] = 1
		}
	}
	p.memInit = p.upload(memInit)
	// memx holds [M (n*S rows); x (n rows)]; mx4 gathers, for every
	// sequence, its S memory rows then its input row: cat([M, x]) of R2Gen.
	p.memx = p.buf((n*S + n) * D)
	idx := make([]int32, 0, n*(S+1))
	for i := 0; i < n; i++ {
		for s := 0; s < S; s++ {
			idx = append(idx, int32(i*S+s))
		}
		idx = append(idx, int32(n*S+i))
	}
	p.rmIdx = p.ints(idx)
	perm := make([]int32, n) // beam reordering: reverse the beams of each study
	for i := range perm {
		perm[i] = int32(i/beam*beam + beam - 1 - i%beam)
	}
	p.beamIdx = p.ints(perm)
	p.tokens = p.alloc(n * 4)
	p.hostTokens = make([]int32, n)
	p.hostLogp = make([]float32, n*pxVocab)

	for _, b := range []struct {
		dst *Ptr
		n   int
	}{
		{&p.mx4, n * (S + 1) * D}, {&p.x, n * D}, {&p.hbuf, n * D}, {&p.qkv, n * 3 * D},
		{&p.qh, n * D}, {&p.scores, n * pxH * max(pxMaxLen, pxTenc)}, {&p.ctxh, n * D},
		{&p.ctx, n * D}, {&p.o, n * D}, {&p.f, n * pxFF}, {&p.mh, n * D}, {&p.gam, n * D},
		{&p.bet, n * D}, {&p.rq, n * S * D}, {&p.rk, n * (S + 1) * D}, {&p.rv, n * (S + 1) * D},
		{&p.rqh, n * S * D}, {&p.rkh, n * (S + 1) * D}, {&p.rvh, n * (S + 1) * D},
		{&p.rctxh, n * S * D}, {&p.rctx, n * S * D}, {&p.next, n * S * D}, {&p.h1, n * S * D},
		{&p.gw, n * 2 * D}, {&p.tm, n * S * D}, {&p.gu, n * S * 2 * D}, {&p.mtmp, n * S * D},
		{&p.logits, n * pxVocab}, {&p.logp, n * pxVocab},
	} {
		*b.dst = p.buf(b.n)
	}
	return p
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func (p *stepProxy) alloc(bytes int) Ptr {
	q, err := p.e.AllocPtr(int64(bytes))
	must(p.tb, err)
	p.bufs = append(p.bufs, q)
	return q
}

func (p *stepProxy) buf(floats int) Ptr { return p.alloc(floats * 4) }

func (p *stepProxy) upload(v []float32) Ptr {
	q := p.buf(len(v))
	must(p.tb, p.e.CopyIn(q, v))
	return q
}

func (p *stepProxy) ints(v []int32) Ptr {
	q := p.alloc(len(v) * 4)
	must(p.tb, p.e.CopyInInt32(q, v))
	return q
}

// weight uploads a Xavier-uniform (rows, cols) matrix, counted as read once
// per step.
func (p *stepProxy) weight(rows, cols int) Ptr {
	p.weightBytes += float64(rows * cols * 4)
	return p.upload(randVec(p.rng, rows*cols, math.Sqrt(6/float64(rows+cols))))
}

func (p *stepProxy) bias(n int) Ptr {
	p.weightBytes += float64(n * 4)
	return p.upload(randVec(p.rng, n, 0.1))
}

func (p *stepProxy) free() {
	for _, q := range p.bufs {
		p.e.FreePtr(q)
	}
	p.bufs = nil
}

// bytesPerStep is the DRAM traffic a step cannot avoid, averaged over a
// generation: every weight once, the studies' encoder keys and values, the
// key/value caches up to the current position, and the beam reordering of
// the caches (read and write).
func (p *stepProxy) bytesPerStep() float64 {
	cacheRow := float64(pxH * pxDK * 4 * 2 * pxLayers) // K and V, per position per sequence
	avgPrefix := float64(pxMaxLen+1) / 2
	reorder := 2 * float64(p.n) * cacheRow * avgPrefix
	return p.weightBytes + float64(p.n)*cacheRow*avgPrefix + reorder
}

// cln is MCLN: gamma_hat = gamma + mlp_gamma(M_t), beta_hat likewise, then
// R2Gen's layer norm with them (Chen et al. 2020, Eqs. 11-15).
func (p *stepProxy) cln(dst, x, mt Ptr, c *proxyCLN) error {
	e, n, D := p.e, p.n, pxD
	for _, m := range []struct{ w1, b1, w2, b2, base, out Ptr }{
		{c.g1, c.g1b, c.g2, c.g2b, c.gamma, p.gam}, {c.b1, c.b1b, c.b2, c.b2b, c.beta, p.bet},
	} {
		if err := e.Linear(p.mh, mt, m.w1, m.b1, n, pxSlots*D, D); err != nil {
			return err
		}
		if err := e.ReLU(p.mh, p.mh, n*D); err != nil {
			return err
		}
		if err := e.Linear(m.out, p.mh, m.w2, m.b2, n, D, D); err != nil {
			return err
		}
		if err := e.Add(m.out, m.out, m.base, n, D, RowVector); err != nil {
			return err
		}
	}
	return e.CondLayerNorm(dst, x, p.gam, p.bet, n, D, 1e-6, NormR2Gen)
}

// rmStep is RelationalMemory.forward_step for every sequence: the new memory
// is written over rows 0..n*S-1 of memx (Chen et al. 2020, Eqs. 6-10).
func (p *stepProxy) rmStep() error {
	e, n, S, D := p.e, p.n, pxSlots, pxD
	xrows := p.memx.F32(n * S * D)
	steps := []func() error{
		func() error { return e.Gather(p.mx4, p.memx, p.rmIdx, n*(S+1), n*S+n, D, 1) },
		func() error { return e.Linear(p.rq, p.memx, p.rmQ[0], p.rmQ[1], n*S, D, D) },
		func() error { return e.Linear(p.rk, p.mx4, p.rmK[0], p.rmK[1], n*(S+1), D, D) },
		func() error { return e.Linear(p.rv, p.mx4, p.rmV[0], p.rmV[1], n*(S+1), D, D) },
		func() error { return e.SplitHeads(p.rqh, p.rq, n, S, pxH, pxDK, D, 0) },
		func() error { return e.SplitHeads(p.rkh, p.rk, n, S+1, pxH, pxDK, D, 0) },
		func() error { return e.SplitHeads(p.rvh, p.rv, n, S+1, pxH, pxDK, D, 0) },
		func() error {
			return e.GemmStrided(false, true, n*pxH, S, S+1, pxDK, 1/float32(math.Sqrt(pxDK)),
				p.rqh, pxDK, S*pxDK, p.rkh, pxDK, (S+1)*pxDK, 0, p.scores, S+1, S*(S+1))
		},
		func() error { return e.Softmax(p.scores, p.scores, n*pxH*S, S+1, nil) },
		func() error {
			return e.GemmStrided(false, false, n*pxH, S, pxDK, S+1, 1,
				p.scores, S+1, S*(S+1), p.rvh, pxDK, (S+1)*pxDK, 0, p.rctxh, pxDK, S*pxDK)
		},
		func() error { return e.MergeHeads(p.rctx, p.rctxh, n, S, pxH, pxDK, D) },
		func() error { return e.Linear(p.next, p.rctx, p.rmO[0], p.rmO[1], n*S, D, D) },
		func() error { return e.Add(p.next, p.next, p.memx, n*S, D, Same(n*S)) },
		func() error { return e.Linear(p.h1, p.next, p.rmMLP1[0], p.rmMLP1[1], n*S, D, D) },
		func() error { return e.ReLU(p.h1, p.h1, n*S*D) },
		func() error { return e.Linear(p.rctx, p.h1, p.rmMLP2[0], p.rmMLP2[1], n*S, D, D) },
		func() error { return e.ReLU(p.rctx, p.rctx, n*S*D) },
		func() error { return e.Add(p.next, p.next, p.rctx, n*S, D, Same(n*S)) },
		func() error { return e.Linear(p.gw, xrows, p.rmW[0], p.rmW[1], n, D, 2*D) },
		func() error { return e.Tanh(p.tm, p.memx, n*S*D) },
		func() error { return e.Linear(p.gu, p.tm, p.rmU[0], p.rmU[1], n*S, D, 2*D) },
		func() error { return e.RMGate(p.memx, p.next, p.memx, p.gw, p.gu, n, S, D) },
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// step decodes position t for every sequence: tokens → log-probabilities.
func (p *stepProxy) step(t int) error {
	e, n, D, H, dk := p.e, p.n, pxD, pxH, pxDK
	scale := 1 / float32(math.Sqrt(float64(dk)))
	xrows := p.memx.F32(n * pxSlots * D)
	// Embedding × sqrt(d_model) + positional encoding: the input of both the
	// relational memory and the decoder (eval mode: one dropout-free copy).
	if err := e.Gather(xrows, p.lut, p.tokens, n, pxVocab, D, float32(math.Sqrt(float64(D)))); err != nil {
		return err
	}
	if err := e.Add(xrows, xrows, p.pe.F32(t*D), n, D, RowVector); err != nil {
		return err
	}
	if err := e.CopyDevice(p.x, xrows, int64(n*D*4)); err != nil {
		return err
	}
	if err := p.rmStep(); err != nil {
		return err
	}
	mt := p.memx // M_t as (n, S*D)
	for l := range p.layers {
		L := &p.layers[l]
		kc, vc := L.cacheK[p.cur], L.cacheV[p.cur]
		ops := []func() error{
			// self-attention over positions 0..t, keys and values cached
			func() error { return p.cln(p.hbuf, p.x, mt, &L.cln[0]) },
			func() error { return e.Linear(p.qkv, p.hbuf, L.qkv, L.qkvB, n, D, 3*D) },
			func() error { return e.AppendHeads(kc, p.qkv, n, 1, H, dk, 3*D, D, pxMaxLen, t) },
			func() error { return e.AppendHeads(vc, p.qkv, n, 1, H, dk, 3*D, 2*D, pxMaxLen, t) },
			func() error { return e.SplitHeads(p.qh, p.qkv, n, 1, H, dk, 3*D, 0) },
			func() error {
				return e.GemmStrided(false, true, n*H, 1, t+1, dk, scale, p.qh, dk, dk, kc, dk, pxMaxLen*dk, 0, p.scores, t+1, t+1)
			},
			func() error { return e.Softmax(p.scores, p.scores, n*H, t+1, nil) },
			func() error {
				return e.GemmStrided(false, false, n*H, 1, dk, t+1, 1, p.scores, t+1, t+1, vc, dk, pxMaxLen*dk, 0, p.ctxh, dk, dk)
			},
			func() error { return e.MergeHeads(p.ctx, p.ctxh, n, 1, H, dk, D) },
			func() error { return e.Linear(p.o, p.ctx, L.selfO, L.selfOB, n, D, D) },
			func() error { return e.Add(p.x, p.x, p.o, n, D, Same(n)) },
			// cross-attention: the beams of a study are its query rows
			func() error { return p.cln(p.hbuf, p.x, mt, &L.cln[1]) },
			func() error { return e.Linear(p.qkv, p.hbuf, L.srcQ, L.srcQB, n, D, D) },
			func() error { return e.SplitHeads(p.qh, p.qkv, p.studies, p.beam, H, dk, D, 0) },
			func() error {
				return e.GemmStrided(false, true, p.studies*H, p.beam, pxTenc, dk, scale,
					p.qh, dk, p.beam*dk, L.encK, dk, pxTenc*dk, 0, p.scores, pxTenc, p.beam*pxTenc)
			},
			func() error {
				return e.Softmax(p.scores, p.scores, n*H, pxTenc,
					&Mask{Keys: p.encMask, KeyRows: 1, RowsPerBatch: H * p.beam, QLen: p.beam})
			},
			func() error {
				return e.GemmStrided(false, false, p.studies*H, p.beam, dk, pxTenc, 1,
					p.scores, pxTenc, p.beam*pxTenc, L.encV, dk, pxTenc*dk, 0, p.ctxh, dk, p.beam*dk)
			},
			func() error { return e.MergeHeads(p.ctx, p.ctxh, p.studies, p.beam, H, dk, D) },
			func() error { return e.Linear(p.o, p.ctx, L.srcO, L.srcOB, n, D, D) },
			func() error { return e.Add(p.x, p.x, p.o, n, D, Same(n)) },
			// feed-forward
			func() error { return p.cln(p.hbuf, p.x, mt, &L.cln[2]) },
			func() error { return e.Linear(p.f, p.hbuf, L.ff1, L.ff1B, n, D, pxFF) },
			func() error { return e.ReLU(p.f, p.f, n*pxFF) },
			func() error { return e.Linear(p.o, p.f, L.ff2, L.ff2B, n, pxFF, D) },
			func() error { return e.Add(p.x, p.x, p.o, n, D, Same(n)) },
		}
		for _, f := range ops {
			if err := f(); err != nil {
				return fmt.Errorf("layer %d: %w", l, err)
			}
		}
	}
	if err := e.LayerNorm(p.hbuf, p.x, p.normG, p.normB, n, D, 1e-6, NormR2Gen); err != nil {
		return err
	}
	if err := e.Linear(p.logits, p.hbuf, p.logitW, p.logitB, n, D, pxVocab); err != nil {
		return err
	}
	return e.LogSoftmax(p.logp, p.logits, n, pxVocab)
}

// reorder moves every sequence's state to its new beam slot, as a beam
// search does after choosing the top k continuations.
func (p *stepProxy) reorder() error {
	e, n := p.e, p.n
	row := pxH * pxMaxLen * pxDK
	for l := range p.layers {
		L := &p.layers[l]
		if err := e.Gather(L.cacheK[1-p.cur], L.cacheK[p.cur], p.beamIdx, n, n, row, 1); err != nil {
			return err
		}
		if err := e.Gather(L.cacheV[1-p.cur], L.cacheV[p.cur], p.beamIdx, n, n, row, 1); err != nil {
			return err
		}
	}
	p.cur = 1 - p.cur
	sd := pxSlots * pxD
	if err := e.Gather(p.mtmp, p.memx, p.beamIdx, n, n, sd, 1); err != nil {
		return err
	}
	return e.CopyDevice(p.memx, p.mtmp, int64(n*sd*4))
}

// generate decodes steps positions from bos, as beam search would.
func (p *stepProxy) generate(steps int) error {
	if err := p.e.CopyDevice(p.memx, p.memInit, int64(p.n*pxSlots*pxD*4)); err != nil {
		return err
	}
	clear(p.hostTokens) // bos = 0
	for t := 0; t < steps; t++ {
		if err := p.e.CopyInInt32(p.tokens, p.hostTokens); err != nil {
			return err
		}
		if err := p.step(t); err != nil {
			return fmt.Errorf("step %d: %w", t, err)
		}
		// The host reads the log-probabilities to pick the next tokens.
		if err := p.e.CopyOut(p.hostLogp, p.logp); err != nil {
			return err
		}
		for i := range p.hostTokens {
			p.hostTokens[i] = int32((t*7 + i*13 + 1) % pxVocab)
		}
		if err := p.reorder(); err != nil {
			return err
		}
	}
	return nil
}

func BenchmarkDecodeProxy(b *testing.B) {
	e := gpu(b)
	for _, studies := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("studies=%d/beam=3", studies), func(b *testing.B) {
			p := newStepProxy(b, e, studies, 3)
			defer p.free()
			must(b, p.generate(2)) // warm-up: JIT, cuBLAS heuristics, caches
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				must(b, p.generate(pxMaxLen))
			}
			sec := b.Elapsed().Seconds()
			stepSec := sec / float64(b.N*pxMaxLen)
			b.ReportMetric(float64(studies*b.N)/sec, "reports/s")
			b.ReportMetric(stepSec*1e3, "ms/step")
			if bw := e.Info().PeakBandwidth; bw > 0 {
				b.ReportMetric(p.bytesPerStep()/stepSec/bw, "bw-frac")
			}
		})
	}
}

// Kernel benchmarks at decoder-step sizes (batch 128 × beam 3 = 384 rows).

func benchKernel(b *testing.B, bytes int64, run func(e *Engine, x, y Ptr) error, floats int) {
	e := gpu(b)
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := upload(b, e, randVec(rng, floats, 1)), alloc(b, e, floats*4)
	must(b, run(e, x, y))
	must(b, e.Sync())
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := run(e, x, y); err != nil {
			b.Fatal(err)
		}
	}
	must(b, e.Sync())
}

func BenchmarkGPUAdd(b *testing.B) {
	const n = 1 << 24
	benchKernel(b, 3*n*4, func(e *Engine, x, y Ptr) error { return e.Add(y, x, x, n/512, 512, Same(n/512)) }, n)
}

func BenchmarkGPUSoftmaxVocab(b *testing.B) {
	const rows = 384
	benchKernel(b, 2*rows*pxVocab*4, func(e *Engine, x, y Ptr) error { return e.LogSoftmax(y, x, rows, pxVocab) }, rows*pxVocab)
}

func BenchmarkGPUSoftmaxCross(b *testing.B) {
	const rows = 384 * pxH
	benchKernel(b, 2*rows*pxTenc*4, func(e *Engine, x, y Ptr) error { return e.Softmax(y, x, rows, pxTenc, nil) }, rows*pxTenc)
}

func BenchmarkGPULayerNorm(b *testing.B) {
	const rows = 384
	e := gpu(b)
	g := upload(b, e, ones(rows*pxD))
	benchKernel(b, 4*rows*pxD*4, func(e *Engine, x, y Ptr) error {
		return e.CondLayerNorm(y, x, g, g, rows, pxD, 1e-6, NormR2Gen)
	}, rows*pxD)
}

func BenchmarkGPUGemm(b *testing.B) {
	for _, s := range []struct{ m, n, k int }{{384, 512, 512}, {512, 512, 512}, {4096, 4096, 4096}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			e := gpu(b)
			rng := rand.New(rand.NewPCG(3, 4))
			a, w, c := upload(b, e, randVec(rng, s.m*s.k, 1)), upload(b, e, randVec(rng, s.k*s.n, 1)), alloc(b, e, s.m*s.n*4)
			must(b, e.Gemm(false, false, s.m, s.n, s.k, 1, a, s.k, w, s.n, 0, c, s.n))
			must(b, e.Sync())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.Gemm(false, false, s.m, s.n, s.k, 1, a, s.k, w, s.n, 0, c, s.n); err != nil {
					b.Fatal(err)
				}
			}
			must(b, e.Sync())
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
