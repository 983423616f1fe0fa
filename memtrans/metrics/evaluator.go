package metrics

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

// Scores are every metric of one evaluation.
type Scores struct {
	// N is the number of samples scored.
	N int
	// BLEU[k] is corpus BLEU-(k+1) (coco-caption).
	BLEU [4]float64
	// METEOR is the corpus score of METEORName's scorer; both are zero when
	// METEOR is off.
	METEOR     float64
	METEORName string
	// ROUGEL is ROUGE-L (coco-caption, β = 1.2).
	ROUGEL float64
	// CIDErD is CIDEr-D (coco-caption, σ = 6).
	CIDErD float64
	// CE is the clinical efficacy of the CheXpert-style labels, nil when off.
	CE *chexpert.Efficacy
	// PerSample holds per-sample values when requested with WithPerSample.
	PerSample *PerSample
}

// PerSample holds per-sample scores, indexed like the input.
type PerSample struct {
	BLEU      [][4]float64
	METEOR    []float64
	ROUGEL    []float64
	CIDErD    []float64
	RefLabels []chexpert.Labels // labels of each sample's first reference
	HypLabels []chexpert.Labels
}

// Option configures an Evaluator.
type Option func(*Evaluator) error

// WithMETEOR sets the METEOR scorer. Default: meteor.New() (the METEOR 1.5
// jar's exact, stem and synonym modules with its English data; no
// paraphrase module, see package meteor).
func WithMETEOR(s *meteor.Scorer) Option {
	return func(e *Evaluator) error {
		if s == nil {
			return fmt.Errorf("metrics: nil METEOR scorer")
		}
		e.meteor = s
		return nil
	}
}

// WithoutMETEOR leaves METEOR out.
func WithoutMETEOR() Option {
	return func(e *Evaluator) error {
		e.meteor, e.noMeteor = nil, true
		return nil
	}
}

// WithLabeler sets the CheXpert-style labeler. Default: chexpert.New().
func WithLabeler(l *chexpert.Labeler) Option {
	return func(e *Evaluator) error {
		if l == nil {
			return fmt.Errorf("metrics: nil labeler")
		}
		e.labeler = l
		return nil
	}
}

// WithoutClinicalEfficacy leaves the CheXpert labels and CE out.
func WithoutClinicalEfficacy() Option {
	return func(e *Evaluator) error {
		e.labeler, e.noCE = nil, true
		return nil
	}
}

// WithConcurrency bounds the number of goroutines scoring samples.
// Default: runtime.GOMAXPROCS(0).
func WithConcurrency(n int) Option {
	return func(e *Evaluator) error {
		if n < 1 {
			return fmt.Errorf("metrics: concurrency %d < 1", n)
		}
		e.workers = n
		return nil
	}
}

// WithPerSample makes results include per-sample scores. Default: off.
func WithPerSample(on bool) Option {
	return func(e *Evaluator) error {
		e.perSample = on
		return nil
	}
}

// Evaluator scores generated reports against references with every metric:
// BLEU-1..4, ROUGE-L and CIDEr-D equal to coco-caption, METEOR (package
// meteor) and CheXpert-style clinical efficacy (package chexpert).
// An Evaluator is immutable and safe for concurrent use.
type Evaluator struct {
	meteor    *meteor.Scorer
	labeler   *chexpert.Labeler
	noMeteor  bool
	noCE      bool
	workers   int
	perSample bool
}

