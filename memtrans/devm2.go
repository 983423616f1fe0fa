package memtrans

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/mesh"
)

// devM2Layer is one meshed decoder layer on a device.
type devM2Layer struct {
	selfQ, selfK, selfV, selfO devLinear
	encQ, encO                 devLinear
	ff1, ff2                   devLinear
	alpha                      []devLinear // (D, 2D) each: [S; C_i] as two column blocks
	selfNorm, encNorm, ffNorm  devNorm
}

// devM2Weights is an M2Transformer's decoder on a device.
type devM2Weights struct {
	devStore
	m          *M2Transformer
	words, pos accel.Ptr
	layers     []devM2Layer
	out        devLinear
}

func m2DevNorm(s *devStore, ln *mesh.LayerNorm) devNorm {
	return devNorm{gamma: s.put(ln.Weight), beta: s.put(ln.Bias), eps: float32(ln.Eps), kind: accel.NormStandard}
}

// uploadM2Weights copies m's decoder weights to e.
func uploadM2Weights(e accel.Engine, m *M2Transformer) (*devM2Weights, error) {
	w := &devM2Weights{devStore: devStore{e: e}, m: m}
	dec := m.Decoder
	w.words, w.pos = w.put(dec.WordEmb), w.put(dec.PosEmb)
	for _, l := range dec.Layers {
		sa, ea := l.SelfAtt.Attention, l.EncAtt.Attention
		dl := devM2Layer{
			selfQ: w.lin(sa.FCQ), selfK: w.lin(sa.FCK), selfV: w.lin(sa.FCV), selfO: w.lin(sa.FCO),
			encQ: w.lin(ea.FCQ), encO: w.lin(ea.FCO), ff1: w.lin(l.PWFF.FC1), ff2: w.lin(l.PWFF.FC2),
			selfNorm: m2DevNorm(&w.devStore, l.SelfAtt.Norm), encNorm: m2DevNorm(&w.devStore, l.EncAtt.Norm),
			ffNorm: m2DevNorm(&w.devStore, l.PWFF.Norm),
		}
		for _, a := range l.Alpha {
			dl.alpha = append(dl.alpha, w.lin(a))
		}
		w.layers = append(w.layers, dl)
	}
	w.out = w.lin(dec.FC)
	if err := w.done(); err != nil {
		return nil, err
	}
	return w, nil
}

// decodeOnDevice is the facade's M² decoding with the steps on a device.
func (m *M2Transformer) decodeOnDevice(ctx context.Context, w *devM2Weights, feats *radgen.Tensor, o genOptions) ([]studyResult, int, error) {
	dec, err := startDeviceM2(w, feats)
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	return m2Facade{m}.decodeWith(ctx, dec, o)
}

// devM2Decoding is M2Decoding on a device: the same step (Cornia et al.
// 2020, Eqs. 4–9), the meshed cross-attention's per-level products as
// strided batched GEMMs over studies and heads, and Reorder gathering the
// caches. Tokens must not be <pad> (the facade never feeds it), and the
// encoder masks no region (mesh.PadNone).
type devM2Decoding struct {
	devRows
	w                                  *devM2Weights
	levels, nr                         int // encoder levels N, regions per study
	selfK, selfV                       []accel.Ptr
	crossK, crossV                     []accel.Ptr // per layer (B, N, nr, h·d_k|h·d_v)
	x, s, q, k, v, ctx, tmp, acc, gate accel.Ptr
	cs, es, scores, crossScores, ff    accel.Ptr
}

// startDeviceM2 encodes feats on the CPU and returns a device decoding
// with one row per study.
func startDeviceM2(w *devM2Weights, feats *radgen.Tensor) (*devM2Decoding, error) {
	m := w.m
	c := m.Config
	if c.Padding != mesh.PadNone {
		return nil, fmt.Errorf("%w: M² with region padding %v decodes on the CPU only", ErrDevice, c.Padding)
	}
	if feats.Is64() {
		feats = feats.To32()
	}
	g := radgen.NoGrad()
	enc, err := m.Encode(g, feats)
	if err != nil {
		return nil, err
	}
	levels := enc.Levels
	sources := m.Decoder.Sources(g, levels)
	b, nr := levels.Dim(0), levels.Dim(2)
	s := &devM2Decoding{devRows: newDevRows(w.e, b), w: w, levels: sources[0].Dim(1), nr: nr}
	for i, l := range m.Decoder.Layers {
		att := l.EncAtt.Attention
		src := sources[i]
		rows := src.Dim(0) * src.Dim(1) * src.Dim(2)
		k := make([]float32, rows*att.Heads*att.DK)
		v := make([]float32, rows*att.Heads*att.DV)
		m2DenseOf(att.FCK).apply(k, src.Data(), rows)
		m2DenseOf(att.FCV).apply(v, src.Data(), rows)
		pk, err := s.upload(k)
		if err != nil {
			s.Close()
			return nil, err
		}
		pv, err := s.upload(v)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.crossK, s.crossV = append(s.crossK, pk), append(s.crossV, pv)
	}
	if err := s.ensure(b, c.MaxLen); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *devM2Decoding) dims() (d, h, dk, dv, dff, vocab int) {
	c := s.w.m.Config
	return c.DModel, c.Heads, c.DK, c.DV, c.DFF, c.Vocab
}

