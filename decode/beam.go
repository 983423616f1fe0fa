package decode

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Semantics selects whose beam search [BeamSearch] reproduces.
type Semantics int

const (
	// R2Gen is R2Gen's (self-critical.pytorch's) beam search: a beam that
	// emits EOS is saved and kept alive with its running sum lowered by
	// 1000; every beam is saved at the last step; the saved beams are
	// ranked by p.
	R2Gen Semantics = iota

	// M2 is the Meshed-Memory Transformer's beam search: a finished beam
	// stays in the beam with its score frozen (its only continuation is
	// word 0, at the same score; every other word scores -999, as an
	// absolute value), every beam runs to MaxLen, and the beams are ranked
	// by their final score. Groups, LengthPenalty, Temperature and
	// DecodingConstraint are not defined for it.
	M2
)

// String returns "r2gen" or "m2".
func (s Semantics) String() string {
	switch s {
	case R2Gen:
		return "r2gen"
	case M2:
		return "m2"
	}
	return fmt.Sprintf("Semantics(%d)", int(s))
}

// BeamSearch keeps the Size best partial hypotheses of each study at every
// step (see the package doc for R2Gen's rules; [M2] selects the Meshed-Memory
// Transformer's). It returns the N best hypotheses per study, best first.
//
// The zero value is not usable: Size and MaxLen must be set. Zero BOS and EOS
// are R2Gen's; M² uses BOS 2 and EOS 3.
type BeamSearch struct {
	// Size is the beam size k, all groups together (R2Gen's beam_size:
	// 3 for IU X-Ray; the released MIMIC-CXR test script uses 2). It must
	// be in [1, V].
	Size int

	// MaxLen, BOS, EOS and Attention are as in [Greedy].
	MaxLen    int
	BOS, EOS  int
	Attention bool

	// N is the number of hypotheses returned per study (0 means 1, at most
	// Size). With groups they are R2Gen's done_beams order: the best Size/Groups
	// of group 0, then of group 1, and so on; the first is group 0's best.
	N int

	// Groups splits the beam into groups for diverse beam search (R2Gen's
	// group_size); 0 means 1. Size must be a multiple of Groups.
	Groups int

	// Diversity is λ (R2Gen's diversity_lambda, whose default is 0.5): at
	// each step, group g's log-probability of a word is lowered by λ for
	// every beam of groups 0..g-1 that chose that word at the same step.
	// The groups run in lockstep, not on self-critical.pytorch's staggered
	// schedule (see the package doc).
	Diversity float32

	// LengthPenalty turns a saved beam's sum into its rank score p; nil is
	// the identity (R2Gen's default). See [WuPenalty], [AvgPenalty],
	// [ParsePenalty].
	LengthPenalty Penalty

	// Temperature, if not 0 or 1, renormalises the log-probabilities of
	// every step but the first as log_softmax(x / T), as R2Gen does.
	Temperature float32

	// DecodingConstraint sets the log-probability of each beam's previous
	// word to -Inf, as R2Gen's decoding_constraint.
	DecodingConstraint bool

	// Semantics is [R2Gen] (the zero value) or [M2].
	Semantics Semantics

	// FullLength runs all MaxLen steps, as the published code does, instead
	// of stopping once the returned hypotheses can no longer change. The
	// results are the same; only the number of model steps differs.
	FullLength bool
}

// String names the settings: "beam3", "m2beam5", "beam6x2-λ0.5-wu", ….
func (o BeamSearch) String() string {
	var b strings.Builder
	if o.Semantics == M2 {
		b.WriteString("m2")
	}
	fmt.Fprintf(&b, "beam%d", o.Size)
	if o.Groups > 1 {
		fmt.Fprintf(&b, "x%d-λ%g", o.Groups, o.Diversity)
	}
	if o.LengthPenalty != nil {
		b.WriteString("-lp")
	}
	if o.Temperature != 0 && o.Temperature != 1 {
		fmt.Fprintf(&b, "-t%g", o.Temperature)
	}
	if o.DecodingConstraint {
		b.WriteString("+noRepeat")
	}
	if o.FullLength {
		b.WriteString("-full")
	}
	return b.String()
}

// Decode implements [Strategy].
func (o BeamSearch) Decode(ctx context.Context, m Model) ([][]Hypothesis, error) {
	s, err := begin(ctx, m, common{maxLen: o.MaxLen, bos: o.BOS, eos: o.EOS, attention: o.Attention})
	if err != nil {
		return nil, err
	}
	defer s.end()
	if err := o.check(s.V); err != nil {
		return nil, err
	}
	if s.B == 0 {
		return [][]Hypothesis{}, nil
	}
	if err := s.checkRows(s.B * o.Size); err != nil {
		return nil, err
	}
	if o.Semantics == M2 {
		return o.m2(s)
	}
	return o.r2gen(s)
}

