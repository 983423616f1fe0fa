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

// The jar's -m option: a module list, in order. Leaving the synonym module
// out is `-m "exact stem"`; "effusions" then matches "effusion" through the
// stem module (with all three modules both the stem and the synonym module
// match it, and the jar's search drops the ambiguous match).
func ExampleWithModules() {
	mods, err := meteor.ParseModules("exact stem")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, opts := range [][]meteor.Option{{meteor.WithModules(mods...)}, nil} {
		s, err := meteor.New(opts...)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := s.SegmentStats("effusions", []string{"effusion"})
		fmt.Printf("%s: %.2f\n", s.Name(), s.Score(st))
	}
	// Output:
	// METEOR (exact+stem; no synonym, no paraphrase): 0.60
	// METEOR (exact+stem+synonym; no paraphrase): 0.00
}
