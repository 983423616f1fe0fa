package decode

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Penalty rescores a finished beam: it maps the number of tokens (EOS
// included) and the beam's summed log-probability to the score p by which
// saved beams are ranked. A nil Penalty is the identity, R2Gen's default
// (length_penalty ”).
type Penalty func(length int, logprob float64) float64

// WuPenalty is R2Gen's 'wu_α' (utils.length_wu, from Wu et al. 2016):
//
//	p = logprob / ((5 + length)^α / (5 + 1)^α)
func WuPenalty(alpha float64) Penalty {
	return func(length int, logprob float64) float64 {
		return logprob / (math.Pow(5+float64(length), alpha) / math.Pow(6, alpha))
	}
}

// AvgPenalty is R2Gen's 'avg_α' (utils.length_average): p = logprob / length.
// R2Gen ignores α here, and so does this.
func AvgPenalty() Penalty {
	return func(length int, logprob float64) float64 {
		return logprob / float64(length)
	}
}

// ParsePenalty reads R2Gen's length_penalty setting: "" (nil, the identity),
// "wu_α" or "avg_α".
func ParsePenalty(s string) (Penalty, error) {
	if s == "" {
		return nil, nil
	}
	kind, a, ok := strings.Cut(s, "_")
	if !ok || strings.Contains(a, "_") {
		return nil, fmt.Errorf("%w: length penalty %q is not kind_alpha", ErrOption, s)
	}
	alpha, err := strconv.ParseFloat(a, 64)
	if err != nil || math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("%w: length penalty %q: bad alpha", ErrOption, s)
	}
	switch kind {
	case "wu":
		return WuPenalty(alpha), nil
	case "avg":
		return AvgPenalty(), nil
	}
	return nil, fmt.Errorf("%w: length penalty kind %q (want wu or avg)", ErrOption, kind)
}
