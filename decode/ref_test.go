package decode

import (
	"math"
	"slices"
	"sort"
)

// Literal ports of the published Python, used as oracles. They copy whole
// sequences every step, sort every candidate with a stable sort, and (for
// R2Gen's diverse beam search) follow the staggered group schedule, so they
// share none of the package's bookkeeping: no back-pointers, no top-k
// buffer, no early stop, no Model.

type refHyp struct {
	seq []int
	lps []float32
	p   float64
}

func withBOS(bos int, seq []int) []int { return append([]int{bos}, seq...) }

// refR2GenBeam ports caption_model.beam_search (self-critical.pytorch's
// vectorised diverse beam search) and _sample_beam's choice of results. With
// staggered, groups run on the published schedule (group g starts g steps
// late and reads earlier groups' current beams); without it they run in
// lockstep, as the package does (see the package doc).
func refR2GenBeam(f prefixFn, B, V int, o BeamSearch, staggered bool) [][]refHyp {
	k, G, maxLen := o.Size, o.groups(), o.MaxLen
	bd := k / G
	T, lam := o.temp(), o.Diversity
	pen := o.LengthPenalty
	if pen == nil {
		pen = func(_ int, p float64) float64 { return p }
	}
	type group struct {
		seq      [][][]int     // [b][beam]
		lps      [][][]float32 // [b][beam]
		sums     [][]float32   // [b][beam]
		logprobs [][][]float32 // [b][row]: one row before the first step, bd after
	}
	groups := make([]*group, G)
	for g := range groups {
		gr := &group{}
		for b := range B {
			gr.seq = append(gr.seq, make([][]int, bd))
			gr.lps = append(gr.lps, make([][]float32, bd))
			gr.sums = append(gr.sums, make([]float32, bd))
			gr.logprobs = append(gr.logprobs, [][]float32{f(b, []int{o.BOS})}) // init_logprobs: no temperature
		}
		groups[g] = gr
	}
	done := make([][][]refHyp, B)
	for b := range done {
		done[b] = make([][]refHyp, G)
	}
	steps := maxLen
	if staggered {
		steps = maxLen + G - 1
	}
	for t := 0; t < steps; t++ {
		for divm := range G {
			lt := t
			if staggered {
				if !(divm <= t && t <= maxLen+divm-1) {
					continue
				}
				lt = t - divm
			}
			gr := groups[divm]
			logprobs := make([][][]float32, B)
			unaug := make([][][]float32, B)
			for b := range B {
				for j, row := range gr.logprobs[b] {
					x := slices.Clone(row)
					if o.DecodingConstraint && lt > 0 {
						x[gr.seq[b][j][lt-1]] = float32(math.Inf(-1))
					}
					logprobs[b] = append(logprobs[b], x)
					unaug[b] = append(unaug[b], slices.Clone(x))
				}
			}
			if divm > 0 {
				for b := range B {
					change := make([]float32, V)
					for prev := range divm {
						for j := range bd {
							change[groups[prev].seq[b][j][lt]]++
						}
					}
					for _, x := range logprobs[b] {
						for w := range x {
							x[w] = x[w] - float32(change[w]*lam)
						}
					}
				}
			}
			isEnd := make([][]bool, B)
			for b := range B {
				type cand struct {
					v  float32
					ix int
				}
				var cs []cand
				for j, x := range logprobs[b] {
					for w, v := range x {
						cs = append(cs, cand{gr.sums[b][j] + v, j*V + w})
					}
				}
				sort.SliceStable(cs, func(i, j int) bool { return cs[i].v > cs[j].v })
				seq := make([][]int, bd)
				lps := make([][]float32, bd)
				sums := make([]float32, bd)
				for vix := range bd {
					j, w := cs[vix].ix/V, cs[vix].ix%V
					seq[vix] = append(slices.Clone(gr.seq[b][j]), w)
					lps[vix] = append(slices.Clone(gr.lps[b][j]), unaug[b][j][w])
					sums[vix] = gr.sums[b][j] + logprobs[b][j][w]
				}
				gr.seq[b], gr.lps[b], gr.sums[b] = seq, lps, sums
				isEnd[b] = make([]bool, bd)
				for vix := range bd {
					isEnd[b][vix] = seq[vix][lt] == o.EOS || lt == maxLen-1
					if isEnd[b][vix] {
						done[b][divm] = append(done[b][divm], refHyp{
							seq: slices.Clone(seq[vix]),
							lps: slices.Clone(lps[vix]),
							p:   pen(lt+1, float64(sums[vix])),
						})
					}
				}
				for vix := range bd {
					if isEnd[b][vix] {
						gr.sums[b][vix] -= 1000
					}
				}
			}
			for b := range B {
				gr.logprobs[b] = nil
				for vix := range bd {
					x := f(b, withBOS(o.BOS, gr.seq[b][vix]))
					if T != 1 {
						logSoftmaxTemp(x, T)
					}
					gr.logprobs[b] = append(gr.logprobs[b], x)
				}
			}
		}
	}
	out := make([][]refHyp, B)
	for b := range B {
		for g := range G {
			d := slices.Clone(done[b][g])
			sort.SliceStable(d, func(i, j int) bool { return -d[i].p < -d[j].p })
			out[b] = append(out[b], d[:bd]...)
		}
		out[b] = out[b][:o.returns()]
	}
	return out
}