// NewEvaluator returns an Evaluator with all metrics on.
func NewEvaluator(opts ...Option) (*Evaluator, error) {
	e := &Evaluator{workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	var err error
	if e.meteor == nil && !e.noMeteor {
		if e.meteor, err = meteor.New(); err != nil {
			return nil, err
		}
	}
	if e.labeler == nil && !e.noCE {
		if e.labeler, err = chexpert.New(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Evaluate scores hyps[i] against refs[i] (one or more references each) in
// parallel. It stops early and returns ctx.Err() when ctx is done.
func (e *Evaluator) Evaluate(ctx context.Context, refs [][]string, hyps []string) (*Scores, error) {
	if err := checkPairs(refs, hyps); err != nil {
		return nil, err
	}
	acc := e.NewAccumulator()
	if err := acc.AddBatch(ctx, refs, hyps); err != nil {
		return nil, err
	}
	return acc.Result(ctx)
}

// sample is one sample's sufficient statistics for every metric.
type sample struct {
	bleu   bleuStats
	rouge  float64
	cider  ciderSample
	meteor meteor.Stats
	refLab chexpert.Labels
	hypLab chexpert.Labels
}

func (e *Evaluator) cook(refs []string, hyp string, buf []int) (sample, []int) {
	var s sample
	s.bleu = cookBLEU(refs, hyp)
	s.rouge, buf = rougeL(refs, hyp, buf)
	s.cider = cookCIDEr(refs, hyp)
	if e.meteor != nil {
		s.meteor = e.meteor.SegmentStats(meteor.CleanHypothesis(hyp), refs)
	}
	if e.labeler != nil {
		s.refLab = e.labeler.Label(refs[0])
		s.hypLab = e.labeler.Label(hyp)
	}
	return s, buf
}

// Accumulator collects samples for an Evaluator, so reports can be scored
// as they are generated: everything that depends on one sample only is
// computed in Add; Result does the corpus-level part (BLEU sums, CIDEr-D
// document frequencies, METEOR's summed statistics, CE). An Accumulator is
// not safe for concurrent use; AddBatch parallelises internally.
type Accumulator struct {
	e       *Evaluator
	samples []sample
	buf     []int
}

// NewAccumulator returns an empty Accumulator.
func (e *Evaluator) NewAccumulator() *Accumulator { return &Accumulator{e: e} }

// Len returns the number of samples added.
func (a *Accumulator) Len() int { return len(a.samples) }

// Add scores one hypothesis against its references.
func (a *Accumulator) Add(refs []string, hyp string) error {
	if len(refs) == 0 {
		return fmt.Errorf("%w: sample %d", ErrNoReference, len(a.samples))
	}
	var s sample
	s, a.buf = a.e.cook(refs, hyp, a.buf)
	a.samples = append(a.samples, s)
	return nil
}

// AddBatch adds hyps[i] with refs[i] for every i, in parallel.
func (a *Accumulator) AddBatch(ctx context.Context, refs [][]string, hyps []string) error {
	if len(refs) != len(hyps) {
		return fmt.Errorf("%w: %d references, %d hypotheses", ErrLengthMismatch, len(refs), len(hyps))
	}
	for i, r := range refs {
		if len(r) == 0 {
			return fmt.Errorf("%w: sample %d", ErrNoReference, len(a.samples)+i)
		}
	}
	out := make([]sample, len(hyps))
	err := parallel(ctx, len(hyps), a.e.workers, func(lo, hi int) {
		var buf []int
		for i := lo; i < hi; i++ {
			out[i], buf = a.e.cook(refs[i], hyps[i], buf)
		}
	})
	if err != nil {
		return err
	}
	a.samples = append(a.samples, out...)
	return nil
}

// parallel runs fn over [0, n) in chunks on at most workers goroutines,
// checking ctx between chunks.
func parallel(ctx context.Context, n, workers int, fn func(lo, hi int)) error {
	const chunk = 16
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for lo := 0; lo < n; lo += chunk {
		if gctx.Err() != nil {
			break
		}
		hi := min(lo+chunk, n)
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			fn(lo, hi)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// Result computes the corpus scores of all samples added so far.
func (a *Accumulator) Result(ctx context.Context) (*Scores, error) {
	n := len(a.samples)
	if n == 0 {
		return nil, ErrEmpty
	}
	e := a.e
	sc := &Scores{N: n}

	bs := make([]bleuStats, n)
	rouge := make([]float64, n)
	cs := make([]ciderSample, n)
	for i, s := range a.samples {
		bs[i], rouge[i], cs[i] = s.bleu, s.rouge, s.cider
	}
	bleu := bleuFromStats(bs)
	sc.BLEU = bleu.Corpus
	sc.ROUGEL = npMean(rouge)

	corpus := newCIDErCorpus(cs)
	cider := make([]float64, n)
	if err := parallel(ctx, n, e.workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			cider[i] = corpus.score(cs[i])
		}
	}); err != nil {
		return nil, err
	}
	sc.CIDErD = npMean(cider)

	var met []float64
	if e.meteor != nil {
		var total meteor.Stats
		met = make([]float64, n)
		for i, s := range a.samples {
			total.Add(s.meteor)
			met[i] = e.meteor.Score(s.meteor)
		}
		sc.METEOR = e.meteor.Score(total)
		sc.METEORName = e.meteor.Name()
	}

	var refLab, hypLab []chexpert.Labels
	if e.labeler != nil {
		refLab = make([]chexpert.Labels, n)
		hypLab = make([]chexpert.Labels, n)
		for i, s := range a.samples {
			refLab[i], hypLab[i] = s.refLab, s.hypLab
		}
		ce, err := chexpert.ClinicalEfficacy(refLab, hypLab)
		if err != nil {
			return nil, err
		}
		sc.CE = &ce
	}

	if e.perSample {
		sc.PerSample = &PerSample{
			BLEU: bleu.PerSentence, METEOR: met, ROUGEL: rouge, CIDErD: cider,
			RefLabels: refLab, HypLabels: hypLab,
		}
	}
	return sc, nil
}
