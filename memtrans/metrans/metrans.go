package metrans

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/vision"
)

// Config holds the architecture of a METransformer. Sizes are data:
// they travel with the weights. Token ids follow R2Gen: id 0 is BOS, EOS and
// padding at once.
type Config struct {
	DIn            int     `json:"d_in"`            // visual feature width (2048 for ResNet-101 patches)
	Patches        int     `json:"patches"`         // N, visual tokens per study
	Experts        int     `json:"experts"`         // M, expert tokens = candidate reports per study
	DModel         int     `json:"d_model"`         // token width D (also D_B of the bilinear blocks)
	Heads          int     `json:"heads"`           // ViT attention heads
	DFF            int     `json:"d_ff"`            // ViT MLP width
	DMid           int     `json:"d_mid"`           // width of the bilinear blocks' squeeze layer
	ViTLayers      int     `json:"vit_layers"`      // ViT blocks (Eqs. 2–3)
	BilinearLayers int     `json:"bilinear_layers"` // bilinear encoder layers (Eq. 9)
	DecoderLayers  int     `json:"decoder_layers"`  // bilinear decoder layers (Eqs. 11–13)
	Vocab          int     `json:"vocab"`           // output size: tokens + 1 (id 0 is bos/eos/pad)
	MaxSeqLen      int     `json:"max_seq_length"`  // longest report in tokens, EOS included
	Lambda         float64 `json:"lambda"`          // weight of the orthogonal loss
	Dropout        float64 `json:"dropout"`         // in training
}

// Tiny returns a small configuration for demos and tests.
func Tiny(vocab, dIn, patches int) Config {
	return Config{DIn: dIn, Patches: patches, Experts: 3, DModel: 32, Heads: 4, DFF: 64, DMid: 16,
		ViTLayers: 1, BilinearLayers: 1, DecoderLayers: 2, Vocab: vocab, MaxSeqLen: 60, Lambda: 1, Dropout: 0.1}
}

// validateHard is validateShape and the constructors' hard budget: 2^34
// parameters and 2^36 activation values, beyond which tensor shapes could
// overflow (the facade's budget is far lower).
func (c Config) validateHard() error {
	if err := c.validateShape(); err != nil {
		return err
	}
	return c.Cost(c.Patches).CheckHard("METransformer")
}

// maxLayers bounds every layer count of a configuration: far beyond any
// published model, and small enough that a forged count of tiny layers
// cannot exhaust memory on per-layer bookkeeping.
const maxLayers = 1024

// validateShape reports the first inconsistency in c other than its size.
func (c Config) validateShape() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: METransformer: "+format, append([]any{arch.ErrConfig}, a...)...)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"d_in", c.DIn}, {"patches", c.Patches}, {"experts", c.Experts}, {"d_model", c.DModel}, {"heads", c.Heads},
		{"d_ff", c.DFF}, {"d_mid", c.DMid}, {"vit_layers", c.ViTLayers}, {"bilinear_layers", c.BilinearLayers},
		{"decoder_layers", c.DecoderLayers}, {"vocab", c.Vocab}, {"max_seq_length", c.MaxSeqLen}} {
		if f.v <= 0 || f.v > 1<<20 {
			return bad("%s = %d", f.name, f.v)
		}
	}
	if c.ViTLayers > maxLayers || c.BilinearLayers > maxLayers || c.DecoderLayers > maxLayers {
		return bad("vit_layers = %d, bilinear_layers = %d, decoder_layers = %d (at most %d each)", c.ViTLayers, c.BilinearLayers, c.DecoderLayers, maxLayers)
	}
	if c.DModel%c.Heads != 0 {
		return bad("d_model %d not divisible by %d heads", c.DModel, c.Heads)
	}
	if c.Lambda < 0 || math.IsNaN(c.Lambda) || math.IsInf(c.Lambda, 0) {
		return bad("lambda %v", c.Lambda)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return bad("dropout %v outside [0, 1)", c.Dropout)
	}
	return nil
}

