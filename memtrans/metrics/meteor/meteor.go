package meteor

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Module is a METEOR matching module.
type Module uint8

const (
	// Exact matches identical words.
	Exact Module = iota
	// Stem matches different words with the same Snowball English stem.
	Stem
	// Synonym matches different words that share a WordNet synset.
	Synonym
)

// String returns the module's name as METEOR reports it (exact, stem, synonym).
func (m Module) String() string {
	switch m {
	case Exact:
		return "exact"
	case Stem:
		return "stem"
	case Synonym:
		return "synonym"
	}
	return fmt.Sprintf("Module(%d)", int(m))
}

// Weight is the module's weight in the English "rank" task of METEOR 1.5
// when the modules are in the jar's order (exact 1.0, stem 0.6, synonym
// 0.8; the jar's paraphrase weight 0.6 has no module here). The jar gives
// weights by position, not by module: see [WithModules].
func (m Module) Weight() float64 {
	switch m {
	case Exact:
		return 1.0
	case Stem:
		return 0.6
	case Synonym:
		return 0.8
	}
	return 0
}

// rankWeights are the jar's English "rank" module weights in module-list
// order (Constants.WEIGHT_RANK; the fourth, 0.6, is the paraphrase
// module's). A Scorer with n modules weights them with the first n.
var rankWeights = [3]float64{1.0, 0.6, 0.8}

// DefaultModules are the modules of [New]: every module of the jar's
// English default except paraphrase, in the jar's order.
var DefaultModules = []Module{Exact, Stem, Synonym}

// Params are METEOR's scoring parameters.
type Params struct {
	Alpha float64 // precision/recall balance of Fmean
	Beta  float64 // shape of the fragmentation penalty
	Gamma float64 // maximum fragmentation penalty
	Delta float64 // weight of content words against function words
}

// EnglishParams are the jar's English "rank" task parameters, the defaults
// of `-l en`: α = 0.85, β = 0.20, γ = 0.60, δ = 0.75.
var EnglishParams = Params{Alpha: 0.85, Beta: 0.20, Gamma: 0.60, Delta: 0.75}

// DefaultBeamSize is the jar's alignment beam size.
const DefaultBeamSize = 40

// Errors returned by this package; test with errors.Is.
var (
	// ErrInput is returned for unusable scoring input: no samples,
	// mismatched lengths, or a sample without references.
	ErrInput = errors.New("meteor: bad input")
	// ErrOption is returned by New for an invalid option.
	ErrOption = errors.New("meteor: bad option")
)

type config struct {
	params          Params
	beam            int
	normalize       bool
	funcWords       []string
	wordnet         *WordNet
	modules         []Module
	noStem, noSynon bool
}

// Option configures a Scorer.
type Option func(*config) error

// WithWordNet sets the synonym module's dictionary (see [ReadWordNet]).
// Default: [EnglishWordNet], the jar's own tables.
func WithWordNet(wn *WordNet) Option {
	return func(c *config) error {
		if wn == nil {
			return fmt.Errorf("%w: nil WordNet", ErrOption)
		}
		c.wordnet = wn
		return nil
	}
}

// WithModules sets the matching modules and their order, as the jar's
// -m "exact stem synonym" does; each module at most once. As in the jar,
// the modules match in this order, and the weights are the English rank
// task's by position, not by module: the first module weighs 1.0, the
// second 0.6, the third 0.8, so -m "exact synonym" gives synonym matches
// 0.6. Default: [DefaultModules].
func WithModules(mods ...Module) Option {
	return func(c *config) error {
		if len(mods) == 0 {
			return fmt.Errorf("%w: no modules", ErrOption)
		}
		for i, m := range mods {
			if m > Synonym {
				return fmt.Errorf("%w: unknown module %v", ErrOption, m)
			}
			if slices.Contains(mods[:i], m) {
				return fmt.Errorf("%w: module %v twice", ErrOption, m)
			}
		}
		c.modules = slices.Clone(mods)
		return nil
	}
}

