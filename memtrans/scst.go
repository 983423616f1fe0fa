package memtrans

// Self-critical sequence training (Rennie et al., "Self-critical Sequence
// Training for Image Captioning", CVPR 2017) in the variant of the
// Meshed-Memory Transformer (Cornia et al., CVPR 2020, §3.3 and Eq. 10):
// sequences sampled by beam search, CIDEr-D reward, the mean reward of a
// study's sequences as baseline. Mirrors the SCST loop of
// aimagelab/meshed-memory-transformer train.py (train_scst): beam search
// with out_size = beam size, loss = −mean over tokens of log p · (r − b).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
)

// SCSTConfig holds the choices of self-critical training.
type SCSTConfig struct {
	// Samples is k, the number of sequences per study (M²: the beam size, 5).
	// It must be at least 2: the baseline is their mean.
	Samples int `json:"samples"`
	// MaxLen bounds a sequence's tokens, EOS included; 0 means the model's
	// MaxSeqLen.
	MaxLen int `json:"max_len"`
	// Strategy draws the sequences; nil means beam search of width Samples
	// returning all Samples beams (decode.BeamSearch{Size: k, N: k}), as M²
	// does. A strategy must return Samples hypotheses per study (for
	// example decode.Sample{N: k} for Rennie et al.'s multinomial samples).
	Strategy decode.Strategy `json:"-"`
	// SumLogProbs weighs each sequence by its summed token log-probability,
	// log p(w) of Eq. 10, instead of the per-token mean that the published
	// M² code uses (the default).
	SumLogProbs bool `json:"sum_log_probs"`
	// ClipValue and ClipNorm clip the gradients before the optimiser step
	// (0 disables either).
	ClipValue float64 `json:"clip_value"`
	ClipNorm  float64 `json:"clip_norm"`
	// Seed derives the dropout masks of the teacher-forced pass, one per
	// step. The model's own dropout rates apply (M² trains SCST in train
	// mode); set them to 0 in the Config for a deterministic gradient.
	Seed uint64 `json:"seed"`
}

// ErrSCST is wrapped by the errors of [NewSCST] and [SCST.Step] about their
// input.
var ErrSCST = errors.New("memtrans: invalid SCST input")

// SCST fine-tunes a model's encoder–decoder with self-critical sequence training. For
// every study it decodes k sequences w¹…wᵏ, rewards each with
// r(wⁱ) (CIDEr-D against the study's references by default), and descends
//
//	L = −(1/k) Σᵢ (r(wⁱ) − b) · log p(wⁱ),   b = (1/k) Σᵢ r(wⁱ)      (Cornia et al. 2020, Eq. 10)
//
// averaged over the studies of a batch, with log p(wⁱ) recomputed by a
// teacher-forced pass so that it carries gradients.
//
// An SCST holds its model exclusively during Step; it is for one goroutine.
type SCST struct {
	owner  *Model // nil for a bare encoder–decoder
	model  arch.EncoderDecoder
	opt    *optim.Adam
	cfg    SCSTConfig
	reward decode.Scorer
	taken  int
}

// SCSTResult reports one step.
type SCSTResult struct {
	Loss       float64   // the loss L before the update
	MeanReward float64   // mean reward of the sampled sequences
	Rewards    []float64 // (B·k) study-major: the reward of each sequence
	Advantages []float64 // (B·k) r − b
	Sequences  [][]int   // (B·k) the sampled token ids, EOS included when produced
}

// NewSCST prepares self-critical training of model m, of any architecture
// whose decoding has one row per study (not METransformer's experts), with the
// optimiser opt (built over radgen.Trainable(m.EncoderDecoder()), typically
// at a small fixed rate: M² uses 5e-6) and the reward, nil for
// metrics.CIDErDOfIDs. Each Step takes m exclusively while it updates the
// weights, as a Trainer does.
func NewSCST(m *Model, opt *optim.Adam, cfg SCSTConfig, reward decode.Scorer) (*SCST, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil model", ErrSCST)
	}
	if _, ok := m.net.(arch.StudyDecoder); ok {
		return nil, fmt.Errorf("%w: the %s architecture decodes each study through its own candidates; self-critical training needs one decoding row per study", ErrSCST, m.cfg.Architecture())
	}
	s, err := newSCST(m.net, opt, cfg, reward)
	if err != nil {
		return nil, err
	}
	s.owner = m
	return s, nil
}