// EncoderLayer is a bilinear encoder layer (Eq. 9):
//
//	ẑ_e⁽ⁿ⁾ = EBA(ẑ_e⁽ⁿ⁻¹⁾, ẑ_v⁽ⁿ⁻¹⁾)
//	ẑ_v⁽ⁿ⁾ = LN(W_eⁿ[ẑ_e⁽ⁿ⁻¹⁾; ẑ_v⁽ⁿ⁻¹⁾] + ẑ_v⁽ⁿ⁻¹⁾)
//
// The concatenation pairs M expert rows with N visual rows, which the notes
// do not reconcile; as in X-Linear's encoder, where the attended (global)
// feature is concatenated to every region, each visual token is
// concatenated with the mean of the M expert tokens.
type EncoderLayer struct {
	EBA  *mesh.BilinearAttention // experts attend the visual tokens
	Fuse *radgen.Linear          // W_eⁿ: 2D → D
	Norm *mesh.LayerNorm
}

// Forward maps expert tokens e (B, M, D) and visual tokens v (B, N, D) to
// the next layer's.
func (l *EncoderLayer) Forward(g *radgen.Graph, e, v *radgen.Tensor) (*radgen.Tensor, *radgen.Tensor) {
	b, m, n, d := e.Dim(0), e.Dim(1), v.Dim(1), v.Dim(2)
	next := l.EBA.Forward(g, e, v, v, nil)
	pooled := g.MatMul(constFill(e, 1/float64(m), b, 1, m), e, false) // (B, 1, D): mean over experts
	wide := g.Add(constFill(e, 0, b, n, d), pooled)                   // (B, N, D)
	vn := l.Norm.Forward(g, g.Add(l.Fuse.Forward(g, g.Concat(2, wide, v)), v))
	return next, vn
}

func (l *EncoderLayer) visit(visit func(string, *radgen.Tensor)) {
	l.EBA.VisitParams(radgen.Prefixed("eba.", visit))
	l.Fuse.VisitParams(radgen.Prefixed("fuse.", visit))
	l.Norm.VisitParams(radgen.Prefixed("norm.", visit))
}

// DecoderLayer is a bilinear decoder layer (Eqs. 11–13):
//
//	E_mid = LN(EBA_mask(E_r⁽ⁱ⁻¹⁾) + E_r⁽ⁱ⁻¹⁾)              (Eq. 11)
//	E_c   = LN(EBA_cross(E_mid, f_v) + E_mid)                (Eq. 12)
//	E_r⁽ⁱ⁾ = LN(W_d⁽ⁱ⁾[E_r⁽ⁱ⁻¹⁾; E_c] + E_r⁽ⁱ⁻¹⁾)          (Eq. 13)
//
// EBA_mask is bilinear self-attention of the words under a causal mask;
// EBA_cross attends the expert-adjusted visual tokens f_v. The next layer
// reads E_r⁽ⁱ⁾; the last layer's E_c feeds the logit layer, as the notes
// state, so the last layer has no Eq. 13 (Fuse is nil there: its W_d could
// never receive a gradient).
type DecoderLayer struct {
	Self, Cross         *mesh.BilinearAttention
	Fuse                *radgen.Linear  // W_d: 2D → D; nil in the last layer
	Norm1, Norm2, Norm3 *mesh.LayerNorm // Eqs. 11, 12, 13 (Norm3 nil in the last layer)
	dropout             float64
}

// Forward runs the layer on words er (R, T, D) over visual tokens fv (R, N,
// D) with the causal mask (R, T, T); it returns E_r⁽ⁱ⁾ (nil in the last
// layer) and E_c.
func (l *DecoderLayer) Forward(g *radgen.Graph, er, fv, causal *radgen.Tensor) (next, ec *radgen.Tensor) {
	return l.apply(g, er,
		func(x *radgen.Tensor) *radgen.Tensor { return l.Self.Forward(g, x, x, x, causal) },
		func(mid *radgen.Tensor) *radgen.Tensor { return l.Cross.Forward(g, mid, fv, fv, nil) })
}

// apply is the layer's body, Eqs. 11–13, around its two attentions: self
// attends the words er, cross the visual tokens from Eq. 11's result. Forward
// and a decoding's Step differ only in how they attend.
func (l *DecoderLayer) apply(g *radgen.Graph, er *radgen.Tensor, self, cross func(*radgen.Tensor) *radgen.Tensor) (next, ec *radgen.Tensor) {
	mid := l.Norm1.Forward(g, g.Add(g.Dropout(self(er), l.dropout), er))  // Eq. 11
	ec = l.Norm2.Forward(g, g.Add(g.Dropout(cross(mid), l.dropout), mid)) // Eq. 12
	if l.Fuse != nil {
		next = l.Norm3.Forward(g, g.Add(l.Fuse.Forward(g, g.Concat(2, er, ec)), er)) // Eq. 13
	}
	return next, ec
}

