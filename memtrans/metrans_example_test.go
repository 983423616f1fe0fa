package memtrans_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// A small, seeded METransformer writes one candidate report per expert
// for each study, and the experts vote for one of them.
func ExampleMETransTiny() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion."})
	if err != nil {
		panic(err)
	}
	cfg := memtrans.METransTiny(tok.Len() + 1)
	m, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	feats := radgen.Zeros(2, cfg.PatchesPerStudy(), cfg.Vision.OutChannels()) // (B, N, d_in)
	radgen.Uniform(feats, rand.New(rand.NewPCG(1, 2)), 1)
	reports, err := m.GenerateFeatures(context.Background(), []string{"a", "b"}, feats, memtrans.WithBeamSize(2), memtrans.WithMaxLength(8))
	if err != nil {
		panic(err)
	}
	for _, r := range reports {
		top := true
		for _, s := range r.Votes {
			top = top && s <= r.Votes[r.Expert]
		}
		fmt.Printf("%s: %d candidates; the winner has the most votes: %v\n", r.StudyID, len(r.Candidates), top)
	}
	// Output:
	// a: 3 candidates; the winner has the most votes: true
	// b: 3 candidates; the winner has the most votes: true
}

// Self-critical fine-tuning of a tiny R2Gen model: each step decodes four
// sequences per study by beam search, rewards them with CIDEr-D against
// the references, and moves the model towards the sequences that beat
// their study's mean.
func ExampleSCST() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"a b c d.", "e f g h.", "a f c h.", "e b g d."})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	r2 := cfg.EncoderDecoder.(r2gen.Config)
	r2.DModel, r2.DFF, r2.Layers = 16, 16, 1
	r2.MemorySlots, r2.MaxSeqLen = 2, 8
	cfg.EncoderDecoder = r2
	m, err := memtrans.New(cfg, tok, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	opt, err := optim.NewAdam([]optim.Group{{Params: radgen.Trainable(m.EncoderDecoder()), LR: 1e-2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	scst, err := memtrans.NewSCST(m, opt, memtrans.SCSTConfig{Samples: 4, Seed: 1}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	feats := radgen.Zeros(4, 3, cfg.Vision.OutChannels())
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