// WithoutStem leaves the stem module out of the module list (weights then
// follow the jar's positional rule, see [WithModules]). Default: stem
// module on.
func WithoutStem() Option {
	return func(c *config) error {
		c.noStem = true
		return nil
	}
}

// WithoutSynonym leaves the synonym module out, as the jar's
// -m "exact stem". Default: synonym module on.
func WithoutSynonym() Option {
	return func(c *config) error {
		c.noSynon = true
		return nil
	}
}

// ParseModules reads a module list as the jar's -m option takes it, names
// separated by blanks ("exact stem synonym"), for [WithModules]. The
// paraphrase module is refused: its table is not available.
func ParseModules(s string) ([]Module, error) {
	var mods []Module
	for _, f := range strings.Fields(s) {
		switch strings.ToLower(f) {
		case "exact":
			mods = append(mods, Exact)
		case "stem":
			mods = append(mods, Stem)
		case "synonym":
			mods = append(mods, Synonym)
		case "paraphrase":
			return nil, fmt.Errorf("%w: the paraphrase module is not available (its table is not part of radgen)", ErrOption)
		default:
			return nil, fmt.Errorf("%w: unknown module %q (exact, stem, synonym)", ErrOption, f)
		}
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("%w: no modules in %q", ErrOption, s)
	}
	return mods, nil
}

// WithFunctionWords replaces the function-word list: a word is a function
// word when its lower-case form is in the list. Default:
// [DefaultFunctionWords].
func WithFunctionWords(words []string) Option {
	return func(c *config) error {
		c.funcWords = words
		return nil
	}
}

// WithBeamSize sets the alignment beam size. Default: [DefaultBeamSize].
func WithBeamSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: beam size %d", ErrOption, n)
		}
		c.beam = n
		return nil
	}
}

// WithNormalization sets whether sentences are normalised as the jar's
// -norm option does ([Normalize]) before scoring. When off, sentences are
// split on whitespace and compared as they are (the jar without -norm,
// which does not lower-case either). Default: on, as R2Gen runs the jar.
func WithNormalization(on bool) Option {
	return func(c *config) error {
		c.normalize = on
		return nil
	}
}

// WithParams sets the scoring parameters. Default: [EnglishParams].
func WithParams(p Params) Option {
	return func(c *config) error {
		if p.Alpha < 0 || p.Alpha > 1 || p.Delta < 0 || p.Delta > 1 || p.Gamma < 0 || p.Beta < 0 {
			return fmt.Errorf("%w: parameters %+v", ErrOption, p)
		}
		c.params = p
		return nil
	}
}

// Scorer computes METEOR with the modules it was built with. A Scorer is
// immutable and safe for concurrent use.
type Scorer struct {
	params    Params
	beam      int
	normalize bool
	modules   []Module
	weights   []float64 // by position in modules, as the jar
	funcWords map[string]struct{}
	wordnet   *WordNet // nil without the synonym module
}

// New returns a Scorer with the jar's English defaults short of the
// paraphrase module: the exact, stem and synonym modules ([DefaultModules],
// synonyms from [EnglishWordNet]), the rank task's parameters and weights,
// the jar's function words and -norm normalisation. It is what
// `java -jar meteor-1.5.jar - - -stdio -l en -norm -m "exact stem synonym"`
// computes.
func New(opts ...Option) (*Scorer, error) {
	c := config{params: EnglishParams, beam: DefaultBeamSize, normalize: true, funcWords: DefaultFunctionWords}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	mods := c.modules
	if mods == nil {
		mods = DefaultModules
	}
	s := &Scorer{
		params:    c.params,
		beam:      c.beam,
		normalize: c.normalize,
		funcWords: functionWordSet(c.funcWords),
	}
	for _, m := range mods {
		if m == Stem && c.noStem || m == Synonym && c.noSynon {
			continue
		}
		s.weights = append(s.weights, rankWeights[len(s.modules)])
		s.modules = append(s.modules, m)
	}
	if len(s.modules) == 0 {
		return nil, fmt.Errorf("%w: no modules left", ErrOption)
	}
	if s.has(Synonym) {
		s.wordnet = c.wordnet
		if s.wordnet == nil {
			wn, err := EnglishWordNet()
			if err != nil {
				return nil, err
			}
			s.wordnet = wn
		}
	}
	return s, nil
}