func (o BeamSearch) groups() int { return max(o.Groups, 1) }

// need returns how many of group g's saved beams are returned: the first N
// of the groups' best Size/Groups each, in group order.
func (o BeamSearch) need(g int) int {
	bd := o.Size / o.groups()
	return min(max(o.returns()-g*bd, 0), bd)
}
func (o BeamSearch) returns() int { return max(o.N, 1) }
func (o BeamSearch) temp() float32 {
	if o.Temperature == 0 {
		return 1
	}
	return o.Temperature
}

func (o BeamSearch) check(V int) error {
	switch {
	case o.Size <= 0 || o.Size > V:
		return fmt.Errorf("%w: %d with vocabulary %d", ErrBeamSize, o.Size, V)
	case o.Groups < 0:
		return fmt.Errorf("%w: %d groups", ErrOption, o.Groups)
	case o.Size%o.groups() != 0:
		return fmt.Errorf("%w: %d is not a multiple of %d groups", ErrBeamSize, o.Size, o.Groups)
	case o.N < 0 || o.N > o.Size:
		return fmt.Errorf("%w: %d hypotheses from a beam of %d", ErrOption, o.N, o.Size)
	case math.IsNaN(float64(o.Diversity)) || math.IsInf(float64(o.Diversity), 0):
		return fmt.Errorf("%w: diversity %v", ErrOption, o.Diversity)
	case !(o.temp() > 0) || o.temp() > maxFinite:
		return fmt.Errorf("%w: temperature %v", ErrOption, o.Temperature)
	case o.Semantics != R2Gen && o.Semantics != M2:
		return fmt.Errorf("%w: %v", ErrOption, o.Semantics)
	case o.Semantics == M2 && (o.groups() > 1 || o.LengthPenalty != nil || o.temp() != 1 || o.DecodingConstraint):
		return fmt.Errorf("%w: M² beam search has no groups, length penalty, temperature or decoding constraint", ErrOption)
	}
	return nil
}

// doneEntry is a saved beam: the row it ended in at step t, and its p.
type doneEntry struct {
	t, row int
	p      float64
}

// insertDone adds e to list (list[:n] sorted by p, descending, earlier
// entries first among equals, as Python's stable sorted(key=-p)), keeping
// at most len(list) entries; it returns the new count.
func insertDone(list []doneEntry, n int, e doneEntry) int {
	pos := n
	for pos > 0 && list[pos-1].p < e.p {
		pos--
	}
	if pos >= len(list) {
		return n
	}
	if n < len(list) {
		n++
	}
	copy(list[pos+1:n], list[pos:n-1])
	list[pos] = e
	return n
}

