package m2

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// MeshedSteps over a study's tokens, position by position, gives the
// teacher-forced MeshedDecoder.Forward, meshed and routed, with an encoder
// mask, a <pad> token inside a sequence, and beam-style reorders in
// between that make the rows ungrouped and grouped again; the attention
// map is a distribution over the unmasked regions.
func TestMeshedStepsMatchForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for _, routing := range []mesh.Routing{mesh.RoutingNone, mesh.RoutingGCA} {
			name := "meshed"
			if routing != mesh.RoutingNone {
				name = "routed-" + string(routing)
			}
			t.Run(dev.String()+"/"+name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(6, 6))
				c := DecoderConfig{Vocab: 11, MaxLen: 9, Pad: 1, D: 8, DK: 3, DV: 2, Heads: 2, DFF: 12,
					Layers: 2, Levels: 3, Routing: routing}
				dec := NewMeshedDecoder(c, rng)
				randomizeVectors(dec, rng)
				const b, regions, steps = 2, 5, 7
				levels := randInput(rng, b, c.Levels, regions, c.D)
				encMask := radgen.Zeros(b, 1, 1, regions)
				radgen.Fill(encMask, 1)
				encMask.Data()[regions+3], encMask.Data()[regions+4] = 0, 0 // zero = masked: study 1's last two regions
				tokens := []int{
					2, 5, 7, 3, 1, 4, 6, // a <pad> inside
					2, 9, 4, 4, 10, 0, 8,
				}
				g := radgen.NoGrad()
				want := dec.Forward(g, tokens, b, steps, levels, encMask) // CPU (B, T, V)
				if err := radgen.ToDevice(dec, dev); err != nil {
					t.Fatal(err)
				}
				// A second decoding steps on the first one's caches.
				var s *MeshedSteps
				for round := range 2 {
					if round == 0 {
						s = dec.Start(g, levels.To(dev), encMask.To(dev))
					} else {
						s = dec.StartWith(g, levels.To(dev), encMask.To(dev), s.self)
					}
					// Rows follow studies: swap them before step 0, at step 2
					// expand to [1 1 0 0] (ungrouped), at step 4 reorder to
					// [0 0 1 1] (grouped again).
					rows := []int{0, 1}
					reorders := map[int][]int{0: {1, 0}, 2: {0, 0, 1, 1}, 4: {2, 3, 0, 1}}
					var worst float64
					for step := range steps {
						if src, ok := reorders[step]; ok {
							if err := s.Reorder(src); err != nil {
								t.Fatal(err)
							}
							next := make([]int, len(src))
							for i, r := range src {
								next[i] = rows[r]
							}
							rows = next
						}
						if s.Rows() != len(rows) {
							t.Fatalf("%d rows, want %d", s.Rows(), len(rows))
						}
						tok := make([]int, len(rows))
						for i, st := range rows {
							tok[i] = tokens[st*steps+step]
						}
						lp := s.Step(g, tok)
						if lp.Device() != dev {
							t.Fatalf("log-probs on %v, want %v", lp.Device(), dev)
						}
						for i, st := range rows {
							w := worstDiff(t, g.Slice(lp, 0, i, i+1), g.Slice(g.Reshape(want, b*steps, c.Vocab), 0, st*steps+step, st*steps+step+1))
							worst = math.Max(worst, w)
						}
						att := s.Attention(g).To(radgen.CPU).Float64s()
						for i, st := range rows {
							var sum float64
							for j, p := range att[i*regions : (i+1)*regions] {
								sum += p
								if st == 1 && j >= 3 && p != 0 {
									t.Fatalf("step %d row %d: masked region %d has weight %g", step, i, j, p)
								}
							}
							if math.Abs(sum-1) > 1e-5 {
								t.Fatalf("step %d row %d: attention sums to %g", step, i, sum)
							}
						}
					}
					t.Logf("round %d: max |Δ log p| = %.3g over %d steps", round, worst, steps)
					if worst > 1e-5 {
						t.Fatalf("round %d: steps vs teacher forcing: max |Δ log p| = %.3g", round, worst)
					}
					if s.Len() != steps {
						t.Fatalf("Len() = %d after %d steps", s.Len(), steps)
					}
				}
				if err := s.Reorder([]int{4}); err == nil {
					t.Fatal("out-of-range reorder accepted")
				}
				if err := s.Reorder(nil); err == nil {
					t.Fatal("reorder to zero rows accepted")
				}
				if s.Attention(g) == nil {
					t.Fatal("attention lost by a failed reorder")
				}
				if err := s.Reorder([]int{0}); err != nil || s.Attention(g) != nil {
					t.Fatalf("reorder: %v; attention of an earlier row set kept", err)
				}
			})
		}
	}
}