// Modules returns the matching modules in use, in matching order.
func (s *Scorer) Modules() []Module { return append([]Module(nil), s.modules...) }

// Name describes the score honestly, e.g. "METEOR (exact+stem+synonym; no
// paraphrase)". Scores with different names are not comparable, and none
// of them is the jar's default (which adds paraphrase tables).
func (s *Scorer) Name() string {
	var on []string
	for _, m := range s.modules {
		on = append(on, m.String())
	}
	off := []string{}
	if !s.has(Stem) {
		off = append(off, "no stem")
	}
	if !s.has(Synonym) {
		off = append(off, "no synonym")
	}
	off = append(off, "no paraphrase")
	return "METEOR (" + strings.Join(on, "+") + "; " + strings.Join(off, ", ") + ")"
}

func (s *Scorer) has(m Module) bool {
	for _, x := range s.modules {
		if x == m {
			return true
		}
	}
	return false
}

// Stats are METEOR's sufficient statistics for one segment (MeteorStats),
// word-based. Corpus scores sum them over segments ([Stats.Add]) before
// scoring.
type Stats struct {
	TestLength, RefLength               int
	TestFunctionWords, RefFunctionWords int
	// Per module, in the scorer's module order: matched content and
	// function words on each side.
	TestContent, RefContent   [3]int
	TestFunction, RefFunction [3]int
	Chunks                    int
	TestMatches, RefMatches   int // matched words (unweighted)
}

// Add accumulates o into st as the jar's MeteorStats.addStats does: every
// count is summed, except that the chunk of a segment matched entirely in
// one chunk is not counted (so a corpus of such segments scores 1).
func (st *Stats) Add(o Stats) {
	st.TestLength += o.TestLength
	st.RefLength += o.RefLength
	st.TestFunctionWords += o.TestFunctionWords
	st.RefFunctionWords += o.RefFunctionWords
	for i := range st.TestContent {
		st.TestContent[i] += o.TestContent[i]
		st.RefContent[i] += o.RefContent[i]
		st.TestFunction[i] += o.TestFunction[i]
		st.RefFunction[i] += o.RefFunction[i]
	}
	if !o.whole() {
		st.Chunks += o.Chunks
	}
	st.TestMatches += o.TestMatches
	st.RefMatches += o.RefMatches
}

// whole reports a segment matched word for word in one chunk, the case in
// which METEOR's fragmentation is 0.
func (st Stats) whole() bool {
	return st.TestMatches == st.TestLength && st.RefMatches == st.RefLength && st.Chunks == 1
}

// tokens normalises (if configured) and splits a sentence. The line is
// first trimmed as the jar's -stdio mode trims each field of a SCORE line
// (String.trim: every character up to U+0020).
func (s *Scorer) tokens(line string) []string {
	line = strings.TrimFunc(line, func(r rune) bool { return r <= ' ' })
	if s.normalize {
		line = Normalize(line)
	}
	return strings.FieldsFunc(line, isJavaTokenDelim)
}

// SegmentStats aligns hyp with each reference and returns the statistics of
// the best-scoring one (the first on ties), as the jar's
// getMeteorStats(test, references).
func (s *Scorer) SegmentStats(hyp string, refs []string) Stats {
	h := s.tokens(hyp)
	var best Stats
	bestScore := -1.0
	for _, r := range refs {
		st := s.pairStats(h, s.tokens(r))
		if sc := s.Score(st); sc > bestScore {
			best, bestScore = st, sc
		}
	}
	return best
}

