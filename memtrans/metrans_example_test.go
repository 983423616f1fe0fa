package memtrans_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/optim"
)

// A small, seeded METransformer writes three candidate reports per study,
// one per expert, and expert voting by CIDEr-D picks one of them.
func ExampleMETransformer_Generate() {
	cfg := memtrans.TinyMETrans(20, 16, 9) // 20 ids, 9 patches of 16 features
	m, err := memtrans.NewMETransformer(cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	feats := radgen.Zeros(2, 9, 16) // (B, N, d_in)
	radgen.Uniform(feats, rand.New(rand.NewPCG(1, 2)), 1)
	reports, err := m.Generate(context.Background(), feats,
		decode.BeamSearch{Size: 2, MaxLen: 8}, decode.Vote{Score: memtrans.CIDErDReward})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range reports {
		top := true
		for _, s := range r.Scores {
			top = top && s <= r.Scores[r.Expert]
		}
		fmt.Printf("study %d: %d candidates; the winner has the top consensus score: %v\n", i, len(r.Candidates), top)
	}
	// Output:
	// study 0: 3 candidates; the winner has the top consensus score: true
	// study 1: 3 candidates; the winner has the top consensus score: true
}

// Self-critical fine-tuning of a tiny R2Gen model: each step decodes four
// sequences per study by beam search, rewards them with CIDEr-D against
// the references, and moves the model towards the sequences that beat
// their study's mean.
func ExampleSCST() {
	cfg := memtrans.Config{Variant: memtrans.VariantR2Gen, DModel: 16, DFF: 16, Heads: 2, Layers: 1, DVisual: 6,
		Vocab: 10, MemorySlots: 2, MemoryHeads: 2, MaxSeqLen: 8, PositionLen: 16}
	m, err := memtrans.NewTransformer(cfg, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	opt, err := optim.NewAdam([]optim.Group{{Params: radgen.Trainable(m), LR: 1e-2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	scst, err := memtrans.NewSCST(m, opt, memtrans.SCSTConfig{Samples: 4, Seed: 1}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	feats := radgen.Zeros(4, 3, 6)
	radgen.Uniform(feats, rand.New(rand.NewPCG(3, 7)), 1)
	refs := [][][]int{{{1, 2, 3, 4, 0}}, {{5, 6, 7, 8, 0}}, {{1, 6, 3, 8, 0}}, {{5, 2, 7, 4, 0}}}
	var first, last float64
	for step := range 40 {
		res, err := scst.Step(context.Background(), feats, refs)
		if err != nil {
			fmt.Println(err)
			return
		}
		if step < 5 {
			first += res.MeanReward / 5
		}
		if step >= 35 {
			last += res.MeanReward / 5
		}
	}
	fmt.Println("mean CIDEr-D reward rose:", last > first)
	// Output: mean CIDEr-D reward rose: true
}
