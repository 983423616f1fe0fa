package memtrans

import (
	"context"
	"fmt"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/f32"
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
// Each weight matrix is read once per step for all rows. After the first
// steps have sized the buffers, Step and Reorder allocate nothing.
//
// A Decoding belongs to one goroutine; the Transformer it came from may
// serve many Decodings concurrently.
type Decoding struct {
	m       *Transformer
	studies int
	rows    int
	t       int     // positions consumed so far
	study   []int32 // row → study

	// anc[r·cap + j] is the slab row that holds position j of row r.
	anc, ancNext []int32
	posCap       int

	selfK, selfV [][]float32 // per layer: [posCap][rowCap][D]
	rowCap       int
	crossK       [][]float32 // per layer: [studies][N][D]
	crossV       [][]float32
	n            int // patches per study

	memory, memNext []float32 // [rows][S·D]

	// Mem2Mem: each study's encoder states H (B, N, D) and context keys
	// W_k H (B, N, d_a), computed once and read by every row of the study.
	m2mH, m2mKeys *radgen.Tensor
	studyIdx      []int

	// scratch, sized for rowCap rows
	x, h, q, k, v, ctx, ff, tmp []float32
	gamma, beta                 []float32
	inv                         []float32
	mlpHidden                   []float32
	scores                      []float32
	logits                      []float32
	attn                        []float32 // last layer's cross-attention, averaged over heads [rows][N]
	rmKV                        []float32
	gates                       []float32
	rowTmp                      []int32
}

var (
	_ decode.Model             = (*Decoding)(nil)
	_ decode.AttentionRecorder = (*Decoding)(nil)
)

// StartDecoding encodes visual features (B, N, d_vf) and returns a decoding
// state with one row per study, ready for a decode strategy.
func (m *Transformer) StartDecoding(feats *radgen.Tensor) (*Decoding, error) {
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
	s := &Decoding{m: m, studies: b, rows: b, n: n}
	for i, l := range m.Decoder.Layers {
		// K and V of the source attention, once per study (B, N, D), from
		// the layer's source: the encoder output, or its multi-view
		// LN(g_i(S) + S_N), which is per study too, so the per-step cost
		// does not change.
		src := enc.Sources[i]
		s.crossK = append(s.crossK, l.SrcAttn.Linears[1].Forward(g, src).Data())
		s.crossV = append(s.crossV, l.SrcAttn.Linears[2].Forward(g, src).Data())
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
func (s *Decoding) VocabSize() int { return s.m.Config.Vocab }

// Rows implements decode.Model.
func (s *Decoding) Rows() int { return s.rows }

// Position returns how many tokens each row has consumed.
func (s *Decoding) Position() int { return s.t }

// AttentionWidth implements decode.AttentionRecorder: the number of image
// patches of a study.
func (s *Decoding) AttentionWidth() int { return s.n }

// Attention implements decode.AttentionRecorder: after a Step, the
// last decoder layer's cross-attention over the patches, averaged over
// heads, [Rows() × N].
func (s *Decoding) Attention(dst []float32) error {
	if len(dst) < s.rows*s.n {
		return fmt.Errorf("%w: attention buffer of %d for %d×%d", decode.ErrShape, len(dst), s.rows, s.n)
	}
	copy(dst, s.attn[:s.rows*s.n])
	return nil
}

// ensure sizes every buffer for rows rows and positions positions,
// preserving contents.
func (s *Decoding) ensure(rows, positions int) {
	c := s.m.Config
	d := c.DModel
	sd := c.MemorySlots * d
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
	for _, p := range []*[]float32{&s.x, &s.h, &s.q, &s.k, &s.v, &s.ctx, &s.tmp} {
		*p = grow(*p, R*d)
	}
	s.ff = grow(s.ff, R*max(c.DFF, d+sd))
	s.gamma = grow(s.gamma, R*d)
	s.beta = grow(s.beta, R*d)
	s.inv = grow(s.inv, R*max(c.MemorySlots, 1))
	s.mlpHidden = grow(s.mlpHidden, R*d)
	s.scores = grow(s.scores, max(newPosCap, s.n, c.MemorySlots+1))
	s.logits = grow(s.logits, R*c.Vocab)
	s.attn = grow(s.attn, R*s.n)
	s.rmKV = grow(s.rmKV, R*(c.MemorySlots+1)*d*3)
	s.gates = grow(s.gates, R*c.MemorySlots*2*d)
	if cap(s.rowTmp) < R {
		s.rowTmp = make([]int32, R)
	}
	s.rowCap, s.posCap = newRowCap, newPosCap
}

// Reorder implements decode.Model: row i becomes a copy of row src[i].
func (s *Decoding) Reorder(src []int) error {
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

// linearRows computes dst[r] = W·x[r] + b for rows rows (x is [rows][in]).
func linearRows(dst, x []float32, rows int, l *radgen.Linear) {
	out, in := l.Weight.Dim(0), l.Weight.Dim(1)
	beta := float32(0)
	if l.Bias != nil {
		b := l.Bias.Data()
		for r := 0; r < rows; r++ {
			copy(dst[r*out:(r+1)*out], b)
		}
		beta = 1
	}
	f32.Gemm(false, true, rows, out, in, 1, x[:rows*in], in, l.Weight.Data(), in, beta, dst[:rows*out], out)
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

// Step implements decode.Model: it consumes one token per row and writes
// the next token's log-probabilities.
func (s *Decoding) Step(ctx context.Context, tokens []int, dst []float32) error {
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
	if s.t >= c.PositionLen {
		return fmt.Errorf("memtrans: position %d beyond the positional table (%d)", s.t, c.PositionLen)
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
	for l, layer := range s.m.Decoder.Layers {
		s.layerStep(l, layer, x)
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
	linearRows(logits, in, R, s.m.Logit)
	kernels.LogSoftmax(dst[:R*V], logits, V)
	s.t++
	return nil
}

// plainNorm applies R2Gen's LayerNorm with shared γ, β to R rows.
func (s *Decoding) plainNorm(dst, x, gamma, beta []float32, R int) {
	d := len(gamma)
	kernels.Normalize(dst[:R*d], s.inv[:R], x[:R*d], d, 1e-6, kernels.NormR2Gen)
	for r := 0; r < R; r++ {
		row := dst[r*d : (r+1)*d]
		for i := range row {
			row[i] = row[i]*gamma[i] + beta[i]
		}
	}
}

// condNorm applies sublayer norm i of a decoder layer: MCLN with
// γ̂ = γ + f_mlp(M_t), β̂ = β + f_mlp(M_t) (R2Gen Eqs. 11–15), or the plain
// norm of the BASE variants.
func (s *Decoding) condNorm(dst, x []float32, layer *DecoderLayer, i int) {
	R, d := s.rows, s.m.Config.DModel
	n := layer.norms[i]
	if n.cond == nil {
		s.plainNorm(dst, x, n.plain.Gamma.Data(), n.plain.Beta.Data(), R)
		return
	}
	mlp := func(out []float32, m *mlpWeights, base []float32) {
		hid := s.mlpHidden[:R*d]
		linearRows(hid, s.memory, R, m.L0)
		relu(hid)
		linearRows(out, hid, R, m.L2)
		for r := 0; r < R; r++ {
			addTo(out[r*d:(r+1)*d], base)
		}
	}
	gamma, beta := s.gamma[:R*d], s.beta[:R*d]
	mlp(gamma, (*mlpWeights)(n.cond.MLPGamma), n.cond.Gamma.Data())
	mlp(beta, (*mlpWeights)(n.cond.MLPBeta), n.cond.Beta.Data())
	kernels.Normalize(dst[:R*d], s.inv[:R], x[:R*d], d, n.cond.Eps, kernels.NormR2Gen)
	for j := range dst[:R*d] {
		dst[j] = dst[j]*gamma[j] + beta[j]
	}
}

type mlpWeights struct{ L0, L2 *radgen.Linear }

// layerStep runs decoder layer l on x (R rows) in place.
func (s *Decoding) layerStep(l int, layer *DecoderLayer, x []float32) {
	R, d := s.rows, s.m.Config.DModel
	h := s.h[:R*d]
	heads := layer.SelfAttn.Heads
	dk := d / heads
	scale := float32(1 / math.Sqrt(float64(dk)))
	t := s.t
	rc, pc := s.rowCap, s.posCap

	// Self-attention over the cached prefix.
	s.condNorm(h, x, layer, 0)
	q := s.q[:R*d]
	linearRows(q, h, R, layer.SelfAttn.Linears[0])
	slabK := s.selfK[l][t*rc*d : (t*rc+R)*d]
	slabV := s.selfV[l][t*rc*d : (t*rc+R)*d]
	linearRows(slabK, h, R, layer.SelfAttn.Linears[1])
	linearRows(slabV, h, R, layer.SelfAttn.Linears[2])
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
				sc[j] = dot(qh, kv[:dk]) * scale
			}
			softmaxInPlace(sc)
			out := ctx[r*d+hd*dk : r*d+hd*dk+dk]
			for j, a := range anc {
				axpy(out, s.selfV[l][(j*rc+int(a))*d+hd*dk:][:dk], sc[j])
			}
		}
	}
	linearRows(s.tmp[:R*d], ctx, R, layer.SelfAttn.Linears[3])
	addTo(x, s.tmp[:R*d])

	// Cross-attention over the study's patches (keys/values shared by rows).
	s.condNorm(h, x, layer, 1)
	linearRows(q, h, R, layer.SrcAttn.Linears[0])
	clear(ctx)
	n := s.n
	last := l == len(s.m.Decoder.Layers)-1
	if last {
		clear(s.attn[:R*n])
	}
	for r := 0; r < R; r++ {
		st := int(s.study[r])
		keys := s.crossK[l][st*n*d : (st+1)*n*d]
		vals := s.crossV[l][st*n*d : (st+1)*n*d]
		for hd := 0; hd < heads; hd++ {
			qh := q[r*d+hd*dk : r*d+hd*dk+dk]
			sc := s.scores[:n]
			for j := 0; j < n; j++ {
				sc[j] = dot(qh, keys[j*d+hd*dk:j*d+hd*dk+dk]) * scale
			}
			softmaxInPlace(sc)
			if last {
				axpy(s.attn[r*n:(r+1)*n], sc, 1/float32(heads))
			}
			out := ctx[r*d+hd*dk : r*d+hd*dk+dk]
			for j := 0; j < n; j++ {
				axpy(out, vals[j*d+hd*dk:j*d+hd*dk+dk], sc[j])
			}
		}
	}
	linearRows(s.tmp[:R*d], ctx, R, layer.SrcAttn.Linears[3])
	addTo(x, s.tmp[:R*d])

	// Feed-forward.
	s.condNorm(h, x, layer, 2)
	dff := layer.FeedForward.W1.Weight.Dim(0)
	ff := s.ff[:R*dff]
	linearRows(ff, h, R, layer.FeedForward.W1)
	relu(ff)
	linearRows(s.tmp[:R*d], ff, R, layer.FeedForward.W2)
	addTo(x, s.tmp[:R*d])
}

// memoryStep advances every row's relational memory by one input
// (R2Gen Eqs. 6–10; see relmem.Relational.Step).
func (s *Decoding) memoryStep(y []float32) {
	rm := s.m.Memory
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
	keys := s.rmKV[R*(S+1)*d : 2*R*(S+1)*d]
	vals := s.rmKV[2*R*(S+1)*d : 3*R*(S+1)*d]
	linearRows(keys, kvIn, R*(S+1), rm.Attn.Linears[1])
	linearRows(vals, kvIn, R*(S+1), rm.Attn.Linears[2])
	q := s.memNext[:R*sd] // scratch for the queries
	linearRows(q, s.memory, R*S, rm.Attn.Linears[0])
	ctx := s.gates[:R*sd] // scratch for the attention context
	clear(ctx)
	for r := 0; r < R; r++ {
		for i := 0; i < S; i++ {
			for hd := 0; hd < heads; hd++ {
				qh := q[(r*S+i)*d+hd*dk:][:dk]
				sc := s.scores[:S+1]
				for j := 0; j <= S; j++ {
					sc[j] = dot(qh, keys[(r*(S+1)+j)*d+hd*dk:][:dk]) * scale
				}
				softmaxInPlace(sc)
				out := ctx[(r*S+i)*d+hd*dk:][:dk]
				for j := 0; j <= S; j++ {
					axpy(out, vals[(r*(S+1)+j)*d+hd*dk:][:dk], sc[j])
				}
			}
		}
	}
	// next = M + Attn
	next := s.memNext[:R*sd]
	linearRows(next, ctx, R*S, rm.Attn.Linears[3])
	addTo(next, s.memory[:R*sd])
	// next += ReLU(mlp.2(ReLU(mlp.0(next))))
	hid := s.rmKV[:R*sd]
	linearRows(hid, next, R*S, rm.MLP0)
	relu(hid)
	mo := s.rmKV[R*sd : 2*R*sd]
	linearRows(mo, hid, R*S, rm.MLP2)
	relu(mo)
	addTo(next, mo)
	// gates = W·y + U·tanh(M): (R, S, 2D)
	gates := s.gates[:R*S*2*d]
	th := s.rmKV[:R*sd]
	for i, v := range s.memory[:R*sd] {
		th[i] = float32(math.Tanh(float64(v)))
	}
	linearRows(gates, th, R*S, rm.U)
	wy := s.rmKV[R*sd : R*sd+R*2*d]
	linearRows(wy, y, R, rm.W)
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
				ig := sigmoid(g[j])
				fg := sigmoid(g[d+j])
				nx[j] = ig*float32(math.Tanh(float64(nx[j]))) + fg*mo[j]
			}
		}
	}
	s.memory, s.memNext = s.memNext, s.memory
}

// mem2memStep writes every row's token into its Mem2Mem memory, reads it,
// and replaces the rows' decoder input x by W_m[x; m] (Mem2Mem Eqs. 13–20;
// see relmem.Mem2Mem.Forward). Its cost per step is that of r slots and the
// study's N encoder states, independent of the position.
func (s *Decoding) mem2memStep(x []float32) {
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

func softmaxInPlace(x []float32) { kernels.Softmax(x, x, len(x)) }
