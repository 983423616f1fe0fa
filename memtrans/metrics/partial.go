package metrics

import (
	"fmt"
	"math"

	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

// Mergeable statistics, for scoring a corpus split over many processes (a
// distributed runner's combine): each sample's [SampleStats] are computed
// where the sample is, folded into [Partial] values that merge in any order,
// and the merged Partial gives the same corpus scores as
// [Evaluator.Evaluate] over all samples (equal up to the order of floating-
// point sums of ROUGE-L and CIDEr-D; every other statistic is an integer).
//
// CIDEr-D needs the corpus's document frequencies before any sample can be
// scored, so it takes two passes: merge every sample into one Partial, then
// sum [Partial.CIDErD] of each sample (the Partial shipped to the samples as
// a side input), and pass that sum to [Evaluator.ScoresFromPartial].

// NGrams are a sentence's 1..4-gram counts: Counts[k] maps each (k+1)-gram,
// its tokens joined by single spaces, to its count; Length is the number of
// tokens.
type NGrams struct {
	Counts [4]map[string]int
	Length int
}

// BLEUStats are one sentence's BLEU sufficient statistics (cook_test in
// coco-caption's bleu_scorer.py): hypothesis length, closest reference
// length, and per order the n-gram guesses and clipped matches.
type BLEUStats struct {
	TestLen, RefLen int
	Guess, Correct  [4]int
}

// SampleStats are the sufficient statistics of one sample for every metric
// of an Evaluator. Their fields are exported so they can be encoded (JSON,
// gob) and shipped between processes.
type SampleStats struct {
	BLEU   BLEUStats
	ROUGEL float64 // the sample's ROUGE-L
	// Hyp and Refs are the cooked n-grams CIDEr-D scores.
	Hyp  NGrams
	Refs []NGrams
	// METEOR is zero when the Evaluator has METEOR off.
	METEOR meteor.Stats
	// RefLabels (first reference) and HypLabels are zero when clinical
	// efficacy is off.
	RefLabels, HypLabels chexpert.Labels
}

// SampleStats computes one hypothesis's statistics against its references,
// the per-sample work of [Accumulator.Add]. It is safe for concurrent use.
func (e *Evaluator) SampleStats(refs []string, hyp string) (SampleStats, error) {
	if len(refs) == 0 {
		return SampleStats{}, ErrNoReference
	}
	s, _ := e.cook(refs, hyp, nil)
	out := SampleStats{
		BLEU:   BLEUStats{TestLen: s.bleu.testLen, RefLen: s.bleu.refLen, Guess: s.bleu.guess, Correct: s.bleu.correct},
		ROUGEL: s.rouge,
		Hyp:    exportNGrams(s.cider.hyp),
		Refs:   make([]NGrams, len(s.cider.refs)),
		METEOR: s.meteor, RefLabels: s.refLab, HypLabels: s.hypLab,
	}
	for i, r := range s.cider.refs {
		out.Refs[i] = exportNGrams(r)
	}
	return out, nil
}

func exportNGrams(c ngramCounts) NGrams { return NGrams{Counts: c.counts, Length: c.length} }

func (g NGrams) internal() ngramCounts {
	c := ngramCounts{counts: g.Counts, length: g.Length}
	for k := range c.counts {
		if c.counts[k] == nil {
			c.counts[k] = map[string]int{}
		}
	}
	return c
}

// Partial is the mergeable corpus part of an evaluation: summed BLEU,
// METEOR and clinical-efficacy counts, the ROUGE-L sum, and CIDEr-D's
// document frequencies. The zero Partial is empty and ready to use. A
// Partial is not safe for concurrent use.
type Partial struct {
	N int // samples added
	// BLEU sums the samples' BLEU statistics.
	BLEU BLEUStats
	// ROUGELSum is the sum of the samples' ROUGE-L.
	ROUGELSum float64
	// METEOR sums the samples' METEOR statistics.
	METEOR meteor.Stats
	// TP, FP and FN count, per CheXpert observation, the samples whose
	// reference and hypothesis are both positive, only the hypothesis, and
	// only the reference.
	TP, FP, FN [chexpert.NumObservations]int
	// DF maps each n-gram to the number of samples whose references (as a
	// set) contain it: CIDEr-D's document frequencies.
	DF map[string]int
}

// Add folds one sample into p.
func (p *Partial) Add(s SampleStats) {
	p.N++
	p.BLEU.TestLen += s.BLEU.TestLen
	p.BLEU.RefLen += s.BLEU.RefLen
	for k := range p.BLEU.Guess {
		p.BLEU.Guess[k] += s.BLEU.Guess[k]
		p.BLEU.Correct[k] += s.BLEU.Correct[k]
	}
	p.ROUGELSum += s.ROUGEL
	p.METEOR.Add(s.METEOR)
	for o := range chexpert.NumObservations {
		g, h := s.RefLabels[o] == chexpert.Positive, s.HypLabels[o] == chexpert.Positive
		switch {
		case g && h:
			p.TP[o]++
		case h:
			p.FP[o]++
		case g:
			p.FN[o]++
		}
	}
	if p.DF == nil {
		p.DF = map[string]int{}
	}
	seen := map[string]struct{}{}
	for _, r := range s.Refs {
		for n := range r.Counts {
			for g := range r.Counts[n] {
				seen[g] = struct{}{}
			}
		}
	}
	for g := range seen {
		p.DF[g]++
	}
}

// Merge folds q into p; q is left unchanged.
func (p *Partial) Merge(q *Partial) {
	p.N += q.N
	p.BLEU.TestLen += q.BLEU.TestLen
	p.BLEU.RefLen += q.BLEU.RefLen
	for k := range p.BLEU.Guess {
		p.BLEU.Guess[k] += q.BLEU.Guess[k]
		p.BLEU.Correct[k] += q.BLEU.Correct[k]
	}
	p.ROUGELSum += q.ROUGELSum
	p.METEOR.Add(q.METEOR)
	for o := range p.TP {
		p.TP[o] += q.TP[o]
		p.FP[o] += q.FP[o]
		p.FN[o] += q.FN[o]
	}
	if len(q.DF) > 0 && p.DF == nil {
		p.DF = make(map[string]int, len(q.DF))
	}
	for g, c := range q.DF {
		p.DF[g] += c
	}
}

// CIDErD returns the CIDEr-D of one sample of the corpus p holds (every
// sample merged, this one included).
func (p *Partial) CIDErD(s SampleStats) float64 {
	c := &ciderCorpus{df: p.DF, refLen: math.Log(float64(p.N))}
	if c.df == nil {
		c.df = map[string]int{}
	}
	cs := ciderSample{hyp: s.Hyp.internal(), refs: make([]ciderDoc, len(s.Refs))}
	for i, r := range s.Refs {
		cs.refs[i] = r.internal()
	}
	return c.score(cs)
}

// ScoresFromPartial returns the corpus scores of the samples merged into p,
// given ciderSum, the sum of p.CIDErD over those samples. e must be
// configured as the Evaluator that computed the samples' statistics.
func (e *Evaluator) ScoresFromPartial(p *Partial, ciderSum float64) (*Scores, error) {
	if p.N <= 0 {
		return nil, ErrEmpty
	}
	n := float64(p.N)
	sc := &Scores{N: p.N}
	sc.BLEU = bleuScore(p.BLEU.TestLen, p.BLEU.RefLen, p.BLEU.Guess, p.BLEU.Correct)
	sc.ROUGEL = p.ROUGELSum / n
	sc.CIDErD = ciderSum / n
	if e.meteor != nil {
		sc.METEOR = e.meteor.Score(p.METEOR)
		sc.METEORName = e.meteor.Name()
	}
	if e.labeler != nil {
		// ClinicalEfficacy reads only the per-observation counts: rebuild
		// label rows that carry exactly those counts.
		rows := 1
		for o := range p.TP {
			if p.TP[o] < 0 || p.FP[o] < 0 || p.FN[o] < 0 {
				return nil, fmt.Errorf("metrics: negative clinical-efficacy count for observation %d", o)
			}
			rows = max(rows, p.TP[o]+p.FP[o]+p.FN[o])
		}
		refs := make([]chexpert.Labels, rows)
		hyps := make([]chexpert.Labels, rows)
		for o := range p.TP {
			i := 0
			for range p.TP[o] {
				refs[i][o], hyps[i][o] = chexpert.Positive, chexpert.Positive
				i++
			}
			for range p.FP[o] {
				hyps[i][o] = chexpert.Positive
				i++
			}
			for range p.FN[o] {
				refs[i][o] = chexpert.Positive
				i++
			}
		}
		ce, err := chexpert.ClinicalEfficacy(refs, hyps)
		if err != nil {
			return nil, err
		}
		sc.CE = &ce
	}
	return sc, nil
}
