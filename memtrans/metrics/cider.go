package metrics

import "math"

// ciderSigma is the standard deviation of CIDEr-D's Gaussian length penalty.
const ciderSigma = 6.0

// CIDErScores are CIDEr-D as coco-caption's Cider scorer reports it.
type CIDErScores struct {
	// Corpus is the mean of PerSentence (numpy's pairwise mean).
	Corpus      float64
	PerSentence []float64
}

// ciderDoc is one sentence's cooked n-grams: counts per order.
type ciderDoc = ngramCounts

// ciderSample is one hypothesis with its references, cooked.
type ciderSample struct {
	hyp  ciderDoc
	refs []ciderDoc
}

func cookCIDEr(refs []string, hyp string) ciderSample {
	s := ciderSample{hyp: precook(hyp), refs: make([]ciderDoc, len(refs))}
	for i, r := range refs {
		s.refs[i] = precook(r)
	}
	return s
}

// ciderVec is the tf-idf vector of one sentence (counts2vec in
// cider_scorer.py): vec[n][g] = tf(g)·(log N − log max(1, df(g))), its norm
// per order, and its "length", which cider_scorer.py counts as the number of
// bigrams (its test `n == 1` is on a 0-based order index), i.e. max(0, len−1).
type ciderVec struct {
	vec    [maxN]map[string]float64
	norm   [maxN]float64
	length int
}

func (c *ciderCorpus) vector(d ciderDoc) ciderVec {
	var v ciderVec
	for n := 0; n < maxN; n++ {
		v.vec[n] = make(map[string]float64, len(d.counts[n]))
		for g, tf := range d.counts[n] {
			df := math.Log(math.Max(1, float64(c.df[g])))
			x := float64(tf) * (c.refLen - df)
			v.vec[n][g] = x
			v.norm[n] += x * x
			if n == 1 {
				v.length += tf
			}
		}
		v.norm[n] = math.Sqrt(v.norm[n])
	}
	return v
}

// ciderCorpus holds the document frequencies of the scored set: df(g) is the
// number of samples whose references (as a set) contain g, and refLen is
// log(number of samples).
type ciderCorpus struct {
	df     map[string]int
	refLen float64
}

func newCIDErCorpus(samples []ciderSample) *ciderCorpus {
	c := &ciderCorpus{df: map[string]int{}, refLen: math.Log(float64(len(samples)))}
	seen := map[string]struct{}{}
	for _, s := range samples {
		clear(seen)
		for _, r := range s.refs {
			for n := range r.counts {
				for g := range r.counts[n] {
					seen[g] = struct{}{}
				}
			}
		}
		for g := range seen {
			c.df[g]++
		}
	}
	return c
}

// score is CIDEr-D of one sample: for each order n the clipped cosine
//
//	Σ_g min(h_g, r_g)·r_g / (|h|·|r|) · exp(−Δ²/(2σ²)),  Δ = len(h) − len(r),
//
// summed over references, averaged over the 4 orders, divided by the number
// of references and multiplied by 10.
func (c *ciderCorpus) score(s ciderSample) float64 {
	h := c.vector(s.hyp)
	var total [maxN]float64
	for _, rd := range s.refs {
		r := c.vector(rd)
		delta := float64(h.length - r.length)
		pen := math.Pow(math.E, -(delta*delta)/(2*ciderSigma*ciderSigma))
		for n := 0; n < maxN; n++ {
			val := 0.0
			for g, hv := range h.vec[n] {
				rv := r.vec[n][g]
				val += math.Min(hv, rv) * rv
			}
			if h.norm[n] != 0 && r.norm[n] != 0 {
				val /= h.norm[n] * r.norm[n]
			}
			total[n] += val * pen
		}
	}
	avg := npMean(total[:])
	avg /= float64(len(s.refs))
	return avg * 10
}

func ciderFromSamples(samples []ciderSample) CIDErScores {
	c := newCIDErCorpus(samples)
	out := CIDErScores{PerSentence: make([]float64, len(samples))}
	for i, s := range samples {
		out.PerSentence[i] = c.score(s)
	}
	out.Corpus = npMean(out.PerSentence)
	return out
}

// CIDErD computes CIDEr-D (σ = 6, clipped tf-idf, ×10) of hyps against refs
// as coco-caption's Cider scorer: document frequencies come from the
// references of this scored set, so a score depends on the whole set.
// refs[i] holds the references of hyps[i].
//
// One departure: when no reference contains a word, Python fails an
// assertion (max() of an empty sequence); this function returns zeros.
func CIDErD(refs [][]string, hyps []string) (CIDErScores, error) {
	if err := checkPairs(refs, hyps); err != nil {
		return CIDErScores{}, err
	}
	samples := make([]ciderSample, len(hyps))
	for i := range hyps {
		samples[i] = cookCIDEr(refs[i], hyps[i])
	}
	return ciderFromSamples(samples), nil
}
