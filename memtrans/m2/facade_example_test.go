package m2_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// A small, seeded Meshed-Memory Transformer (memtrans.M2Tiny) writes
// reports through the facade's Model, as R2Gen does, with M²'s own beam
// search: finished beams stay in the beam with their score frozen.
func Example_facade() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion."})
	if err != nil {
		panic(err)
	}
	cfg := memtrans.M2Tiny(tok.Len() + 1)
	m, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	feats := radgen.Zeros(2, cfg.PatchesPerStudy(), cfg.Vision.OutChannels()) // (B, regions, d_in)
	radgen.Uniform(feats, rand.New(rand.NewPCG(1, 2)), 1)
	reps, err := m.GenerateFeatures(context.Background(), []string{"a", "b"}, feats, memtrans.WithBeamSize(3), memtrans.WithMaxLength(6))
	if err != nil {
		panic(err)
	}
	for _, r := range reps {
		fmt.Printf("%s: %d tokens ≤ 6, one log-prob each: %v\n", r.StudyID, len(r.Tokens), len(r.TokenLogProbs) == len(r.Tokens))
	}
	// Output:
	// a: 6 tokens ≤ 6, one log-prob each: true
	// b: 6 tokens ≤ 6, one log-prob each: true
}