// newSCST is NewSCST over a bare encoder–decoder.
func newSCST(m arch.EncoderDecoder, opt *optim.Adam, cfg SCSTConfig, reward decode.Scorer) (*SCST, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil model or optimiser", ErrSCST)
	}
	d := m.Config().Dims()
	switch {
	case m == nil || opt == nil:
		return nil, fmt.Errorf("%w: nil model or optimiser", ErrSCST)
	case cfg.Samples < 2:
		return nil, fmt.Errorf("%w: %d samples per study, the baseline needs at least 2", ErrSCST, cfg.Samples)
	case cfg.MaxLen < 0 || cfg.MaxLen > d.MaxSeqLen:
		return nil, fmt.Errorf("%w: maximum length %d outside [0, %d]", ErrSCST, cfg.MaxLen, d.MaxSeqLen)
	case cfg.ClipValue < 0 || cfg.ClipNorm < 0:
		return nil, fmt.Errorf("%w: negative clipping", ErrSCST)
	}
	if cfg.MaxLen == 0 {
		cfg.MaxLen = d.MaxSeqLen
	}
	if cfg.Strategy == nil {
		cfg.Strategy = decode.BeamSearch{Size: cfg.Samples, N: cfg.Samples, MaxLen: cfg.MaxLen, BOS: d.BOS, Semantics: d.Semantics}
	}
	if reward == nil {
		reward = cidErDReward
	}
	return &SCST{model: m, opt: opt, cfg: cfg, reward: reward}, nil
}

// Steps returns the number of completed steps.
func (s *SCST) steps() int { return s.taken }

// Step runs one self-critical update on a batch: visual features (B, N,
// d_vf) and refs[i], the reference reports of study i as token ids (at least
// one each, without BOS; a trailing EOS is ignored). It returns what it
// sampled and rewarded. On error the model is unchanged.
func (s *SCST) Step(ctx context.Context, feats *radgen.Tensor, refs [][][]int) (SCSTResult, error) {
	var res SCSTResult
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if o := s.owner; o != nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.closed {
			return res, ErrClosed
		}
		if o.half != nil {
			defer o.half.markStale()
		}
	}
	m := s.model
	d := m.Config().Dims()
	if feats == nil || feats.Rank() != 3 || feats.Dim(0) != len(refs) || len(refs) == 0 || feats.Dim(2) != d.VisualWidth {
		return res, fmt.Errorf("%w: features %v for %d studies, want (B, N, %d)", ErrSCST, feats.Shape(), len(refs), d.VisualWidth)
	}
	for i, r := range refs {
		if len(r) == 0 {
			return res, fmt.Errorf("%w: study %d has no reference", ErrSCST, i)
		}
	}
	feats = feats.To(moduleDevice(m)) // sampling and the update run where the model is
	raw, err := m.StartDecoding(feats)
	if err != nil {
		return res, err
	}
	hyps, err := s.cfg.Strategy.Decode(ctx, reportWords(raw, d))
	if r, ok := raw.(arch.Releaser); ok {
		r.Release()
	}
	if err != nil {
		return res, fmt.Errorf("memtrans: SCST sampling: %w", err)
	}
	k := s.cfg.Samples
	var flatRefs [][][]int
	var flatHyps [][]int
	var studies []int
	for i, h := range hyps {
		if len(h) != k {
			return res, fmt.Errorf("%w: the strategy returned %d sequences for study %d, want %d", ErrSCST, len(h), i, k)
		}
		clean := make([][]int, len(refs[i]))
		for j, r := range refs[i] {
			clean[j] = trimEOS(r)
		}
		for _, hy := range h {
			res.Sequences = append(res.Sequences, hy.Tokens)
			flatHyps = append(flatHyps, trimEOS(hy.Tokens))
			flatRefs = append(flatRefs, clean)
			studies = append(studies, i)
		}
	}
	res.Rewards, err = s.reward(ctx, flatRefs, flatHyps)
	if err != nil {
		return res, fmt.Errorf("memtrans: SCST reward: %w", err)
	}
	if len(res.Rewards) != len(flatHyps) {
		return res, fmt.Errorf("%w: the reward scored %d of %d sequences", ErrSCST, len(res.Rewards), len(flatHyps))
	}
	res.Advantages = make([]float64, len(res.Rewards))
	for i := 0; i < len(res.Rewards); i += k {
		var b float64 // the baseline: the mean reward of the study's sequences (Eq. 10)
		for _, r := range res.Rewards[i : i+k] {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return res, fmt.Errorf("%w: reward %v", ErrSCST, r)
			}
			b += r
		}
		b /= float64(k)
		for j := i; j < i+k; j++ {
			res.Advantages[j] = res.Rewards[j] - b
			res.MeanReward += res.Rewards[j]
		}
	}
	res.MeanReward /= float64(len(res.Rewards))

	g := radgen.NewGraph(radgen.Train(s.stepSeed()))
	logp, err := sequenceLogProbs(m, g, feats, res.Sequences, studies, !s.cfg.SumLogProbs)
	if err != nil {
		return res, err
	}
	loss := scstLoss(g, logp, res.Advantages)
	res.Loss = loss.To(radgen.CPU).At()
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("memtrans: SCST loss is %v at step %d", res.Loss, s.taken)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := g.Backward(loss); err != nil {
		return res, err
	}
	params := s.opt.Params()
	if s.cfg.ClipValue > 0 {
		optim.ClipGradValue(params, s.cfg.ClipValue)
	}
	if s.cfg.ClipNorm > 0 {
		if _, err := optim.ClipGradNorm(params, s.cfg.ClipNorm, 2); err != nil {
			for _, p := range radgen.Trainable(m) {
				p.Tensor.ZeroGrad()
			}
			return res, err
		}
	}
	s.opt.Step()
	s.opt.ZeroGrad()
	for _, p := range radgen.Trainable(m) {
		p.Tensor.ZeroGrad()
	}
	s.taken++
	return res, nil
}

