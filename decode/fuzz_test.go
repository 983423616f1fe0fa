package decode

import (
	"context"
	"testing"
)

// FuzzBeamSearch checks beam search (R2Gen and M² semantics, every option)
// against the literal ports of the published code on toy models drawn from
// the fuzzer's numbers, through both the incremental model and Recompute.
func FuzzBeamSearch(f *testing.F) {
	f.Add(uint64(1), uint8(5), uint8(3), uint8(6), uint8(2), uint16(0))
	f.Add(uint64(2), uint8(8), uint8(4), uint8(9), uint8(1), uint16(0x1ff))
	f.Add(uint64(3), uint8(2), uint8(2), uint8(3), uint8(3), uint16(0x0a5))
	f.Add(uint64(4), uint8(12), uint8(6), uint8(5), uint8(2), uint16(0x13c))
	f.Fuzz(func(t *testing.T, seed uint64, v, k, maxLen, b uint8, flags uint16) {
		lm := hashLM{
			V:       2 + int(v)%11,
			seed:    seed,
			scale:   1 + float64(flags>>12),
			eosBias: float64(flags>>9&7) / 4,
		}
		lm.eos = int(seed>>8) % lm.V
		o := BeamSearch{
			Size:       1 + int(k)%lm.V,
			MaxLen:     1 + int(maxLen)%9,
			EOS:        lm.eos,
			BOS:        int(seed>>16) % lm.V,
			FullLength: flags&1 != 0,
		}
		B := 1 + int(b)%3
		o.N = 1 + int(seed>>24)%o.Size
		var want [][]refHyp
		if flags&2 != 0 {
			o.Semantics = M2
			want = refM2Beam(lm.logprobs, B, lm.V, o)
		} else {
			if g := 2 + int(flags>>2&1); flags&8 != 0 && o.Size%g == 0 {
				o.Groups, o.Diversity = g, float32(flags>>4&3)/2
			}
			switch flags >> 6 & 3 {
			case 1:
				o.LengthPenalty = WuPenalty(0.8)
			case 2:
				o.LengthPenalty = AvgPenalty()
			}
			if flags&0x100 != 0 {
				o.Temperature = 0.6
			}
			o.DecodingConstraint = flags&0x20 != 0
			want = refR2GenBeam(lm.logprobs, B, lm.V, o, false)
		}
		for name, mk := range models(lm, B) {
			got, err := o.Decode(context.Background(), mk())
			if err != nil {
				t.Fatalf("%+v %s: %v", o, name, err)
			}
			for s := range B {
				if err := sameHyps(got[s], want[s]); err != nil {
					t.Fatalf("%+v (V %d) %s, study %d: %v", o, lm.V, name, s, err)
				}
			}
		}
	})
}

// FuzzGreedy does the same for greedy decoding with trigram blocking and the
// decoding constraint.
func FuzzGreedy(f *testing.F) {
	f.Add(uint64(1), uint8(4), uint8(30), uint8(2), uint8(3))
	f.Add(uint64(9), uint8(2), uint8(12), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, v, maxLen, b, flags uint8) {
		lm := hashLM{V: 2 + int(v)%9, seed: seed, scale: 2 + float64(flags>>4), eosBias: float64(flags>>2&3) / 8}
		lm.eos = int(seed>>8) % lm.V
		o := Greedy{MaxLen: 1 + int(maxLen)%40, EOS: lm.eos, BOS: int(seed>>16) % lm.V,
			BlockTrigrams: flags&1 != 0, DecodingConstraint: flags&2 != 0}
		B := 1 + int(b)%3
		for name, mk := range models(lm, B) {
			got, err := o.Decode(context.Background(), mk())
			if err != nil {
				t.Fatalf("%+v %s: %v", o, name, err)
			}
			for s := range B {
				want := refSample(lm.logprobs, s, o, argmax)
				if err := sameHyps(got[s], []refHyp{want}); err != nil {
					t.Fatalf("%+v (V %d) %s, study %d: %v", o, lm.V, name, s, err)
				}
			}
		}
	})
}
