package synth_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/radgen/radgen/memtrans/synth"
)

// A tiny run: 16 training and 4 test studies of 64-pixel films, one epoch.
// The quickstart (examples/quickstart) runs Defaults, which learns the
// films' findings.
func Example() {
	dir, err := os.MkdirTemp("", "synth-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	res, err := synth.Run(context.Background(), synth.Options{Dir: dir, Train: 16, Test: 4, Size: 64, Epochs: 1, BatchSize: 8, Beam: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Model.Close()
	fmt.Printf("%d epoch, %d held-out reports, %d references\n", len(res.History), len(res.Reports), len(res.References))
	// Output: 1 epoch, 4 held-out reports, 4 references
}
