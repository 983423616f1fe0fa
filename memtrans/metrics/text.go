package metrics

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyIsSpace reports whether r is whitespace for Python 3's str.split() with no
// argument. That set is Go's unicode.IsSpace plus the four ASCII separators
// U+001C..U+001F, which Python also treats as whitespace.
func pyIsSpace(r rune) bool {
	if r >= 0x1c && r <= 0x1f {
		return true
	}
	return unicode.IsSpace(r)
}

// pyFields splits s as Python's s.split() does: on runs of whitespace, with
// leading and trailing whitespace ignored. The coco-caption BLEU and CIDEr-D
// scorers tokenise this way.
func pyFields(s string) []string {
	// Fast path for the common ASCII case.
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || (s[i] >= 0x1c && s[i] <= 0x1f) {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.Fields(s)
	}
	return strings.FieldsFunc(s, pyIsSpace)
}

// spaceSplit splits s as Python's s.split(" ") does: on every single space,
// so consecutive spaces yield empty tokens and "" yields [""]. The
// coco-caption ROUGE-L scorer tokenises this way.
func spaceSplit(s string) []string { return strings.Split(s, " ") }

// npMean returns the mean of x as numpy.mean computes it for a contiguous
// float64 array: pairwise summation (blocks of 8 partial sums, split in halves
// above 128 elements), then division by the length. Matching the summation
// order keeps corpus scores equal to the reference to the last bit or two.
func npMean(x []float64) float64 {
	return npPairwiseSum(x) / float64(len(x))
}

// npPairwiseSum mirrors numpy's pairwise_sum (numpy/core/src/umath/loops_utils.h).
func npPairwiseSum(a []float64) float64 {
	const blockSize = 128
	n := len(a)
	switch {
	case n < 8:
		res := 0.0
		for _, v := range a {
			res += v
		}
		return res
	case n <= blockSize:
		var r [8]float64
		copy(r[:], a[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			r[0] += a[i+0]
			r[1] += a[i+1]
			r[2] += a[i+2]
			r[3] += a[i+3]
			r[4] += a[i+4]
			r[5] += a[i+5]
			r[6] += a[i+6]
			r[7] += a[i+7]
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += a[i]
		}
		return res
	default:
		n2 := n / 2
		n2 -= n2 % 8
		return npPairwiseSum(a[:n2]) + npPairwiseSum(a[n2:])
	}
}