// r2gen is caption_model.beam_search with R2Gen's settings. Row layout:
// b·k + g·bd + j for study b, group g, beam j of bd = k/groups.
func (o BeamSearch) r2gen(s *session) ([][]Hypothesis, error) {
	B, V, k := s.B, s.V, o.Size
	G := o.groups()
	bd := k / G
	R := B * k
	N := o.returns()
	T := o.temp()
	lam := o.Diversity
	w := s.w
	w.hist.reset(R, s.A)
	w.tok, w.next, w.src = grow(w.tok, R), grow(w.next, R), grow(w.src, R)
	w.sums, w.sums2 = grow(w.sums, R), grow(w.sums2, R)
	w.change = grow(w.change, V)
	clear(w.change)
	w.done, w.doneN = grow(w.done, B*G*bd), grow(w.doneN, B*G)
	clear(w.doneN)
	for i := range B {
		w.tok[i] = s.c.bos
	}
	// Early stop is exact while sums can only fall: identity penalty,
	// λ ≥ 0 and log-probabilities ≤ 0 (checked at every step).
	early := !o.FullLength && o.LengthPenalty == nil && lam >= 0
	for t := 0; t < s.c.maxLen; t++ {
		lp, positive, err := s.step(t, w.tok)
		if err != nil {
			return nil, err
		}
		if positive {
			early = false
		}
		if t > 0 {
			for r := range s.cur {
				x := lp[r*V : (r+1)*V]
				if T != 1 {
					logSoftmaxTemp(x, T)
				}
				if o.DecodingConstraint {
					x[w.tok[r]] = negInf
				}
			}
		}
		sums, newSums := w.sums, w.sums2
		last := t == s.c.maxLen-1
		for b := range B {
			for g := range G {
				base := b*k + g*bd
				if g > 0 && lam != 0 {
					s.diversity(b*k, g*bd, lam)
				}
				nb := bd
				if t == 0 {
					nb = 1
				}
				w.top.reset(bd)
				for j := range nb {
					row, sum := b, float32(0)
					if t > 0 {
						row, sum = base+j, sums[base+j]
					}
					x := lp[row*V : (row+1)*V]
					if g > 0 && lam != 0 {
						w.top.offerDiverse(sum, x, w.change, j*V)
					} else {
						w.top.offerRow(sum, x, j*V)
					}
				}
				// bd ≤ V candidates came from every row: all slots are full.
				for vix := range bd {
					fi := w.top.i[vix]
					j, word := fi/V, fi%V
					prow := b
					if t > 0 {
						prow = base + j
					}
					nrow := base + vix
					w.next[nrow], newSums[nrow], w.src[nrow] = word, w.top.v[vix], prow
					w.hist.set(t, nrow, word, prow, lp[prow*V+word])
				}
				if g > 0 && lam != 0 {
					for _, word := range w.touched {
						w.change[word] = 0
					}
				}
				// Save the beams that ended (or all, at the last step),
				// then lower their running sums by 1000.
				gi := b*G + g
				list := w.done[gi*bd : gi*bd+o.need(g)]
				for vix := range bd {
					nrow := base + vix
					if w.next[nrow] != s.c.eos && !last {
						continue
					}
					if len(list) > 0 {
						p := float64(newSums[nrow])
						if o.LengthPenalty != nil {
							p = o.LengthPenalty(t+1, p)
						}
						w.doneN[gi] = insertDone(list, w.doneN[gi], doneEntry{t: t, row: nrow, p: p})
					}
					newSums[nrow] -= 1000
				}
			}
		}
		w.sums, w.sums2 = newSums, sums
		w.tok, w.next = w.next, w.tok
		if last || (early && o.decided(s)) {
			break
		}
		if err := s.reorder(w.src[:R]); err != nil {
			return nil, err
		}
	}
	w.picks = grow(w.picks, B*N)[:0]
	for b := range B {
		for g := range G {
			gi := b*G + g
			for _, e := range w.done[gi*bd : gi*bd+o.need(g)][:w.doneN[gi]] {
				w.picks = append(w.picks, pick{t: e.t, row: e.row, score: e.p})
			}
		}
	}
	if len(w.picks) != B*N {
		return nil, fmt.Errorf("decode: internal error: %d hypotheses for %d studies × %d", len(w.picks), B, N)
	}
	return s.results(w.picks, N, false), nil
}

// decided reports whether no beam of any study can still enter the returned
// hypotheses: every group whose beams are returned has saved as many as are
// returned, and the last of them scores at least every running sum of the
// group. Later beams score at most the running sums (log-probabilities are
// ≤ 0), and a later equal score ranks after an earlier one.
func (o BeamSearch) decided(s *session) bool {
	k, G := o.Size, o.groups()
	bd := k / G
	w := s.w
	for b := range s.B {
		for g := range G {
			n := o.need(g)
			if n == 0 {
				break
			}
			gi := b*G + g
			if w.doneN[gi] < n {
				return false
			}
			worst := w.done[gi*bd+n-1].p
			for j := range bd {
				if float64(w.sums[b*k+g*bd+j]) > worst {
					return false
				}
			}
		}
	}
	return true
}

// diversity fills w.change with R2Gen's add_diversity penalty for group g of
// the study whose rows start at base: change[word] = count·λ in float32,
// count being the beams of groups before g (their first g0 rows) that chose
// word at this step. w.touched lists the words set.
func (s *session) diversity(base, g0 int, lam float32) {
	w := s.w
	w.touched = w.touched[:0]
	for r := base; r < base+g0; r++ {
		word := w.next[r]
		if w.change[word] == 0 {
			w.touched = append(w.touched, word)
		}
		w.change[word]++
	}
	for _, word := range w.touched {
		w.change[word] = float32(w.change[word] * lam)
	}
}

// offerDiverse is offerRow with R2Gen's diversity: the candidate is
// base + (x[w] - change[w]), each operation rounded to float32 as torch's
// logprobs - change·λ then beam_sum + logprobs.
func (q *topK) offerDiverse(base float32, x, change []float32, off int) {
	for w, v := range x {
		c := base + float32(v-change[w])
		if q.full(c) {
			continue
		}
		q.offer(c, off+w)
	}
}

