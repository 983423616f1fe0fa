package meteor

import (
	"slices"
)

// This file ports the METEOR 1.5 aligner (edu.cmu.meteor.aligner.Aligner):
// candidate matches from each module in turn, one-to-one matches fixed in
// advance, then a left-to-right beam search over reference positions that
// prefers, in order, more weighted matches, fewer chunks and a smaller total
// distance. Only one-word matches exist here (no paraphrase module), so a
// match is a (hypothesis position, reference position, module) triple.
//
// Two behaviours of the jar are kept on purpose because they change which
// alignment wins: the search adds module weights to integer counters with
// Java's compound assignment, so a stem or synonym match (search weight 0.5)
// adds nothing to the match count the search ranks by; and when a path is
// extended by several candidate matches, each candidate's distance is added
// to the parent path, so later siblings and the "skip" path inherit it.

// searchWeight is the weight the jar's scorer gives a module during the
// alignment search (MeteorScorer.loadConfiguration): 1 for exact, 0.5 else.
func searchWeight(m Module) float64 {
	if m == Exact {
		return 1
	}
	return 0.5
}

type match struct {
	module int // index into the scorer's module list
	hyp    int // position in the hypothesis (the jar's line 1, matchStart)
	ref    int // position in the reference (the jar's line 2, start)
}

// alignment is the result for one hypothesis/reference pair.
type alignment struct {
	matches []int // matches[j]: index into cands of the match at reference position j, or -1
	cands   []match
	chunks  int
}

type partial struct {
	matches    []int32 // by reference position; -1 = none
	used1      []bool  // hypothesis words in use
	used2      []bool  // reference words in use
	matches1   int     // weighted (truncated) hypothesis-side matches
	matches2   int     // weighted (truncated) reference-side matches
	chunks     int
	idx        int
	lastEnd    int // end of the last match in the hypothesis, or -1
	distance   int
	matchCount int
}

func (p *partial) clone() *partial {
	q := *p
	q.matches = slices.Clone(p.matches)
	q.used1 = slices.Clone(p.used1)
	q.used2 = slices.Clone(p.used2)
	return &q
}

// addWeighted mimics Java's "int += double": the sum is truncated toward 0.
func addWeighted(counter int, w float64) int { return int(float64(counter) + w) }

// align finds the jar's alignment of hyp (line 1) to ref (line 2).
func (s *Scorer) align(hyp, ref []string) alignment {
	nh, nr := len(hyp), len(ref)
	byRef := make([][]int, nr) // candidate indices per reference position
	cover1 := make([]int, nh)
	cover2 := make([]int, nr)
	var cands []match
	add := func(mod, i, j int) {
		byRef[j] = append(byRef[j], len(cands))
		cands = append(cands, match{module: mod, hyp: i, ref: j})
		cover1[i]++
		cover2[j]++
	}

	// Identical sentences need only exact matches ("prevents beam search errors").
	mods := s.modules
	if slices.Equal(hyp, ref) {
		mods = mods[:1]
	}
	var hypStems, refStems []string
	var hypSyn, refSyn [][]int64
	for mi, mod := range mods {
		switch mod {
		case Exact:
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hyp[i] == ref[j] {
						add(mi, i, j)
					}
				}
			}
		case Stem:
			hypStems, refStems = stemAll(hyp), stemAll(ref)
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hypStems[i] == refStems[j] && hyp[i] != ref[j] {
						add(mi, i, j)
					}
				}
			}
		case Synonym:
			hypSyn, refSyn = s.synAll(hyp), s.synAll(ref)
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hyp[i] != ref[j] && intersects(hypSyn[i], refSyn[j]) {
						add(mi, i, j)
					}
				}
			}
		}
	}

	start := &partial{
		matches: make([]int32, nr),
		used1:   make([]bool, nh),
		used2:   make([]bool, nr),
		lastEnd: -1,
	}
	for j := range start.matches {
		start.matches[j] = -1
	}
	// One-to-one, non-overlapping matches are definite.
	for j := 0; j < nr; j++ {
		if len(byRef[j]) == 1 {
			c := cands[byRef[j][0]]
			if cover2[j] == 1 && cover1[c.hyp] == 1 {
				start.matches[j] = int32(byRef[j][0])
				start.used2[j] = true
				start.used1[c.hyp] = true
			}
		}
	}

	best := s.resolve(byRef, cands, start)

	a := alignment{matches: make([]int, nr), cands: cands}
	for j, m := range best.matches {
		a.matches[j] = int(m)
	}
	// Chunks of the final alignment (Aligner.getCountAndChunks).
	lastEnd := -1
	for j := 0; j < nr; {
		m := a.matches[j]
		if m < 0 {
			if lastEnd != -1 {
				a.chunks++
				lastEnd = -1
			}
			j++
			continue
		}
		c := cands[m]
		if lastEnd != -1 && c.hyp != lastEnd {
			a.chunks++
		}
		j = c.ref + 1
		lastEnd = c.hyp + 1
	}
	if lastEnd != -1 {
		a.chunks++
	}
	return a
}