// ensure sizes the caches and scratch for rows rows and positions
// positions, keeping the filled ones.
func (s *devM2Decoding) ensure(rows, positions int) error {
	if rows <= s.rowCap && positions <= s.posCap {
		return nil
	}
	d, h, dk, dv, dff, vocab := s.dims()
	rc, pc := max(rows, s.rowCap), max(positions, s.posCap)
	for l := range s.w.layers {
		if l >= len(s.selfK) {
			s.selfK, s.selfV = append(s.selfK, 0), append(s.selfV, 0)
		}
		var err error
		if s.selfK[l], err = s.growCache(s.selfK[l], h, dk, rc, pc); err != nil {
			return err
		}
		if s.selfV[l], err = s.growCache(s.selfV[l], h, dv, rc, pc); err != nil {
			return err
		}
	}
	n, nr := s.levels, s.nr
	sizes := []struct {
		p *accel.Ptr
		n int
	}{
		{&s.spareK, rc * h * pc * dk}, {&s.spareV, rc * h * pc * dv},
		{&s.x, rc * d}, {&s.s, rc * d}, {&s.q, rc * h * dk}, {&s.k, rc * h * dk}, {&s.v, rc * h * dv},
		{&s.ctx, rc * h * dv}, {&s.tmp, rc * d}, {&s.acc, rc * d}, {&s.gate, rc * d},
		{&s.cs, n * rc * h * dv}, {&s.es, n * rc * d}, {&s.scores, rc * h * pc}, {&s.crossScores, n * h * rc * nr},
		{&s.ff, rc * dff}, {&s.logits, rc * vocab}, {&s.ids, rc}, {&s.tokIDs, rc},
	}
	for _, b := range sizes {
		if err := s.realloc(b.p, b.n, 0); err != nil {
			return err
		}
	}
	s.rowCap, s.posCap = rc, pc
	return nil
}

// VocabSize implements decode.Model.
func (s *devM2Decoding) VocabSize() int { return s.w.m.Config.Vocab }

// AttentionWidth implements decode.AttentionRecorder: regions per study.
func (s *devM2Decoding) AttentionWidth() int { return s.nr }

// Attention implements decode.AttentionRecorder: the last layer's
// cross-attention of the last step averaged over levels and heads, as
// M2Decoding records it.
func (s *devM2Decoding) Attention(dst []float32) error {
	_, h, _, _, _, _ := s.dims()
	return s.meanAttention(dst, s.crossScores, s.levels*h, s.rows, s.nr)
}

// Reorder implements decode.Model.
func (s *devM2Decoding) Reorder(src []int) error {
	if err := s.checkReorder(src); err != nil {
		return err
	}
	if err := s.ensure(len(src), s.t+1); err != nil {
		return err
	}
	_, h, dk, dv, _, _ := s.dims()
	return s.reorderCaches(src, s.selfK, s.selfV, h*s.posCap*dk, h*s.posCap*dv, nil, nil, 0)
}

// Step implements decode.Model.
func (s *devM2Decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
	c := s.w.m.Config
	R, V := s.rows, c.Vocab
	if err := checkStep(ctx, tokens, dst, R, V, s.t, s.w.m.Decoder.MaxLen()); err != nil {
		return err
	}
	for _, tok := range tokens {
		if tok == c.Pad {
			return fmt.Errorf("%w: <pad> fed to a device M² decoding", ErrDevice)
		}
	}
	if err := s.ensure(R, s.t+1); err != nil {
		return err
	}
	d := c.DModel
	try := newTry()
	// Y = word_emb(w) + pos_emb(t+1) (no √D scaling in M²).
	try.do(s.embed(s.x, s.w.words, s.w.pos.Add((s.t+1)*d), tokens, V, d, 1))
	for l := range s.w.layers {
		if try.err != nil {
			break
		}
		try.do(s.layerStep(l))
		try.do(ctx.Err())
	}
	try.do(s.w.linear(s.logits, s.x, R, s.w.out))
	if try.err != nil {
		return try.err
	}
	return s.emit(dst, V)
}

// addNorm writes LayerNorm(x + y) into dst (dst may be y), rows rows, y
// broadcast by bc.
func (s *devM2Decoding) addNorm(dst, x, y accel.Ptr, rows int, bc accel.Broadcast, n devNorm) error {
	d := s.w.m.Config.DModel
	if err := s.e.Add(dst, y, x, rows, d, bc); err != nil {
		return err
	}
	return s.e.LayerNorm(dst, dst, n.gamma, n.beta, rows, d, n.eps, n.kind)
}

