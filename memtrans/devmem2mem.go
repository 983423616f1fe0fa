package memtrans

import (
	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/relmem"
)

// devMem2Mem is Mem2Mem's decoder memory on a device (relmem.Mem2Mem; Mem2Mem
// §3.2, Eqs. 13–20). The gate matrices of Eqs. 18–19 are stored as [W_z; W_u]
// row blocks, so each half is a contiguous matrix of its own here.
type devMem2Mem struct {
	slots, hidden          int
	ctxQ, ctxV             devLinear // Attn of Eq. 17 (the keys W_k H are per study)
	readQ, readK, readV    devLinear // Attn of Eq. 13
	combine                devLinear // W_m of Eq. 15, (D, 2D): [x; m] as two column blocks
	hz, hu, cz, cu, mz, mu devLinear // the z and u halves of W_·1 x, W_·2 c, W_·3 M (Eqs. 18–19)
}

// halves splits a (2D, D) linear map into its first and second D rows.
func halves(l devLinear) (z, u devLinear) {
	d := l.out / 2
	z, u = l, l
	z.out, u.out = d, d
	u.w = l.w.Add(d * l.in)
	if l.b != 0 {
		u.b = l.b.Add(d)
	}
	return z, u
}

// uploadMem2Mem copies mm's weights with lin.
func uploadMem2Mem(mm *relmem.Mem2Mem, lin func(*radgen.Linear) devLinear) *devMem2Mem {
	w := &devMem2Mem{slots: mm.Slots, hidden: mm.Hidden, ctxQ: lin(mm.CtxQ), ctxV: lin(mm.CtxV),
		readQ: lin(mm.ReadQ), readK: lin(mm.ReadK), readV: lin(mm.ReadV), combine: lin(mm.Combine)}
	w.hz, w.hu = halves(lin(mm.WriteH))
	w.cz, w.cu = halves(lin(mm.WriteC))
	w.mz, w.mu = halves(lin(mm.WriteM))
	return w
}

// mem2memStep writes every row's input s.x into its memory and replaces
// s.x by the memory-augmented input W_m[x; m] (Mem2Mem Eqs. 13–20; the CPU
// twin is Decoding.mem2memStep):
//
//	c   = Σ_j β_j h_j,  β = softmax(v·tanh(W_q x + W_k h_j))      (Eqs. 7, 17)
//	z_k = σ(W_z1 x + W_z2 c + W_z3 M_k), u_k = tanh(W_u1 x + W_u2 c + W_u3 M_k)
//	M_k ← z_k ⊙ M_k + (1 − z_k) ⊙ u_k                             (Eqs. 18–20)
//	m   = Σ_k ψ_k M_k,  ψ = softmax(v'·tanh(W'_q x + W'_k M_k))    (Eqs. 13–14)
//	x   ← W_m [x; m]                                               (Eq. 15)
func (s *devDecoding) mem2memStep() error {
	R, d, e := s.rows, s.m.Config.DModel, s.e
	mm := s.w.m2m
	r, da, n := mm.slots, mm.hidden, s.n
	B := s.studies
	t := newTry()
	t.do(s.studyIDs())
	// Eq. 17: the context over the study's encoder states.
	t.do(e.Gather(s.m2mKeysRows, s.m2mKeys, s.ids, R, B, n*da, 1))
	t.do(e.Gather(s.m2mHRows, s.m2mH, s.ids, R, B, n*d, 1))
	t.do(s.w.linear(s.m2mQ, s.x, R, mm.ctxQ))
	t.do(e.Add(s.m2mSum, s.m2mKeysRows, s.m2mQ, R*n, da, accel.PerGroup(R, n)))
	t.do(e.Tanh(s.m2mSum, s.m2mSum, R*n*da))
	t.do(s.w.linear(s.m2mScores, s.m2mSum, R*n, mm.ctxV))
	t.do(e.Softmax(s.m2mScores, s.m2mScores, R, n))
	t.do(e.GemmStrided(false, false, R, 1, d, n, 1, s.m2mScores, n, n, s.m2mHRows, d, n*d, 0, s.m2mC, d, d))
	// Eqs. 18–20: the gated write, into memAlt.
	for _, g := range []struct {
		in      accel.Ptr
		h, c, m devLinear
		pre     accel.Ptr
		squash  func(dst, src accel.Ptr, n int) error
	}{{s.m2mInZ, mm.hz, mm.cz, mm.mz, s.m2mZ, e.Sigmoid}, {s.m2mInU, mm.hu, mm.cu, mm.mu, s.m2mU, e.Tanh}} {
		t.do(s.w.linear(g.in, s.x, R, g.h))
		t.do(s.w.linear(s.tmp, s.m2mC, R, g.c))
		t.do(e.Add(g.in, g.in, s.tmp, R, d, accel.Same(R)))
		t.do(s.w.linear(g.pre, s.memory, R*r, g.m))
		t.do(e.Add(g.pre, g.pre, g.in, R*r, d, accel.PerGroup(R, r)))
		t.do(g.squash(g.pre, g.pre, R*r*d))
	}
	next := s.memAlt
	t.do(e.Scale(next, s.m2mU, -1, R*r*d))
	t.do(e.Add(next, s.memory, next, R*r, d, accel.Same(R*r))) // M − u
	t.do(e.Mul(next, next, s.m2mZ, R*r, d, accel.Same(R*r)))   // z ⊙ (M − u)
	t.do(e.Add(next, next, s.m2mU, R*r, d, accel.Same(R*r)))   // + u
	// Eqs. 13–14: read the new memory with x.
	t.do(s.w.linear(s.m2mQ, s.x, R, mm.readQ))
	t.do(s.w.linear(s.m2mSum, next, R*r, mm.readK))
	t.do(e.Add(s.m2mSum, s.m2mSum, s.m2mQ, R*r, da, accel.PerGroup(R, r)))
	t.do(e.Tanh(s.m2mSum, s.m2mSum, R*r*da))
	t.do(s.w.linear(s.m2mScores, s.m2mSum, R*r, mm.readV))
	t.do(e.Softmax(s.m2mScores, s.m2mScores, R, r))
	t.do(e.GemmStrided(false, false, R, 1, d, r, 1, s.m2mScores, r, r, next, d, r*d, 0, s.m2mRead, d, d))
	// Eq. 15: x ← W_m [x; m], the two column blocks of W_m.
	w := mm.combine
	t.do(e.GemmStrided(false, true, 1, R, d, d, 1, s.x, d, 0, w.w, w.in, 0, 0, s.tmp, d, 0))
	t.do(e.GemmStrided(false, true, 1, R, d, d, 1, s.m2mRead, d, 0, w.w.Add(d), w.in, 0, 1, s.tmp, d, 0))
	t.do(e.CopyDevice(s.x, s.tmp, f32Bytes(R*d)))
	if t.err == nil {
		s.memory, s.memAlt = s.memAlt, s.memory
	}
	return t.err
}