func (l *DecoderLayer) visit(visit func(string, *radgen.Tensor)) {
	l.Self.VisitParams(radgen.Prefixed("self_eba.", visit))
	l.Cross.VisitParams(radgen.Prefixed("cross_eba.", visit))
	l.Norm1.VisitParams(radgen.Prefixed("norm1.", visit))
	l.Norm2.VisitParams(radgen.Prefixed("norm2.", visit))
	if l.Fuse != nil {
		l.Fuse.VisitParams(radgen.Prefixed("fuse.", visit))
		l.Norm3.VisitParams(radgen.Prefixed("norm3.", visit))
	}
}

// Model is METransformer: it writes M candidate reports per study, one per
// expert token, and picks one by metric-based expert voting
// ([Model.DecodeStudies]).
// The encoder is a ViT over the visual features with M expert tokens
// (vision.ViT) followed by bilinear encoder layers; the adjust block turns
// the visual tokens into one set per expert; the bilinear decoder decodes
// each set into a report.
//
// Parameter names: vit.*, bilinear.n.*, adjust.expert.*, adjust.visual.*,
// words, positions, decoder.i.*, logit.*; radgen.StateDict and
// radgen.LoadParams save and load them.
//
// A METransformer is safe for concurrent use by goroutines that only run
// NoGrad graphs or decode; training mutates it and must be exclusive.
type Model struct {
	config       Config
	ViT          *vision.ViT
	Bilinear     []*EncoderLayer
	AdjustExpert *radgen.Linear // W_e of Eq. 10
	AdjustVisual *radgen.Linear // W_v of Eq. 10
	Words        *radgen.Tensor // (V, D) word embeddings
	Positions    *radgen.Tensor // (MaxSeqLen+1, D) learned positions
	Decoder      []*DecoderLayer
	Logit        *radgen.Linear // D → V
}

// New returns a model with Xavier-uniform matrices, drawing from
// a PCG generator seeded with seed.
func New(c Config, seed uint64) (*Model, error) {
	if err := c.validateHard(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x4d45545f))
	vit, err := vision.NewViT(vision.ViTConfig{DIn: c.DIn, Patches: c.Patches, Experts: c.Experts, D: c.DModel,
		Heads: c.Heads, DFF: c.DFF, Layers: c.ViTLayers, Dropout: c.Dropout}, rng)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", arch.ErrConfig, err)
	}
	d := c.DModel
	lin := func(in, out int) *radgen.Linear {
		l := radgen.NewLinear(in, out, true, rng)
		radgen.XavierUniform(l.Weight, rng)
		return l
	}
	eba := func(dropout float64) *mesh.BilinearAttention {
		return mesh.NewBilinearAttention(mesh.BilinearConfig{DQuery: d, DKey: d, DValue: d, DBilinear: d, DMid: c.DMid, Dropout: dropout}, rng)
	}
	m := &Model{config: c, ViT: vit, AdjustExpert: lin(d, d), AdjustVisual: lin(d, d),
		Words: radgen.NewParam(c.Vocab, d), Positions: radgen.NewParam(c.MaxSeqLen+1, d), Logit: lin(d, c.Vocab)}
	radgen.XavierUniform(m.Words, rng)
	radgen.Uniform(m.Positions, rng, 0.02*math.Sqrt(3))
	for range c.BilinearLayers {
		m.Bilinear = append(m.Bilinear, &EncoderLayer{EBA: eba(c.Dropout), Fuse: lin(2*d, d), Norm: mesh.NewLayerNorm(d)})
	}
	for i := range c.DecoderLayers {
		l := &DecoderLayer{Self: eba(c.Dropout), Cross: eba(c.Dropout),
			Norm1: mesh.NewLayerNorm(d), Norm2: mesh.NewLayerNorm(d), dropout: c.Dropout}
		if i < c.DecoderLayers-1 {
			l.Fuse, l.Norm3 = lin(2*d, d), mesh.NewLayerNorm(d)
		}
		m.Decoder = append(m.Decoder, l)
	}
	return m, nil
}

