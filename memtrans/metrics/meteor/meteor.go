package meteor

import (
	"errors"
	"fmt"
	"math"
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
// (exact 1.0, stem 0.6, synonym 0.8; the jar's paraphrase weight 0.6 has no
// module here).
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
	params    Params
	beam      int
	normalize bool
	funcWords []string
	wordnet   *WordNet
	wnDir     string
	noStem    bool
}

// Option configures a Scorer.
type Option func(*config) error

// WithWordNet enables the synonym module with an already loaded dictionary.
// Default: no synonym module.
func WithWordNet(wn *WordNet) Option {
	return func(c *config) error {
		if wn == nil {
			return fmt.Errorf("%w: nil WordNet", ErrOption)
		}
		c.wordnet = wn
		return nil
	}
}

// WithWordNetDir enables the synonym module with the WordNet database in dir
// (for example /usr/share/wordnet from Debian's wordnet-base). New fails if
// the directory cannot be read. Default: no synonym module.
func WithWordNetDir(dir string) Option {
	return func(c *config) error {
		c.wnDir = dir
		return nil
	}
}

// WithoutStem leaves out the stem module (exact matching only, plus
// synonyms if a WordNet is given). Default: stem module on.
func WithoutStem() Option {
	return func(c *config) error {
		c.noStem = true
		return nil
	}
}

// WithFunctionWords replaces the function-word list (compared in lower
// case). Default: [DefaultFunctionWords].
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
	funcWords map[string]struct{}
	wordnet   *WordNet
}

// New returns a Scorer with the exact and stem modules, the synonym module
// when a WordNet is given, the jar's English parameters and -norm
// normalisation.
func New(opts ...Option) (*Scorer, error) {
	c := config{params: EnglishParams, beam: DefaultBeamSize, normalize: true, funcWords: DefaultFunctionWords}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.wnDir != "" && c.wordnet == nil {
		wn, err := LoadWordNet(c.wnDir)
		if err != nil {
			return nil, err
		}
		c.wordnet = wn
	}
	s := &Scorer{
		params:    c.params,
		beam:      c.beam,
		normalize: c.normalize,
		modules:   []Module{Exact},
		funcWords: functionWordSet(c.funcWords),
		wordnet:   c.wordnet,
	}
	if !c.noStem {
		s.modules = append(s.modules, Stem)
	}
	if c.wordnet != nil {
		s.modules = append(s.modules, Synonym)
	}
	return s, nil
}

// Modules returns the matching modules in use, in matching order.
func (s *Scorer) Modules() []Module { return append([]Module(nil), s.modules...) }

// Name describes the score honestly, e.g. "METEOR (exact+stem; no synonym,
// no paraphrase)". Scores with different names are not comparable, and none
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
// word-based. Corpus scores sum them over segments before scoring.
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

// Add accumulates o into st.
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
	st.Chunks += o.Chunks
	st.TestMatches += o.TestMatches
	st.RefMatches += o.RefMatches
}

// tokens normalises (if configured) and splits a sentence.
func (s *Scorer) tokens(line string) []string {
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
		if _, ok := s.funcWords[strings.ToLower(w)]; ok {
			fh[i] = true
			st.TestFunctionWords++
		}
	}
	fr := make([]bool, len(ref))
	for j, w := range ref {
		if _, ok := s.funcWords[strings.ToLower(w)]; ok {
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
	for i, m := range s.modules {
		testW += float64(st.TestContent[i]) * m.Weight() * p.Delta
	}
	for i, m := range s.modules {
		refW += float64(st.RefContent[i]) * m.Weight() * p.Delta
	}
	for i, m := range s.modules {
		testW += float64(st.TestFunction[i]) * m.Weight() * (1 - p.Delta)
	}
	for i, m := range s.modules {
		refW += float64(st.RefFunction[i]) * m.Weight() * (1 - p.Delta)
	}
	precision := testW / testLen
	recall := refW / refLen
	fmean := 1.0 / ((1.0-p.Alpha)/precision + p.Alpha/recall)
	var frag float64
	if st.TestMatches == st.TestLength && st.RefMatches == st.RefLength && st.Chunks == 1 {
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
	// Corpus is the score of the summed statistics of all segments, as the
	// jar's final EVAL line (not the mean of segment scores).
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