func (s *Scorer) pairStats(hyp, ref []string) Stats {
	a := s.align(hyp, ref)
	st := Stats{TestLength: len(hyp), RefLength: len(ref), Chunks: a.chunks}
	fh := make([]bool, len(hyp))
	for i, w := range hyp {
		if _, ok := s.funcWords[javaLower(w)]; ok {
			fh[i] = true
			st.TestFunctionWords++
		}
	}
	fr := make([]bool, len(ref))
	for j, w := range ref {
		if _, ok := s.funcWords[javaLower(w)]; ok {
			fr[j] = true
			st.RefFunctionWords++
		}
	}
	for _, m := range a.matches {
		if m < 0 {
			continue
		}
		c := a.cands[m]
		if fh[c.hyp] {
			st.TestFunction[c.module]++
		} else {
			st.TestContent[c.module]++
		}
		if fr[c.ref] {
			st.RefFunction[c.module]++
		} else {
			st.RefContent[c.module]++
		}
		st.TestMatches++
		st.RefMatches++
	}
	return st
}

// Score is METEOR from sufficient statistics (MeteorScorer.computeMetrics):
//
//	P = Σ_m w_m·(δ·h_c,m + (1−δ)·h_f,m) / (δ·|h_c| + (1−δ)·|h_f|)   (R likewise on the reference)
//	Fmean = 1 / ((1−α)/P + α/R) = P·R / (α·P + (1−α)·R)
//	frag = chunks / ((matches_h + matches_r)/2), or 0 if everything matched in one chunk
//	score = Fmean · (1 − γ·frag^β), and 0 when that is negative or undefined.
func (s *Scorer) Score(st Stats) float64 {
	p := s.params
	testLen := p.Delta*float64(st.TestLength-st.TestFunctionWords) + (1-p.Delta)*float64(st.TestFunctionWords)
	refLen := p.Delta*float64(st.RefLength-st.RefFunctionWords) + (1-p.Delta)*float64(st.RefFunctionWords)
	var testW, refW float64
	for i, w := range s.weights {
		testW += float64(st.TestContent[i]) * w * p.Delta
	}
	for i, w := range s.weights {
		refW += float64(st.RefContent[i]) * w * p.Delta
	}
	for i, w := range s.weights {
		testW += float64(st.TestFunction[i]) * w * (1 - p.Delta)
	}
	for i, w := range s.weights {
		refW += float64(st.RefFunction[i]) * w * (1 - p.Delta)
	}
	precision := testW / testLen
	recall := refW / refLen
	fmean := 1.0 / ((1.0-p.Alpha)/precision + p.Alpha/recall)
	var frag float64
	if st.whole() {
		frag = 0
	} else {
		frag = float64(st.Chunks) / (float64(st.TestMatches+st.RefMatches) / 2)
	}
	score := fmean * (1.0 - p.Gamma*math.Pow(frag, p.Beta))
	if math.IsNaN(score) {
		return 0
	}
	return math.Max(score, 0)
}

// Result is a corpus METEOR evaluation.
type Result struct {
	// Corpus is the score of the summed statistics of all segments
	// ([Stats.Add]), as the jar's final EVAL line (not the mean of segment
	// scores).
	Corpus float64
	// PerSegment are the segment scores.
	PerSegment []float64
	// Stats are the summed statistics.
	Stats Stats
}

// Corpus scores hyps[i] against refs[i] for every i.
func (s *Scorer) Corpus(refs [][]string, hyps []string) (Result, error) {
	if len(refs) != len(hyps) {
		return Result{}, fmt.Errorf("%w: %d references, %d hypotheses", ErrInput, len(refs), len(hyps))
	}
	if len(hyps) == 0 {
		return Result{}, fmt.Errorf("%w: no samples", ErrInput)
	}
	res := Result{PerSegment: make([]float64, len(hyps))}
	for i, h := range hyps {
		if len(refs[i]) == 0 {
			return Result{}, fmt.Errorf("%w: sample %d has no reference", ErrInput, i)
		}
		st := s.SegmentStats(h, refs[i])
		res.PerSegment[i] = s.Score(st)
		res.Stats.Add(st)
	}
	res.Corpus = s.Score(res.Stats)
	return res, nil
}

// CleanHypothesis applies what R2Gen's Meteor wrapper does to a hypothesis
// before sending it to the jar: "|||" removed and double spaces collapsed
// once (Python's str.replace, left to right).
func CleanHypothesis(h string) string {
	return strings.ReplaceAll(strings.ReplaceAll(h, "|||", ""), "  ", " ")
}