// resolve is the jar's beam search (Aligner.resolve).
func (s *Scorer) resolve(byRef [][]int, cands []match, start *partial) *partial {
	nr := len(byRef)
	less := func(x, y *partial) int {
		// More matches first, then fewer chunks, then shorter distance.
		if d := (y.matches1 + y.matches2) - (x.matches1 + x.matches2); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		if d := x.chunks - y.chunks; d != 0 {
			return d
		}
		return x.distance - y.distance
	}
	take := func(p *partial, c match) {
		w := searchWeight(s.modules[c.module])
		p.matchCount++
		p.matches1 = addWeighted(p.matches1, w)
		p.matches2 = addWeighted(p.matches2, w)
		if p.lastEnd != -1 && c.hyp != p.lastEnd {
			p.chunks++
		}
		p.idx = c.ref + 1
		p.lastEnd = c.hyp + 1
	}

	next := []*partial{start}
	var paths []*partial
	for cur := 0; cur <= nr; cur++ {
		paths, next = next, nil
		slices.SortStableFunc(paths, less)
		for rank := 0; rank < s.beam && rank < len(paths); rank++ {
			p := paths[rank]
			if cur == nr {
				// Path complete: close the last chunk.
				if p.lastEnd != -1 {
					p.chunks++
				}
				next = append(next, p)
				continue
			}
			if p.used2[cur] {
				if cur < p.idx {
					next = append(next, p)
				} else if m := p.matches[p.idx]; m >= 0 {
					// Fixed match.
					c := cands[m]
					take(p, c)
					p.distance += abs(c.ref - c.hyp)
					next = append(next, p)
				}
				continue
			}
			for _, ci := range byRef[cur] {
				c := cands[ci]
				if p.used1[c.hyp] || p.used2[c.ref] {
					continue
				}
				q := p.clone()
				q.used1[c.hyp], q.used2[c.ref] = true, true
				q.matches[cur] = int32(ci)
				take(q, c)
				p.distance += abs(c.ref - c.hyp) // the jar adds this to the parent
				next = append(next, q)
			}
			// Try skipping this position.
			if p.lastEnd != -1 {
				p.chunks++
				p.lastEnd = -1
			}
			p.idx++
			next = append(next, p)
		}
		if len(next) == 0 {
			next = append(next, paths[0])
		}
	}
	slices.SortStableFunc(next, less)
	return next[0]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func stemAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = EnglishStem(w)
	}
	return out
}

func (s *Scorer) synAll(words []string) [][]int64 {
	out := make([][]int64, len(words))
	for i, w := range words {
		out[i] = s.wordnet.Synsets(w)
		slices.Sort(out[i])
	}
	return out
}

// intersects reports whether two sorted sets share an element.
func intersects(a, b []int64) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return true
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return false
}
