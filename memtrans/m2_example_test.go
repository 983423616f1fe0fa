package memtrans_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans"
)

// Decode two studies with a small, seeded Meshed-Memory Transformer and
// M²'s own beam search: finished beams stay in the beam with their score
// frozen, and every beam runs to the maximum length.
func ExampleM2Transformer_StartDecoding() {
	cfg := memtrans.TinyM2(40, 32) // 40 words, 32-wide region features
	m, err := memtrans.NewM2Transformer(cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	rng := rand.New(rand.NewPCG(1, 2))
	regions := radgen.Zeros(2, 10, 32) // (B, R, d_in)
	for i := range regions.Data() {
		regions.Data()[i] = float32(rng.NormFloat64())
	}
	dec, err := m.StartDecoding(regions)
	if err != nil {
		fmt.Println(err)
		return
	}
	beam := decode.BeamSearch{Size: 3, N: 3, MaxLen: 6, BOS: cfg.BOS, EOS: cfg.EOS, Semantics: decode.M2}
	hyps, err := beam.Decode(context.Background(), dec)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, h := range hyps {
		best := h[0]
		fmt.Printf("study %d: %d beams; best: %v tokens ≤ 6, one log-prob each: %v\n",
			i, len(h), len(best.Tokens) <= 6, len(best.LogProbs) == len(best.Tokens))
	}
	// Output:
	// study 0: 3 beams; best: true tokens ≤ 6, one log-prob each: true
	// study 1: 3 beams; best: true tokens ≤ 6, one log-prob each: true
}