// logSoftmaxTemp replaces x by log_softmax(x / T), as R2Gen does to every
// beam step's log-probabilities but the first. A row with no finite value is
// left as it is.
func logSoftmaxTemp(x []float32, T float32) {
	hi := negInf
	for i, v := range x {
		x[i] = v / T
		hi = max(hi, x[i])
	}
	if math.IsInf(float64(hi), -1) {
		return
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(float64(v - hi))
	}
	lse := hi + float32(math.Log(sum))
	for i, v := range x {
		x[i] = v - lse
	}
}

// m2 is the Meshed-Memory Transformer's BeamSearch.apply (beam_search.py)
// with out_size = N. Row layout: b·k + j.
func (o BeamSearch) m2(s *session) ([][]Hypothesis, error) {
	B, V, k := s.B, s.V, o.Size
	R := B * k
	N := o.returns()
	w := s.w
	w.hist.reset(R, s.A)
	w.tok, w.next, w.src = grow(w.tok, R), grow(w.next, R), grow(w.src, R)
	w.sums, w.sums2 = grow(w.sums, R), grow(w.sums2, R)
	w.fin, w.fin2 = grow(w.fin, R), grow(w.fin2, R)
	clear(w.fin)
	for i := range B {
		w.tok[i] = s.c.bos
	}
	const frozen = -999 // M²'s old_seq_logprob[:, :, 1:] = -999
	tEnd := 0
	for t := 0; t < s.c.maxLen; t++ {
		tEnd = t
		lp, _, err := s.step(t, w.tok)
		if err != nil {
			return nil, err
		}
		if t > 0 {
			// seq_mask *= (selected_words != eos)
			for r := range R {
				w.fin[r] = w.fin[r] || w.tok[r] == s.c.eos
			}
		}
		seq, newSeq := w.sums, w.sums2
		for b := range B {
			nb := k
			if t == 0 {
				nb = 1
			}
			w.top.reset(k)
			for j := range nb {
				row, sum := b, float32(0)
				if t > 0 {
					row, sum = b*k+j, seq[b*k+j]
				}
				if t > 0 && w.fin[row] {
					// candidate = old_seq_logprob: the score at word 0,
					// -999 elsewhere (offered only while it can enter).
					w.top.offer(sum, j*V)
					for word := 1; word < V && !w.top.full(frozen); word++ {
						w.top.offer(frozen, j*V+word)
					}
					continue
				}
				w.top.offerRow(sum, lp[row*V:(row+1)*V], j*V)
			}
			for vix := range k {
				fi := w.top.i[vix]
				j, word := fi/V, fi%V
				prow := b
				if t > 0 {
					prow = b*k + j
				}
				nrow := b*k + vix
				w.next[nrow], newSeq[nrow], w.src[nrow] = word, w.top.v[vix], prow
				wasFin := t > 0 && w.fin[prow]
				w.fin2[nrow] = wasFin
				lpw := lp[prow*V+word] // word_logprob · seq_mask
				if wasFin {
					lpw = 0
				}
				w.hist.set(t, nrow, word, prow, lpw)
			}
		}
		w.sums, w.sums2 = newSeq, seq
		w.fin, w.fin2 = w.fin2, w.fin
		w.tok, w.next = w.next, w.tok
		if t == s.c.maxLen-1 {
			break
		}
		if !o.FullLength && m2Settled(w, s.c.eos, frozen) {
			break
		}
		if err := s.reorder(w.src[:R]); err != nil {
			return nil, err
		}
	}
	// Sort each study's beams by score, descending, stably.
	w.order = grow(w.order, k)
	w.picks = grow(w.picks, B*N)
	for b := range B {
		ord := w.order
		for j := range k {
			ord[j] = j
			for p := j; p > 0 && w.sums[b*k+ord[p-1]] < w.sums[b*k+ord[p]]; p-- {
				ord[p-1], ord[p] = ord[p], ord[p-1]
			}
		}
		for i := range N {
			r := b*k + ord[i]
			w.picks[b*N+i] = pick{t: tEnd, row: r, score: float64(w.sums[r])}
		}
	}
	return s.results(w.picks, N, true), nil
}

// m2Settled reports whether every beam has finished (its last word, or an
// earlier one, is EOS) with a score above -999: from then on each beam's
// only viable candidate is itself, and the final ranking cannot change.
func m2Settled(w *workspace, eos int, frozen float32) bool {
	for r, f := range w.fin {
		if !(f || w.tok[r] == eos) || !(w.sums[r] > frozen) {
			return false
		}
	}
	return true
}