// VisitParams implements radgen.Module.
func (m *Model) VisitParams(visit func(string, *radgen.Tensor)) {
	m.ViT.VisitParams(radgen.Prefixed("vit.", visit))
	for i, l := range m.Bilinear {
		l.visit(radgen.Prefixed(fmt.Sprintf("bilinear.%d.", i), visit))
	}
	m.AdjustExpert.VisitParams(radgen.Prefixed("adjust.expert.", visit))
	m.AdjustVisual.VisitParams(radgen.Prefixed("adjust.visual.", visit))
	visit("words", m.Words)
	visit("positions", m.Positions)
	for i, l := range m.Decoder {
		l.visit(radgen.Prefixed(fmt.Sprintf("decoder.%d.", i), visit))
	}
	m.Logit.VisitParams(radgen.Prefixed("logit.", visit))
}

// Encoded is a batch of studies after the encoder and the adjust block.
type Encoded struct {
	Visual   *radgen.Tensor // (B, N, D) f_v, the visual tokens after the bilinear encoder
	Experts  *radgen.Tensor // (B, M, D) f_e, the expert tokens after the bilinear encoder
	Adjusted *radgen.Tensor // (B·M, N, D) F_adjust(f_eᵐ, f_v), row b·M + m for study b and expert m
}

// Encode runs the encoder on visual features (B, N, d_in) and the adjust
// block
//
//	f_vᵐ = F_adjust(f_eᵐ, f_v) = ReLU(W_e f_eᵐ) ⊙ ReLU(W_v f_v)        (Eq. 10)
//
// once per expert m, so that each expert's decoding stream reads its own
// view of the image.
func (m *Model) encode(g *radgen.Graph, feats *radgen.Tensor) (*Encoded, error) {
	c := m.config
	if feats == nil || feats.Rank() != 3 || feats.Dim(0) == 0 || feats.Dim(1) != c.Patches || feats.Dim(2) != c.DIn {
		return nil, fmt.Errorf("metrans: METransformer features %v, want (B, %d, %d)", feats.Shape(), c.Patches, c.DIn)
	}
	b, n, mm, d := feats.Dim(0), c.Patches, c.Experts, c.DModel
	v, e := m.ViT.Forward(g, feats)
	for _, l := range m.Bilinear {
		e, v = l.Forward(g, e, v)
	}
	ae := g.Reshape(g.ReLU(m.AdjustExpert.Forward(g, e)), b, mm, 1, d)
	av := g.Reshape(g.ReLU(m.AdjustVisual.Forward(g, v)), b, 1, n, d)
	adj := g.Reshape(g.Mul(ae, av), b*mm, n, d) // Eq. 10
	return &Encoded{Visual: v, Experts: e, Adjusted: adj}, nil
}

// decodeTokens runs the bilinear decoder over expert-adjusted visual tokens
// fv (R, N, D) on token ids (R·T, row-major, each row starting with BOS)
// and returns the log-probabilities of the next token, (R, T, V). Position
// t attends positions ≤ t only.
func (m *Model) decodeTokens(g *radgen.Graph, fv *radgen.Tensor, tokens []int, r, t int) (*radgen.Tensor, error) {
	c := m.config
	if len(tokens) != r*t || r <= 0 || t <= 0 || fv.Dim(0) != r {
		return nil, fmt.Errorf("metrans: %d tokens for a (%d, %d) batch over visual tokens %v", len(tokens), r, t, fv.Shape())
	}
	if t > c.MaxSeqLen+1 {
		return nil, fmt.Errorf("metrans: %d positions exceed the METransformer's table (%d)", t, c.MaxSeqLen+1)
	}
	for i, id := range tokens {
		if id < 0 || id >= c.Vocab {
			return nil, fmt.Errorf("metrans: token %d at %d outside the vocabulary [0, %d)", id, i, c.Vocab)
		}
	}
	causal := make([]float64, r*t*t)
	for i := range r {
		for q := range t {
			for k := 0; k <= q; k++ {
				causal[(i*t+q)*t+k] = 1
			}
		}
	}
	mask := constOf(fv, causal, r, t, t)
	x := g.Add(g.Embedding(m.Words, tokens, r, t), g.Slice(m.Positions, 0, 0, t))
	x = g.Dropout(x, c.Dropout)
	var ec *radgen.Tensor
	for _, l := range m.Decoder {
		x, ec = l.Forward(g, x, fv, mask)
	}
	return g.LogSoftmax(m.Logit.Forward(g, ec)), nil
}

