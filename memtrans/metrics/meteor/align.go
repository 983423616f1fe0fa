package meteor

import (
	"slices"
	"sync"
	"unicode/utf16"
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
// alignment search (MeteorScorer.loadConfiguration): 1 for exact, 0.5 else,
// whatever its position.
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
	// state holds, back to back: the match index at each reference
	// position (-1 = none), then hypothesis words in use, then reference
	// words in use (0/1).
	state []int32
	nr    int
	// A path made by extending parent with candidate pending has no state
	// until it survives a beam cut (materialize); most never do.
	parent     *partial
	pending    int32
	matches1   int // weighted (truncated) hypothesis-side matches
	matches2   int // weighted (truncated) reference-side matches
	chunks     int
	idx        int
	lastEnd    int // end of the last match in the hypothesis, or -1
	distance   int
	matchCount int
}

func (p *partial) match(j int) int32 { return p.state[j] }
func (p *partial) used1(i int) bool  { return p.state[p.nr+i] != 0 }
func (p *partial) used2(j int) bool  { return p.state[len(p.state)-p.nr+j] != 0 }
func (p *partial) set(c match, ci int) {
	p.state[c.ref] = int32(ci)
	p.state[p.nr+c.hyp] = 1
	p.state[len(p.state)-p.nr+c.ref] = 1
}

// pathArena hands out partial paths and their state from blocks that are
// reused from one alignment to the next (through arenaPool), so the search
// allocates almost nothing in steady state.
type pathArena struct {
	ints       [][]int32
	ib, ioff   int
	paths      [][]partial
	pb, poff   int
	next, prev []*partial // reusable path lists of the beam search
}

const (
	arenaInts  = 1 << 14
	arenaPaths = 512
)

var arenaPool = sync.Pool{New: func() any { return new(pathArena) }}

func (a *pathArena) reset() {
	a.ib, a.ioff, a.pb, a.poff = 0, 0, 0, 0
	clear(a.next[:cap(a.next)])
	clear(a.prev[:cap(a.prev)])
}

func (a *pathArena) newPath() *partial {
	if a.pb == len(a.paths) {
		a.paths = append(a.paths, make([]partial, arenaPaths))
	}
	q := &a.paths[a.pb][a.poff]
	if a.poff++; a.poff == arenaPaths {
		a.pb, a.poff = a.pb+1, 0
	}
	return q
}

func (a *pathArena) newState(n int) []int32 {
	for {
		if a.ib == len(a.ints) {
			a.ints = append(a.ints, make([]int32, max(n, arenaInts)))
		}
		if b := a.ints[a.ib]; len(b)-a.ioff >= n {
			s := b[a.ioff : a.ioff+n : a.ioff+n]
			a.ioff += n
			return s
		}
		a.ib, a.ioff = a.ib+1, 0
	}
}

// extend returns a stateless copy of p's search fields that will become p
// plus candidate ci when materialized.
func (a *pathArena) extend(p *partial, ci int) *partial {
	q := a.newPath()
	*q = *p
	q.state, q.parent, q.pending = nil, p, int32(ci)
	return q
}

// materialize gives q its state: its parent's plus the pending match.
func (a *pathArena) materialize(q *partial, cands []match) {
	if q.state != nil {
		return
	}
	q.state = a.newState(len(q.parent.state))
	copy(q.state, q.parent.state)
	q.set(cands[q.pending], int(q.pending))
	q.parent = nil
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

	// The jar compares words (and stems) by their Java hash codes
	// (Stage.wordsToKeys), so do we: two different words with the same
	// hash code match exactly there, and here too.
	hk, rk := hashAll(hyp), hashAll(ref)
	// Identical sentences need only the first module ("prevents beam search
	// errors").
	mods := s.modules
	if slices.Equal(hk, rk) {
		mods = mods[:1]
	}
	for mi, mod := range mods {
		switch mod {
		case Exact:
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hk[i] == rk[j] {
						add(mi, i, j)
					}
				}
			}
		case Stem:
			hs, rs := stemKeys(hyp), stemKeys(ref)
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hs[i] == rs[j] && hk[i] != rk[j] {
						add(mi, i, j)
					}
				}
			}
		case Synonym:
			hypSyn, refSyn := s.synAll(hyp), s.synAll(ref)
			for j := 0; j < nr; j++ {
				for i := 0; i < nh; i++ {
					if hk[i] != rk[j] && intersects(hypSyn[i], refSyn[j]) {
						add(mi, i, j)
					}
				}
			}
		}
	}

	start := &partial{state: make([]int32, nr+nh+nr), nr: nr, lastEnd: -1}
	for j := 0; j < nr; j++ {
		start.state[j] = -1
	}
	// One-to-one, non-overlapping matches are definite.
	for j := 0; j < nr; j++ {
		if len(byRef[j]) == 1 {
			c := cands[byRef[j][0]]
			if cover2[j] == 1 && cover1[c.hyp] == 1 {
				start.set(c, byRef[j][0])
			}
		}
	}

	best := s.resolve(byRef, cands, start)

	a := alignment{matches: make([]int, nr), cands: cands}
	for j := range a.matches {
		a.matches[j] = int(best.match(j))
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

	arena := arenaPool.Get().(*pathArena)
	defer func() {
		arena.reset()
		arenaPool.Put(arena)
	}()
	next := append(arena.next[:0], start)
	paths := arena.prev[:0]
	for cur := 0; cur <= nr; cur++ {
		paths, next = next, paths[:0]
		slices.SortStableFunc(paths, less)
		for rank := 0; rank < s.beam && rank < len(paths); rank++ {
			p := paths[rank]
			arena.materialize(p, cands)
			if cur == nr {
				// Path complete: close the last chunk.
				if p.lastEnd != -1 {
					p.chunks++
				}
				next = append(next, p)
				continue
			}
			if p.used2(cur) {
				if cur < p.idx {
					next = append(next, p)
				} else if m := p.match(p.idx); m >= 0 {
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
				if p.used1(c.hyp) || p.used2(c.ref) {
					continue
				}
				q := arena.extend(p, ci)
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
			arena.materialize(paths[0], cands)
			next = append(next, paths[0])
		}
	}
	slices.SortStableFunc(next, less)
	arena.materialize(next[0], cands)
	best := *next[0]
	best.state = slices.Clone(best.state) // the arena is reused
	arena.next, arena.prev = next, paths
	return &best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// javaHash is String.hashCode: s[0]·31^(n−1) + … + s[n−1] over the
// string's UTF-16 code units, in 32-bit arithmetic.
func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + r1
			r = r2
		}
		h = 31*h + r
	}
	return h
}

func hashAll(words []string) []int32 {
	out := make([]int32, len(words))
	for i, w := range words {
		out[i] = javaHash(w)
	}
	return out
}

// stemKeys are the hash codes of the words' stems (StemMatcher).
func stemKeys(words []string) []int32 {
	out := make([]int32, len(words))
	for i, w := range words {
		out[i] = javaHash(EnglishStem(w))
	}
	return out
}

func (s *Scorer) synAll(words []string) [][]int32 {
	out := make([][]int32, len(words))
	for i, w := range words {
		out[i] = s.wordnet.synsetsOf(w)
	}
	return out
}

// intersects reports whether two sorted sets share an element.
func intersects(a, b []int32) bool {
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
