package metrics_test

import (
	"context"
	"fmt"

	"github.com/radgen/radgen/memtrans/metrics"
)

func ExampleBLEU() {
	refs := [][]string{{"the heart is normal in size . no pleural effusion ."}}
	hyps := []string{"the heart is normal in size . no pneumothorax ."}
	s, err := metrics.BLEU(refs, hyps)
	if err != nil {
		panic(err)
	}
	fmt.Printf("BLEU-1 %.4f BLEU-4 %.4f\n", s.Corpus[0], s.Corpus[3])
	// Output: BLEU-1 0.8144 BLEU-4 0.7081
}

func ExampleEvaluator_Evaluate() {
	ev, err := metrics.NewEvaluator()
	if err != nil {
		panic(err)
	}
	refs := [][]string{
		{"the heart is normal in size . no pleural effusion ."},
		{"small left pleural effusion . mild cardiomegaly ."},
	}
	hyps := []string{
		"the heart is normal in size . no pleural effusion .",
		"mild cardiomegaly . no pleural effusion .",
	}
	s, err := ev.Evaluate(context.Background(), refs, hyps)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.METEORName)
	fmt.Printf("CE micro F1 %.3f\n", s.CE.Micro.F1)
	// Output:
	// METEOR (exact+stem+synonym; no paraphrase)
	// CE micro F1 0.800
}
