package decode_test

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/radgen/radgen/decode"
)

// A toy report model: the next word depends on the last one only. Id 0 is
// BOS and EOS at once, as in R2Gen.
var (
	words  = []string{"<eos>", "the", "heart", "lungs", "is", "are", "normal", "clear", "."}
	bigram = map[string]map[string]float64{
		"<eos>":  {"the": 1},
		"the":    {"heart": 0.55, "lungs": 0.45},
		"heart":  {"is": 1},
		"lungs":  {"are": 1},
		"is":     {"normal": 0.6, "clear": 0.4},
		"are":    {"clear": 0.9, "normal": 0.1},
		"normal": {".": 1},
		"clear":  {".": 1},
		".":      {"<eos>": 0.7, "the": 0.3},
	}
)

// score is the decode.PrefixScorer of the toy model: the log-probabilities of
// the word after each prefix, as a model that re-reads the whole prefix.
func score(_ context.Context, studies []int, prefixes []int, length int, dst []float32) error {
	V := len(words)
	for r := range studies {
		last := words[prefixes[(r+1)*length-1]]
		row := dst[r*V : (r+1)*V]
		for w, word := range words {
			row[w] = float32(math.Log(bigram[last][word])) // log 0 = -Inf
		}
	}
	return nil
}

func report(tokens []int) string {
	var s []string
	for _, t := range tokens {
		s = append(s, words[t])
	}
	return strings.Join(s, " ")
}

// Beam search keeps the three best partial reports per step. Greedy decoding
// takes "the heart" (0.55) and ends with p = 0.55·0.6·0.7; the beam finds
// "the lungs are clear ." (0.45·0.9·0.7), the more likely report.
func ExampleBeamSearch() {
	ctx := context.Background()
	for _, s := range []decode.Strategy{
		decode.Greedy{MaxLen: 20},
		decode.BeamSearch{Size: 3, MaxLen: 20},
	} {
		m, err := decode.NewRecompute(1, len(words), score)
		if err != nil {
			panic(err)
		}
		out, err := s.Decode(ctx, m)
		if err != nil {
			panic(err)
		}
		best := out[0][0]
		fmt.Printf("%-6v %-30q p = %.4f\n", s, report(best.Tokens), math.Exp(best.Score))
	}
	// Output:
	// greedy "the heart is normal . <eos>"  p = 0.2310
	// beam3  "the lungs are clear . <eos>"  p = 0.2835
}

// Several hypotheses per study, with diverse beam search: two groups of one
// beam each. The first group takes "heart" (0.55); the second pays λ = 0.5
// for the same word and takes "lungs" (0.45) instead. The first hypothesis
// returned is always the first group's best, as in R2Gen.
func ExampleBeamSearch_groups() {
	m, err := decode.NewRecompute(1, len(words), score)
	if err != nil {
		panic(err)
	}
	out, err := decode.BeamSearch{Size: 2, Groups: 2, Diversity: 0.5, N: 2, MaxLen: 20}.Decode(context.Background(), m)
	if err != nil {
		panic(err)
	}
	for _, h := range out[0] {
		fmt.Printf("%q\n", report(h.Tokens))
	}
	// Output:
	// "the heart is normal . <eos>"
	// "the lungs are clear . <eos>"
}