// Forward is a teacher-forced pass.
type Forward struct {
	Encoded  *Encoded
	LogProbs *radgen.Tensor // (B·M, T, V): row b·M + m is expert m's stream for study b
}

// TeacherForce runs the model on features (B, N, d_in) and input tokens
// (B·T ids, row-major: targets[:, :-1] of a batch), every expert's stream
// reading the same tokens.
func (m *Model) TeacherForce(g *radgen.Graph, feats *radgen.Tensor, tokens []int, b, t int) (*Forward, error) {
	if len(tokens) != b*t || b <= 0 || t <= 0 {
		return nil, fmt.Errorf("metrans: %d tokens for a (%d, %d) batch", len(tokens), b, t)
	}
	if feats == nil || feats.Rank() != 3 || feats.Dim(0) != b {
		return nil, fmt.Errorf("metrans: METransformer features %v for a batch of %d", feats.Shape(), b)
	}
	enc, err := m.encode(g, feats)
	if err != nil {
		return nil, err
	}
	mm := m.config.Experts
	rep := make([]int, 0, b*mm*t)
	for i := range b {
		for range mm {
			rep = append(rep, tokens[i*t:(i+1)*t]...)
		}
	}
	lp, err := m.decodeTokens(g, enc.Adjusted, rep, b*mm, t)
	if err != nil {
		return nil, err
	}
	return &Forward{Encoded: enc, LogProbs: lp}, nil
}

// loss returns the training objective and its parts: the sum over experts
// of each expert's masked mean NLL of targets (B·T ids; mask (B·T) non-zero
// on the positions that count), plus λ times the orthogonal loss of the
// encoder's expert tokens f_e (vision.OrthogonalLoss). The notes put the
// orthogonal loss on "the expert tokens" without saying which layer's; it
// is taken on f_e, the expert embeddings that guide the decoder.
func (m *Model) loss(g *radgen.Graph, f *Forward, targets []int, mask []float32) (total, nll, orth *radgen.Tensor) {
	mm := m.config.Experts
	lp := f.LogProbs
	b, t := lp.Dim(0)/mm, lp.Dim(1)
	if len(targets) != b*t || len(mask) != b*t {
		panic(fmt.Sprintf("metrans: METransformer loss over %v with %d targets and %d mask entries", lp.Shape(), len(targets), len(mask)))
	}
	rt := make([]int, 0, b*mm*t)
	rm := make([]float32, 0, b*mm*t)
	for i := range b {
		for range mm {
			rt = append(rt, targets[i*t:(i+1)*t]...)
			rm = append(rm, mask[i*t:(i+1)*t]...)
		}
	}
	// Loss averages over all B·M streams' positions, (1/M)·Σ_m NLL_m.
	nll = g.Scale(arch.LanguageModelLoss(g, lp, rt, rm), float64(mm))
	orth = vision.OrthogonalLoss(g, f.Encoded.Experts)
	total = g.Add(nll, g.Scale(orth, m.config.Lambda))
	return total, nll, orth
}

// StartRecompute encodes visual features (B, N, d_in) once and returns a
// decode.Model with one row per study and expert: row b·M + m decodes
// expert m's report of study b. Like decode.Recompute it re-runs the
// decoder over each row's prefix at every step (O(T²) work); it is the
// cross-check of the incremental [Model.StartDecoding], which must
// give the same log-probabilities.
func (m *Model) StartRecompute(feats *radgen.Tensor) (*decode.Recompute, error) {
	feats = m.matchDtype(feats)
	enc, err := m.encode(radgen.NoGrad(), feats)
	if err != nil {
		return nil, err
	}
	score := func(ctx context.Context, rows []int, prefixes []int, length int, dst []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		g := radgen.NoGrad()
		r := len(rows)
		lp, err := m.decodeTokens(g, g.IndexSelect(enc.Adjusted, 0, rows), prefixes, r, length)
		if err != nil {
			return err
		}
		return arch.CopyLogProbs(dst, g.Reshape(g.Slice(lp, 1, length-1, length), r*m.config.Vocab))
	}
	return decode.NewRecompute(feats.Dim(0)*m.config.Experts, m.config.Vocab, score)
}