// refSample ports AttModel._sample for one row with a chooser (argmax for
// greedy decoding), including the trigram dictionary and the decoding
// constraint.
func refSample(f prefixFn, study int, o Greedy, choose func([]float32) int) refHyp {
	var seq []int
	var lps []float32
	trigrams := map[[2]int][]int{}
	for t := 0; t <= o.MaxLen; t++ {
		lp := f(study, withBOS(o.BOS, seq))
		if o.DecodingConstraint && t > 0 {
			lp[seq[t-1]] += float32(math.Inf(-1))
		}
		if o.BlockTrigrams && t >= 3 {
			prevTwo := [2]int{seq[t-3], seq[t-2]}
			trigrams[prevTwo] = append(trigrams[prevTwo], seq[t-1])
			mask := make([]float32, len(lp))
			for _, j := range trigrams[[2]int{seq[t-2], seq[t-1]}] {
				mask[j]++
			}
			for j := range lp {
				lp[j] = lp[j] + float32(mask[j]*float32(-0.693))*2
			}
		}
		if t == o.MaxLen {
			break
		}
		it := choose(lp)
		seq = append(seq, it)
		lps = append(lps, lp[it])
		if it == o.EOS {
			break
		}
	}
	sum := 0.0
	for _, v := range lps {
		sum += float64(v)
	}
	return refHyp{seq: seq, lps: lps, p: sum}
}

// refM2Beam ports BeamSearch.apply and iter from the Meshed-Memory
// Transformer (out_size = N), cutting each output at its first EOS as
// text_field.decode does.
func refM2Beam(f prefixFn, B, V int, o BeamSearch) [][]refHyp {
	k := o.Size
	seqLP := make([][]float32, B)   // [b][beam]
	seqMask := make([][]float32, B) // [b][beam]
	outputs := make([][][]int, B)
	logps := make([][][]float32, B)
	selected := make([][]int, B)
	for b := range B {
		seqLP[b] = []float32{0}
		seqMask[b] = slices.Repeat([]float32{1}, k)
		outputs[b] = [][]int{nil}
		logps[b] = [][]float32{nil}
	}
	for t := 0; t < o.MaxLen; t++ {
		for b := range B {
			cur := len(seqLP[b])
			wl := make([][]float32, cur)
			cand := make([][]float32, cur)
			for j := range cur {
				wl[j] = f(b, withBOS(o.BOS, outputs[b][j]))
				cand[j] = make([]float32, V)
				for w := range V {
					cand[j][w] = seqLP[b][j] + wl[j][w]
				}
			}
			if t > 0 {
				for j := range cur {
					mask := float32(1)
					if selected[b][j] == o.EOS {
						mask = 0
					}
					seqMask[b][j] *= mask
					m := seqMask[b][j]
					for w := range V {
						wl[j][w] *= m
						old := seqLP[b][j]
						if w > 0 {
							old = -999
						}
						cand[j][w] = m*cand[j][w] + old*(1-m)
					}
				}
			}
			type c struct {
				v  float32
				ix int
			}
			var cs []c
			for j := range cur {
				for w := range V {
					cs = append(cs, c{cand[j][w], j*V + w})
				}
			}
			sort.SliceStable(cs, func(i, j int) bool { return cs[i].v > cs[j].v })
			nLP, nMask := make([]float32, k), make([]float32, k)
			nOut, nLogp := make([][]int, k), make([][]float32, k)
			nSel := make([]int, k)
			for vix := range k {
				beam, word := cs[vix].ix/V, cs[vix].ix%V
				nLP[vix] = cs[vix].v
				nMask[vix] = seqMask[b][beam]
				nOut[vix] = append(slices.Clone(outputs[b][beam]), word)
				nLogp[vix] = append(slices.Clone(logps[b][beam]), wl[beam][word])
				nSel[vix] = word
			}
			seqLP[b], seqMask[b], outputs[b], logps[b], selected[b] = nLP, nMask, nOut, nLogp, nSel
		}
	}
	out := make([][]refHyp, B)
	for b := range B {
		idx := make([]int, k)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool { return seqLP[b][idx[i]] > seqLP[b][idx[j]] })
		for _, j := range idx[:o.returns()] {
			seq, lps := outputs[b][j], logps[b][j]
			if e := slices.Index(seq, o.EOS); e >= 0 {
				seq, lps = seq[:e+1], lps[:e+1]
			}
			out[b] = append(out[b], refHyp{seq: seq, lps: lps, p: float64(seqLP[b][j])})
		}
	}
	return out
}