// layerStep runs meshed decoder layer l (Cornia et al. 2020, Eq. 9) on s.x.
func (s *devM2Decoding) layerStep(l int) error {
	R, e := s.rows, s.e
	d, h, dk, dv, _, _ := s.dims()
	hk, hv := h*dk, h*dv
	L := s.w.layers[l]
	scale := float32(1 / math.Sqrt(float64(dk)))
	t, pc := s.t, s.posCap
	try := newTry()

	// S = AddNorm(S_mask(Y)) over the cached prefix.
	try.do(s.w.linear(s.q, s.x, R, L.selfQ))
	try.do(s.w.linear(s.k, s.x, R, L.selfK))
	try.do(s.w.linear(s.v, s.x, R, L.selfV))
	try.do(e.AppendHeads(s.selfK[l], s.k, R, 1, h, dk, hk, 0, pc, t))
	try.do(e.AppendHeads(s.selfV[l], s.v, R, 1, h, dv, hv, 0, pc, t))
	try.do(e.GemmStrided(false, true, R*h, 1, t+1, dk, scale, s.q, dk, dk, s.selfK[l], dk, pc*dk, 0, s.scores, t+1, t+1))
	try.do(e.Softmax(s.scores, s.scores, R*h, t+1))
	try.do(e.GemmStrided(false, false, R*h, 1, dv, t+1, 1, s.scores, t+1, t+1, s.selfV[l], dv, pc*dv, 0, s.ctx, dv, dv))
	try.do(s.w.linear(s.tmp, s.ctx, R, L.selfO))
	try.do(s.addNorm(s.s, s.x, s.tmp, R, accel.Same(R), L.selfNorm))

	// C_i = AddNorm(C(X̃ⁱ, S)) for every level i (Eq. 7), one shared query.
	try.do(s.w.linear(s.q, s.s, R, L.encQ))
	n, nr := s.levels, s.nr
	keys, vals, groups, per, err := s.crossSource(s.crossK[l], s.crossV[l], n*nr*hk, n*nr*hv)
	try.do(err)
	for i := 0; i < n && try.err == nil; i++ {
		for hd := 0; hd < h && try.err == nil; hd++ {
			try.do(e.GemmStrided(false, true, groups, per, nr, dk, scale, s.q.Add(hd*dk), hk, per*hk,
				keys.Add(i*nr*hk+hd*dk), hk, n*nr*hk, 0, s.crossScores.Add((i*h+hd)*R*nr), nr, per*nr))
		}
	}
	try.do(e.Softmax(s.crossScores, s.crossScores, n*h*R, nr))
	for i := 0; i < n && try.err == nil; i++ {
		for hd := 0; hd < h && try.err == nil; hd++ {
			try.do(e.GemmStrided(false, false, groups, per, dv, nr, 1, s.crossScores.Add((i*h+hd)*R*nr), nr, per*nr,
				vals.Add(i*nr*hv+hd*dv), hv, n*nr*hv, 0, s.cs.Add(i*R*hv+hd*dv), hv, per*hv))
		}
	}
	try.do(s.w.linear(s.es, s.cs, n*R, L.encO))
	try.do(s.addNorm(s.es, s.s, s.es, n*R, accel.Broadcast{Rows: R, Div: 1}, L.encNorm))

	// M = Σ_i σ(W_i [S; C_i] + b_i) ⊙ C_i / √N (Eqs. 6, 8).
	for i := 0; i < n && try.err == nil; i++ {
		a, ci := L.alpha[i], s.es.Add(i*R*d)
		try.do(e.GemmStrided(false, true, 1, R, d, d, 1, s.s, d, 0, a.w, a.in, 0, 0, s.gate, d, 0))
		try.do(e.GemmStrided(false, true, 1, R, d, d, 1, ci, d, 0, a.w.Add(d), a.in, 0, 1, s.gate, d, 0))
		try.do(e.Add(s.gate, s.gate, a.b, R, d, accel.RowVector))
		try.do(e.Sigmoid(s.gate, s.gate, R*d))
		if i == 0 {
			try.do(e.Mul(s.acc, s.gate, ci, R, d, accel.Same(R)))
		} else {
			try.do(e.Mul(s.gate, s.gate, ci, R, d, accel.Same(R)))
			try.do(e.Add(s.acc, s.acc, s.gate, R, d, accel.Same(R)))
		}
	}
	try.do(e.Scale(s.acc, s.acc, float32(1/math.Sqrt(float64(n))), R*d))

	// Ỹ = AddNorm(F(M)) (Eqs. 4, 9).
	try.do(s.w.linear(s.ff, s.acc, R, L.ff1))
	try.do(e.ReLU(s.ff, s.ff, R*L.ff1.out))
	try.do(s.w.linear(s.tmp, s.ff, R, L.ff2))
	try.do(s.addNorm(s.x, s.acc, s.tmp, R, accel.Same(R), L.ffNorm))
	return try.err
}

var (
	_ decode.Model             = (*devM2Decoding)(nil)
	_ decode.AttentionRecorder = (*devM2Decoding)(nil)
	_ deviceWeights            = (*devM2Weights)(nil)
	_ deviceWeights            = (*devWeights)(nil)
)
