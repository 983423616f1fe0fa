package decode

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// sampler draws tokens as R2Gen's sample_next_word does for sample_method
// 'sample', 'topK' and 'top0.p': logits = logprobs / T, then
// Categorical(logits) over what top-k and top-p keep.
type sampler struct {
	rng   *rand.Rand
	temp  float32
	topK  int
	topP  float64
	cands []cand    // (V) tokens with finite logits, best first
	sel   topK      // top-k selection for small k
	w     []float64 // (V) their unnormalised probabilities
}

// maxSelectK is the largest top-k chosen by a one-pass selection; a larger k
// sorts the whole row.
const maxSelectK = 32

type cand struct {
	v float32
	w int
}

// byValueDesc orders candidates by value, descending, then by token id.
func byValueDesc(a, b cand) int {
	if c := cmp.Compare(b.v, a.v); c != 0 {
		return c
	}
	return cmp.Compare(a.w, b.w)
}

// choose draws a token from x, the row's log-probabilities. A row with no
// finite value falls back to argmax (token 0 for an all -Inf row).
func (s *sampler) choose(x []float32) int {
	hi := negInf
	for _, v := range x {
		hi = max(hi, v)
	}
	if math.IsInf(float64(hi), -1) {
		return argmax(x)
	}
	logit := func(v float32) float32 {
		if s.temp == 1 {
			return v
		}
		return v / s.temp
	}
	top := logit(hi)
	restrict := (s.topK > 0 && s.topK < len(x)) || (s.topP > 0 && s.topP < 1)
	if !restrict {
		s.w = grow(s.w, len(x))
		total := 0.0
		for i, v := range x {
			s.w[i] = math.Exp(float64(logit(v) - top))
			total += s.w[i]
		}
		return s.pick(s.w, total)
	}
	c := s.cands[:0]
	if s.topK > 0 && s.topK <= maxSelectK {
		// A few best: select them in one pass, ties to the lower id.
		q := &s.sel
		q.reset(s.topK)
		for i, v := range x {
			if l := logit(v); !math.IsInf(float64(l), -1) && !q.full(l) {
				q.offer(l, i)
			}
		}
		for j := range q.n {
			c = append(c, cand{q.v[j], q.i[j]})
		}
	} else {
		for i, v := range x {
			if !math.IsInf(float64(v), -1) {
				c = append(c, cand{logit(v), i})
			}
		}
		slices.SortFunc(c, byValueDesc)
		if s.topK > 0 && s.topK < len(c) {
			c = c[:s.topK]
		}
	}
	s.cands = c
	s.w = grow(s.w, len(c))
	w := s.w
	total := 0.0
	for i, e := range c {
		w[i] = math.Exp(float64(e.v - top))
		total += w[i]
	}
	if s.topP > 0 && s.topP < 1 {
		// Keep token i while the probability of tokens 0..i-1 is below
		// topP: R2Gen's mask = cumsum < p, shifted right by one.
		cum, keep := 0.0, len(c)
		for i := range c {
			if i > 0 && !(cum < s.topP) {
				keep = i
				break
			}
			cum += w[i] / total
		}
		c, w = c[:keep], w[:keep]
		total = 0
		for _, p := range w {
			total += p
		}
	}
	return c[s.pick(w, total)].w
}

// pick draws an index with probability w[i]/total, walking w in order; a
// draw that rounding carries past the end takes the last positive weight.
func (s *sampler) pick(w []float64, total float64) int {
	u := s.rng.Float64() * total
	last := 0
	for i, p := range w {
		if u < p {
			return i
		}
		if p > 0 {
			last = i
		}
		u -= p
	}
	return last
}
