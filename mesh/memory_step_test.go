package mesh

import (
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
)

// randomizeVectors draws every one-dimensional parameter of m (biases,
// norm gains and offsets) from U(−0.3, 0.3), so that no term is trivially
// neutral.
func randomizeVectors(m radgen.Module, rng *rand.Rand) {
	for _, p := range radgen.Params(m) {
		if p.Tensor.Rank() == 1 {
			radgen.Uniform(p.Tensor, rng, 0.3)
		}
	}
}

// rowOf returns row r of x (R, …) as a (1, 1, …) tensor.
func rowOf(g *radgen.Graph, x *radgen.Tensor, r int) *radgen.Tensor {
	return g.Reshape(g.Slice(x, 0, r, r+1), append([]int{1, 1}, x.Shape()[1:]...)...)
}

// M² attention's Step over positions 0..T−1, memory slots and a mask
// included, with beam-style reorders in between, gives Forward over each
// row's history; Attend over a projected source gives Forward's result and
// weights with rows grouped by study and gathered.
func TestM2AttentionStepsMatchForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		t.Run(dev.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			const d, dk, dv, heads, slots, steps, rows = 8, 3, 2, 2, 3, 5, 3
			a := NewMemoryAttention(d, dk, dv, heads, slots, rng)
			randomizeVectors(a, rng)
			if err := radgen.ToDevice(a, dev); err != nil {
				t.Fatal(err)
			}
			g := radgen.NoGrad()
			reorders := map[int][]int{1: {2, 0, 0}, 3: {1, 1, 2}}
			hist := make([][]*radgen.Tensor, rows) // each row's inputs, CPU (1, 1, D)
			masked := make([][]bool, rows)         // each row's masked positions
			c := NewKVCache(rows)
			for s := range steps {
				x := randInput(rng, rows, d)
				mask := radgen.Zeros(rows, 1, 1, s+1)
				for r := range rows {
					// Row r masks position 1 once it exists (never the newest).
					masked[r] = append(masked[r], false)
					if s > 1 && (r+s)%2 == 0 {
						masked[r][1] = true
					}
					for j, m := range masked[r] {
						if !m {
							mask.Data()[r*(s+1)+j] = 1 // zero = masked
						}
					}
				}
				out := a.StepMasked(g, x.To(dev), c, mask.To(dev))
				for r := range rows {
					hist[r] = append(hist[r][:len(hist[r]):len(hist[r])], rowOf(g, x, r))
					seq := g.Concat(1, hist[r]...).To(dev) // (1, s+1, D)
					rm := g.Slice(mask, 0, r, r+1).To(dev)
					want := a.Forward(g, g.Slice(seq, 1, s, s+1), seq, seq, rm)
					if w := worstDiff(t, rowOf(g, out, r), want); w > 1e-5 {
						t.Fatalf("step %d row %d: |Δ| = %g", s, r, w)
					}
				}
				if src, ok := reorders[s]; ok {
					if err := c.Reorder(src); err != nil {
						t.Fatal(err)
					}
					nh, nm := make([][]*radgen.Tensor, len(src)), make([][]bool, len(src))
					for i, r := range src {
						nh[i], nm[i] = hist[r], append([]bool(nil), masked[r]...)
					}
					hist, masked = nh, nm
				}
			}

			const b, n = 2, 5
			src := randInput(rng, b, n, d)
			encMask := radgen.Zeros(b, 1, 1, n)
			encMask.Data()[n+3], encMask.Data()[n+4] = 1, 1 // study 1's last two regions
			proj := a.ProjectMasked(g, src.To(dev), encMask.To(dev))
			if proj.Studies() != b || proj.Width() != n {
				t.Fatalf("source of %d studies × %d, want %d × %d", proj.Studies(), proj.Width(), b, n)
			}
			for _, study := range [][]int{{0, 1}, {0, 0, 0, 1, 1, 1}, {1, 0, 0}, {1}} {
				q := randInput(rng, len(study), d)
				out, probs := a.Attend(g, q.To(dev), proj, study, true)
				for r, st := range study {
					s := g.Slice(src, 0, st, st+1).To(dev)
					m := g.Slice(encMask, 0, st, st+1).To(dev)
					want, wantP := a.ForwardWithWeights(g, rowOf(g, q, r).To(dev), s, s, m)
					if w := worstDiff(t, rowOf(g, out, r), want); w > 1e-5 {
						t.Fatalf("rows %v, row %d: |Δ out| = %g", study, r, w)
					}
					if w := worstDiff(t, g.Reshape(g.Slice(probs, 0, r, r+1), 1, heads, 1, n+slots), wantP); w > 1e-6 {
						t.Fatalf("rows %v, row %d: |Δ weights| = %g", study, r, w)
					}
				}
			}
		})
	}
}