func (s *SCST) stepSeed() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "radgen-scst/%d/%d", s.cfg.Seed, s.taken)
	return h.Sum64()
}

// SCSTLoss returns −(1/R) Σᵢ advantages[i] · logp[i] for sequence
// log-probabilities logp (R): Eq. 10 of Cornia et al. with the advantages
// r(wⁱ) − b held constant, averaged over all R = B·k sequences.
func scstLoss(g *radgen.Graph, logp *radgen.Tensor, advantages []float64) *radgen.Tensor {
	if logp.Rank() != 1 || logp.Dim(0) != len(advantages) || len(advantages) == 0 {
		panic(fmt.Sprintf("memtrans: SCST loss over %v with %d advantages", logp.Shape(), len(advantages)))
	}
	adv := radgen.FromFloat64(append([]float64(nil), advantages...), len(advantages))
	if !logp.Is64() {
		adv = adv.To32().To(logp.Device())
	}
	return g.Scale(g.Sum(g.Mul(logp, adv)), -1/float64(len(advantages)))
}

// sequenceLogProbs returns the log-probability of each sequence under the
// model, teacher-forced: seqs[r] (token ids without BOS, typically ending
// with EOS) decodes study studies[r] of feats (B, N, d_vf). The result (R)
// is Σ_t log p(w_t | w_<t) over the tokens of each sequence, divided by its
// length when mean is true. It records on g, so it carries gradients to the
// model's parameters.
func sequenceLogProbs(m arch.EncoderDecoder, g *radgen.Graph, feats *radgen.Tensor, seqs [][]int, studies []int, mean bool) (*radgen.Tensor, error) {
	r := len(seqs)
	if r == 0 || len(studies) != r {
		return nil, fmt.Errorf("%w: %d sequences for %d studies", ErrSCST, r, len(studies))
	}
	if feats == nil || feats.Rank() != 3 {
		return nil, fmt.Errorf("%w: features %v", ErrSCST, feats.Shape())
	}
	t := 1
	for i, s := range seqs {
		t = max(t, len(s))
		if studies[i] < 0 || studies[i] >= feats.Dim(0) {
			return nil, fmt.Errorf("%w: sequence %d decodes study %d of %d", ErrSCST, i, studies[i], feats.Dim(0))
		}
	}
	in := make([]int, r*t)
	targets := make([]int, r*t)
	weights := make([]float64, r*t)
	for i, s := range seqs {
		w := 1.0
		if mean && len(s) > 0 {
			w = 1 / float64(len(s))
		}
		for j, id := range s {
			if j+1 < t {
				in[i*t+j+1] = id // position 0 is BOS (id 0)
			}
			targets[i*t+j] = id
			weights[i*t+j] = w
		}
	}
	lp, err := m.LogProbs(g, g.IndexSelect(feats, 0, studies), in, r, t)
	if err != nil {
		return nil, err
	}
	picked := g.PickLast(lp, targets) // (R, T)
	wt := radgen.FromFloat64(weights, r, t)
	ones := radgen.FromFloat64(onesOf(t), t, 1)
	if !picked.Is64() {
		wt, ones = wt.To32().To(picked.Device()), ones.To32().To(picked.Device())
	}
	return g.Reshape(g.MatMul(g.Mul(picked, wt), ones, false), r), nil
}

// SCSTReferences returns the reference of every study of a batch in the
// form Step takes: example i's ids without the leading BOS (R2Gen's
// [0, w1 … wn, 0] becomes [w1 … wn, 0]). A study with several reports
// should pass them all to Step instead.
func scstReferences(b *data.Batch) [][][]int {
	out := make([][][]int, len(b.Examples))
	for i, e := range b.Examples {
		ids := e.IDs
		if len(ids) > 0 && ids[0] == 0 {
			ids = ids[1:]
		}
		out[i] = [][]int{append([]int(nil), ids...)}
	}
	return out
}

func onesOf(n int) []float64 {
	o := make([]float64, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

func trimEOS(t []int) []int {
	if n := len(t); n > 0 && t[n-1] == 0 {
		return t[:n-1]
	}
	return t
}
