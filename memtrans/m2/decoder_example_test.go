package m2_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/m2"
)

// A Meshed-Memory Transformer from its blocks: a memory-augmented
// encoder turns 20 region features into three encoding levels, and the
// meshed decoder reads all of them to score the next word at every
// position of two 5-token inputs.
func ExampleMeshedDecoder_Forward() {
	rng := rand.New(rand.NewPCG(1, 1))
	enc := m2.NewMemoryEncoder(m2.EncoderConfig{
		DIn: 32, D: 16, DK: 4, DV: 4, Heads: 4, DFF: 32, Layers: 3, Slots: 8,
	}, rng)
	enc.Padding = m2.PadZeroRows
	dec := m2.NewMeshedDecoder(m2.DecoderConfig{
		Vocab: 12, MaxLen: 20, Pad: 1, D: 16, DK: 4, DV: 4, Heads: 4, DFF: 32, Layers: 3, Levels: 3,
	}, rng)

	regions := radgen.Zeros(2, 20, 32) // (B, N, d_in); rows 15.. of study 1 stay zero: padding
	for i := range regions.Data()[:(20+15)*32] {
		regions.Data()[i] = float32(math.Sin(float64(i)))
	}
	g := radgen.NoGrad()
	levels, mask := enc.Forward(g, regions)
	fmt.Println("levels", levels.Shape(), "masked regions", float32(mask.Len())-sum(mask.Data()))

	tokens := []int{
		2, 5, 7, 9, 3, // <bos> … <eos>
		2, 4, 3, 1, 1, // padded with <pad> = 1
	}
	logp := dec.Forward(g, tokens, 2, 5, levels, mask) // (B, T, V)
	var total float64
	for _, v := range logp.Data()[:12] {
		total += math.Exp(float64(v))
	}
	fmt.Println("log-probs", logp.Shape(), fmt.Sprintf("Σp = %.4f", total))
	// Output:
	// levels [2 3 20 16] masked regions 5
	// log-probs [2 5 12] Σp = 1.0000
}

func sum(x []float32) (s float32) {
	for _, v := range x {
		s += v
	}
	return s
}
