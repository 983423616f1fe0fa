package meteor_test

import (
	"fmt"

	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

// The exact, stem and synonym modules with the jar's English data; the
// scorer names its modules (there is no paraphrase module).
func ExampleScorer_Corpus() {
	s, err := meteor.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, hyp := range []string{"the lungs are clear", "no pleural effusions are seen"} {
		r, err := s.Corpus([][]string{{"the lungs are clear . no pleural effusion"}}, []string{hyp})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%q: %.4f\n", hyp, r.Corpus)
	}
	fmt.Println(s.Name())
	// Output:
	// "the lungs are clear": 0.2947
	// "no pleural effusions are seen": 0.2130
	// METEOR (exact+stem+synonym; no paraphrase)
}
