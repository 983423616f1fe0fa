package metrics

// rougeBeta is the recall weight of coco-caption's Rouge scorer.
const rougeBeta = 1.2

// ROUGEScores are ROUGE-L as coco-caption reports it.
type ROUGEScores struct {
	// Corpus is the mean of PerSentence (numpy's pairwise mean).
	Corpus      float64
	PerSentence []float64
}

// rougeL is Rouge.calc_score of coco-caption for one hypothesis:
//
//	P = max_r LCS(c, r)/|c|,  R = max_r LCS(c, r)/|r|   (maxima taken separately)
//	F = (1 + β²)·P·R / (R + β²·P),  β = 1.2;  F = 0 when P or R is 0.
//
// Tokens come from splitting on single spaces, so doubled spaces give empty
// tokens that count towards lengths and can match each other, as in Python.
func rougeL(refs []string, hyp string, buf []int) (float64, []int) {
	c := spaceSplit(hyp)
	var pMax, rMax float64
	for _, ref := range refs {
		r := spaceSplit(ref)
		var l int
		l, buf = lcs(r, c, buf)
		if p := float64(l) / float64(len(c)); p > pMax {
			pMax = p
		}
		if rc := float64(l) / float64(len(r)); rc > rMax {
			rMax = rc
		}
	}
	if pMax == 0 || rMax == 0 {
		return 0, buf
	}
	b2 := rougeBeta * rougeBeta
	return ((1 + b2) * pMax * rMax) / (rMax + b2*pMax), buf
}

// lcs returns the length of the longest common subsequence of a and b with a
// rolling one-row table; buf is reused scratch space.
func lcs(a, b []string, buf []int) (int, []int) {
	if len(a) < len(b) {
		a, b = b, a
	}
	n := len(b) + 1
	if cap(buf) < 2*n {
		buf = make([]int, 2*n)
	}
	prev, cur := buf[:n], buf[n:2*n]
	clear(prev)
	for i := 1; i <= len(a); i++ {
		cur[0] = 0
		ai := a[i-1]
		for j := 1; j <= len(b); j++ {
			if ai == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else if prev[j] >= cur[j-1] {
				cur[j] = prev[j]
			} else {
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)], buf
}

// ROUGEL computes ROUGE-L (β = 1.2) of hyps against refs as coco-caption's
// Rouge scorer shipped with R2Gen. refs[i] holds the references of hyps[i].
func ROUGEL(refs [][]string, hyps []string) (ROUGEScores, error) {
	if err := checkPairs(refs, hyps); err != nil {
		return ROUGEScores{}, err
	}
	out := ROUGEScores{PerSentence: make([]float64, len(hyps))}
	var buf []int
	for i := range hyps {
		out.PerSentence[i], buf = rougeL(refs[i], hyps[i], buf)
	}
	out.Corpus = npMean(out.PerSentence)
	return out, nil
}