// studyReport is the outcome of generate for one study.
type studyReport struct {
	Best       decode.Hypothesis   // the winning candidate
	Expert     int                 // its expert
	Candidates []decode.Hypothesis // (M) each expert's best hypothesis
	Scores     []float64           // (M) each candidate's score against the others
}

// generate decodes every expert's candidate report for each study of feats
// (B, N, d_in) with strategy (a decode strategy with BOS and EOS 0), then
// chooses one per study by metric-based expert voting (vote.Score, for
// example cidErDReward, scores each candidate against the other experts'
// candidates). With a single expert there is nothing to vote on and its
// report is returned. The decoding steps' graphs take opts.
func (m *Model) generate(ctx context.Context, feats *radgen.Tensor, strategy decode.Strategy, vote decode.Vote, opts ...radgen.GraphOption) ([]studyReport, error) {
	if strategy == nil {
		return nil, fmt.Errorf("metrans: nil decoding strategy")
	}
	dec, err := m.startDecoding(feats, opts...)
	if err != nil {
		return nil, err
	}
	hyps, err := strategy.Decode(ctx, dec)
	if err != nil {
		return nil, err
	}
	mm := m.config.Experts
	b := len(hyps) / mm
	experts := make([][][]decode.Hypothesis, b)
	out := make([]studyReport, b)
	for i := range b {
		experts[i] = hyps[i*mm : (i+1)*mm]
		for j, h := range experts[i] {
			if len(h) == 0 {
				return nil, fmt.Errorf("metrans: expert %d of study %d decoded nothing", j, i)
			}
			out[i].Candidates = append(out[i].Candidates, h[0])
		}
	}
	if mm == 1 {
		for i := range out {
			out[i].Best, out[i].Scores = out[i].Candidates[0], []float64{0}
		}
		return out, nil
	}
	best, ballots, err := vote.SelectHypotheses(ctx, experts)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Best, out[i].Expert, out[i].Scores = best[i], ballots[i].Winner, ballots[i].Scores
	}
	return out, nil
}

// constOf wraps values as a constant tensor of the given shape in like's
// dtype.
func constOf(like *radgen.Tensor, values []float64, shape ...int) *radgen.Tensor {
	t := radgen.FromFloat64(values, shape...)
	if !like.Is64() {
		t = t.To32().To(like.Device())
	}
	return t
}

// constFill returns a constant tensor of the given shape, every element v,
// in like's dtype.
func constFill(like *radgen.Tensor, v float64, shape ...int) *radgen.Tensor {
	var t *radgen.Tensor
	if like.Is64() {
		t = radgen.Zeros64(shape...)
	} else {
		t = radgen.Zeros(shape...).To(like.Device())
	}
	if v != 0 {
		radgen.Fill(t, v)
	}
	return t
}

var _ radgen.Module = (*Model)(nil)

// paramCount returns the number of parameter values of a model of c, in
// float64 so that no configuration overflows it.
func (c Config) paramCount() float64 {
	d, n, m := float64(c.DModel), float64(c.Patches), float64(c.Experts)
	ff, mid, v := float64(c.DFF), float64(c.DMid), float64(c.Vocab)
	linear := func(in, out float64) float64 { return in*out + out }
	norm := 2 * d
	eba := 4*linear(d, d) + linear(d, mid) + linear(mid, 1) + linear(mid, d)
	vit := linear(float64(c.DIn), d) + m*d + (n+m)*d + 2*d + norm +
		float64(c.ViTLayers)*(2*norm+4*linear(d, d)+linear(d, ff)+linear(ff, d))
	bil := float64(c.BilinearLayers) * (eba + linear(2*d, d) + norm)
	dec := float64(c.DecoderLayers)*(2*eba+2*norm) + float64(c.DecoderLayers-1)*(linear(2*d, d)+norm)
	return vit + bil + 2*linear(d, d) + v*d + float64(c.MaxSeqLen+1)*d + dec + linear(d, v)
}
