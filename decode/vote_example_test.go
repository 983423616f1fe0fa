package decode_test

import (
	"context"
	"fmt"

	"github.com/radgen/radgen/decode"
)

// Three experts wrote candidate reports (token ids, ending with EOS 0). A
// unigram-precision metric stands in for CIDEr-D: the candidate that the
// other experts' reports support most is chosen.
func ExampleVote() {
	precision := func(_ context.Context, refs [][][]int, hyps [][]int) ([]float64, error) {
		out := make([]float64, len(hyps))
		for i, h := range hyps {
			for _, r := range refs[i] {
				in := map[int]bool{}
				for _, t := range r {
					in[t] = true
				}
				for _, t := range h {
					if in[t] {
						out[i] += 1 / float64(len(h)*len(refs[i]))
					}
				}
			}
		}
		return out, nil
	}
	candidates := [][][]int{{
		{4, 5, 6, 0},    // "heart size normal"
		{4, 5, 6, 7, 0}, // "heart size normal lungs"
		{8, 9, 0},       // "effusion present"
	}}
	ballots, err := decode.Vote{Score: precision}.Select(context.Background(), candidates)
	if err != nil {
		panic(err)
	}
	fmt.Printf("winner %d, scores %.2f\n", ballots[0].Winner, ballots[0].Scores)
	// Output: winner 0, scores [0.50 0.38 0.00]
}
