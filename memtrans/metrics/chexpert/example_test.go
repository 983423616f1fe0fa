package chexpert_test

import (
	"fmt"

	"github.com/radgen/radgen/memtrans/metrics/chexpert"
)

// The labeler reads negation and uncertainty from the sentence around each
// mention.
func ExampleLabeler_Label() {
	l, err := chexpert.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	labels := l.Label("The heart is enlarged. No pleural effusion. Findings may represent atelectasis.")
	for _, o := range []chexpert.Observation{chexpert.Cardiomegaly, chexpert.PleuralEffusion, chexpert.Atelectasis} {
		fmt.Printf("%s: %s\n", o, labels[o])
	}
	// Output:
	// Cardiomegaly: positive
	// Pleural Effusion: negative
	// Atelectasis: uncertain
}
