package metrics

import "math"

// Smoothing constants of coco-caption's bleu_scorer.py: tiny keeps a zero
// match count from giving log(0), small keeps a zero guess count from
// dividing by zero.
const (
	bleuTiny  = 1e-15
	bleuSmall = 1e-9
)

// BLEUScores are BLEU-1..4 as coco-caption reports them.
type BLEUScores struct {
	// Corpus[k] is corpus-level BLEU-(k+1): clipped n-gram matches and
	// guesses are summed over all sentences before the geometric mean, and
	// the brevity penalty uses the summed hypothesis and reference lengths.
	Corpus [4]float64
	// PerSentence[i][k] is BLEU-(k+1) of sentence i alone, with its own
	// brevity penalty, as bleu_scorer.py's second return value (transposed).
	PerSentence [][4]float64
}

// bleuStats are the sufficient statistics of one sentence (cook_test in
// bleu_scorer.py).
type bleuStats struct {
	testLen int
	refLen  int // the "closest" reference length
	guess   [maxN]int
	correct [maxN]int
}

// cookBLEU computes one sentence's statistics against its references: n-gram
// counts clipped by the maximum count over the references, and the reference
// length closest to the hypothesis length, ties going to the shorter one
// (min over (|l - testlen|, l) in bleu_scorer.py).
func cookBLEU(refs []string, hyp string) bleuStats {
	return cookBLEUCounts(cookRefs(refs), precook(hyp))
}

// bleuRefs are the cooked references of one sentence (cook_refs).
type bleuRefs struct {
	lens      []int
	maxCounts [maxN]map[string]int
}

func cookRefs(refs []string) bleuRefs {
	var br bleuRefs
	for k := range br.maxCounts {
		br.maxCounts[k] = map[string]int{}
	}
	for _, r := range refs {
		nc := precook(r)
		br.lens = append(br.lens, nc.length)
		for k := range nc.counts {
			for g, c := range nc.counts[k] {
				if c > br.maxCounts[k][g] {
					br.maxCounts[k][g] = c
				}
			}
		}
	}
	return br
}

func cookBLEUCounts(br bleuRefs, test ngramCounts) bleuStats {
	st := bleuStats{testLen: test.length}
	best := -1
	for _, l := range br.lens {
		d := l - test.length
		if d < 0 {
			d = -d
		}
		if best < 0 || d < best || (d == best && l < st.refLen) {
			best, st.refLen = d, l
		}
	}
	for k := 0; k < maxN; k++ {
		st.guess[k] = max(0, test.length-k)
		for g, c := range test.counts[k] {
			st.correct[k] += min(c, br.maxCounts[k][g])
		}
	}
	return st
}

// bleuFromStats turns per-sentence statistics into corpus and per-sentence
// scores exactly as BleuScorer.compute_score(option="closest").
func bleuFromStats(stats []bleuStats) BLEUScores {
	out := BLEUScores{PerSentence: make([][4]float64, len(stats))}
	var testLen, refLen int
	var guess, correct [maxN]int
	for i, st := range stats {
		testLen += st.testLen
		refLen += st.refLen
		for k := 0; k < maxN; k++ {
			guess[k] += st.guess[k]
			correct[k] += st.correct[k]
		}
		out.PerSentence[i] = bleuScore(st.testLen, st.refLen, st.guess, st.correct)
	}
	out.Corpus = bleuScore(testLen, refLen, guess, correct)
	return out
}

// bleuScore is the cumulative geometric mean with brevity penalty:
//
//	BLEU-n = BP · (Π_{k≤n} (correct_k + tiny)/(guess_k + small))^(1/n)
//	BP = exp(1 − 1/ratio) if ratio < 1, ratio = (testlen + tiny)/(reflen + small).
func bleuScore(testLen, refLen int, guess, correct [maxN]int) [4]float64 {
	var out [4]float64
	prod := 1.0
	for k := 0; k < maxN; k++ {
		prod *= (float64(correct[k]) + bleuTiny) / (float64(guess[k]) + bleuSmall)
		out[k] = math.Pow(prod, 1/float64(k+1))
	}
	ratio := (float64(testLen) + bleuTiny) / (float64(refLen) + bleuSmall)
	if ratio < 1 {
		bp := math.Exp(1 - 1/ratio)
		for k := range out {
			out[k] *= bp
		}
	}
	return out
}

// BLEU computes BLEU-1..4 of hyps against refs as coco-caption's Bleu(4)
// scorer shipped with R2Gen: tokens from Python's str.split(), per-n-gram
// clipping by the maximum count over a sentence's references, the closest
// reference length (ties to the shorter), corpus-level sums, and the
// scorer's 1e-15/1e-9 smoothing. refs[i] holds the references of hyps[i]
// (at least one each).
func BLEU(refs [][]string, hyps []string) (BLEUScores, error) {
	if err := checkPairs(refs, hyps); err != nil {
		return BLEUScores{}, err
	}
	stats := make([]bleuStats, len(hyps))
	for i := range hyps {
		stats[i] = cookBLEU(refs[i], hyps[i])
	}
	return bleuFromStats(stats), nil
}
