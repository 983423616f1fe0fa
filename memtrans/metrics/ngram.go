package metrics

import "strings"

// maxN is the longest n-gram that BLEU and CIDEr-D count (both use n = 4).
const maxN = 4

// ngramCounts holds the n-gram counts of one sentence, one map per order:
// counts[k] maps each (k+1)-gram, written as its tokens joined by single
// spaces, to its count. Tokens never contain whitespace (they come from
// pyFields), so the joined form is unambiguous.
type ngramCounts struct {
	counts [maxN]map[string]int
	length int // number of tokens
}

// precook counts the 1..4-grams of s after Python's s.split(), as
// precook() in coco-caption's bleu_scorer.py and cider_scorer.py does.
// The keys are substrings of one joined string, so counting allocates little.
func precook(s string) ngramCounts {
	words := pyFields(s)
	var nc ngramCounts
	nc.length = len(words)
	if len(words) == 0 {
		for k := range nc.counts {
			nc.counts[k] = map[string]int{}
		}
		return nc
	}
	joined := strings.Join(words, " ")
	// starts[i] is the byte offset of word i in joined; ends[i] its end.
	starts := make([]int, len(words))
	ends := make([]int, len(words))
	off := 0
	for i, w := range words {
		starts[i] = off
		ends[i] = off + len(w)
		off += len(w) + 1
	}
	for k := 0; k < maxN; k++ {
		m := make(map[string]int, len(words))
		for i := 0; i+k < len(words); i++ {
			m[joined[starts[i]:ends[i+k]]]++
		}
		nc.counts[k] = m
	}
	return nc
}
