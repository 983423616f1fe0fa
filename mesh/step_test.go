package mesh

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
)

func randInput(rng *rand.Rand, shape ...int) *radgen.Tensor {
	x := radgen.Zeros(shape...)
	radgen.Uniform(x, rng, 1)
	return x
}

// worstDiff returns max |a − b| over the values of two tensors on any
// device, and fails if their shapes differ.
func worstDiff(t *testing.T, a, b *radgen.Tensor) float64 {
	t.Helper()
	av, bv := a.To(radgen.CPU).Float64s(), b.To(radgen.CPU).Float64s()
	if len(av) != len(bv) {
		t.Fatalf("shapes %v and %v", a.Shape(), b.Shape())
	}
	w := 0.0
	for i := range av {
		w = math.Max(w, math.Abs(av[i]-bv[i]))
	}
	return w
}

// stepDevices are the devices the step tests run on: the CPU, and the
// device of RADGEN_DEVICE (the reference engine by default).
func stepDevices(t *testing.T) []radgen.Device {
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	return []radgen.Device{radgen.CPU, dev}
}

// Step over positions 0..T−1, with beam-style reorders in between, gives
// what Forward with a causal mask gives over each row's history; so does a
// cache reset for a second decoding, longer and of other row counts.
func TestStepMatchesForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		t.Run(dev.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			const d, heads = 8, 2
			m := NewMultiHeadAttention(d, heads, 0, rng)
			if err := radgen.ToDevice(m, dev); err != nil {
				t.Fatal(err)
			}
			g := radgen.NoGrad()
			var c *KVCache
			for _, round := range []struct {
				rows, steps int
				reorders    map[int][]int
			}{
				// Three rows; after step 1 rows become [2 0 0], after step 3 [1 1 2].
				{3, 5, map[int][]int{1: {2, 0, 0}, 3: {1, 1, 2}}},
				// One row, then five, then two.
				{1, 40, map[int][]int{0: {0, 0, 0, 0, 0}, 17: {4, 1}}},
			} {
				if c == nil {
					c = NewKVCache(round.rows)
				} else {
					c.Reset(round.rows)
				}
				hist := make([][]*radgen.Tensor, round.rows) // each row's inputs so far, CPU (1, D)
				for s := 0; s < round.steps; s++ {
					rows := len(hist)
					x := randInput(rng, rows, d)
					out := m.Step(g, x.To(dev), c)
					if out.Device() != dev {
						t.Fatalf("step output on %v, want %v", out.Device(), dev)
					}
					for r := 0; r < rows; r++ {
						row := radgen.FromFloat32(append([]float32(nil), x.Data()[r*d:(r+1)*d]...), 1, 1, d)
						hist[r] = append(append([]*radgen.Tensor(nil), hist[r]...), row)
						seq := radgen.NoGrad().Concat(1, hist[r]...) // (1, s+1, D)
						want := m.Forward(g, g.Slice(seq.To(dev), 1, s, s+1), seq.To(dev), seq.To(dev), nil)
						got := g.Slice(out, 0, r, r+1)
						if w := worstDiff(t, g.Reshape(got, 1, 1, d), want); w > 1e-5 {
							t.Fatalf("%d rows, step %d row %d: |Δ| = %g", round.rows, s, r, w)
						}
					}
					if src, ok := round.reorders[s]; ok {
						if err := c.Reorder(src); err != nil {
							t.Fatal(err)
						}
						next := make([][]*radgen.Tensor, len(src))
						for i, r := range src {
							next[i] = hist[r]
						}
						hist = next
					}
				}
				if c.Len() != round.steps {
					t.Fatalf("cache holds %d positions, want %d", c.Len(), round.steps)
				}
			}
			if err := c.Reorder([]int{c.Rows()}); err == nil {
				t.Fatal("out-of-range reorder accepted")
			}
			if err := c.Reorder(nil); err == nil {
				t.Fatal("reorder to zero rows accepted")
			}
		})
	}
}

// Attend over a projected source gives Forward's result and weights, with
// the rows grouped by study (shared keys) and in any order (gathered).
func TestAttendMatchesForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		t.Run(dev.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(4, 4))
			const d, heads, b, n = 8, 2, 2, 5
			m := NewMultiHeadAttention(d, heads, 0, rng)
			if err := radgen.ToDevice(m, dev); err != nil {
				t.Fatal(err)
			}
			g := radgen.NoGrad()
			src := randInput(rng, b, n, d).To(dev)
			proj := m.Project(g, src)
			for _, study := range [][]int{{0, 1}, {0, 0, 0, 1, 1, 1}, {1, 0, 0}, {1}} {
				q := randInput(rng, len(study), d)
				out, probs := m.Attend(g, q.To(dev), proj, study, true)
				for r, st := range study {
					qr := radgen.FromFloat32(append([]float32(nil), q.Data()[r*d:(r+1)*d]...), 1, 1, d).To(dev)
					s := g.Slice(src, 0, st, st+1)
					want, wantP := m.ForwardWithWeights(g, qr, s, s, nil)
					if w := worstDiff(t, g.Reshape(g.Slice(out, 0, r, r+1), 1, 1, d), want); w > 1e-5 {
						t.Fatalf("rows %v, row %d: |Δ out| = %g", study, r, w)
					}
					if w := worstDiff(t, g.Reshape(g.Slice(probs, 0, r, r+1), 1, heads, 1, n), wantP); w > 1e-6 {
						t.Fatalf("rows %v, row %d: |Δ weights| = %g", study, r, w)
					}
				}
			}
		})
	}
}

// A cache reset decoding after decoding, its rows growing by reorders and
// shrinking by resets, keeps buffers of the size one decoding needs.
func TestKVCacheResetKeepsBuffersBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const d, heads, steps = 8, 2, 20
	m := NewMultiHeadAttention(d, heads, 0, rng)
	g := radgen.NoGrad()
	c := NewKVCache(2)
	for round := range 30 {
		c.Reset(2)
		rows := 2
		for s := range steps {
			m.Step(g, randInput(rng, rows, d), c)
			if s == 0 {
				if err := c.Reorder([]int{0, 0, 0, 1, 1, 1}); err != nil {
					t.Fatal(err)
				}
				rows = 6
			}
		}
		// Six rows of at most 2·steps positions, in buffers made with
		// room for as much again.
		if limit := 4 * 6 * 2 * steps; cap(c.anc) > limit || cap(c.next) > limit {
			t.Fatalf("round %d: ancestry buffers of %d and %d ints", round, cap(c.anc), cap(c.next))
		}
	}
}

// A cache reset after a decoding on one device serves the next decoding
// on another (a workspace's caches go to whichever model takes them): its
// steps give what a new cache's give.
func TestKVCacheResetOnAnotherDevice(t *testing.T) {
	devs := stepDevices(t)
	rng := rand.New(rand.NewPCG(6, 6))
	const d, heads, rows, steps = 8, 2, 3, 4
	m := NewMultiHeadAttention(d, heads, 0, rng)
	xs := make([]*radgen.Tensor, steps)
	for s := range xs {
		xs[s] = randInput(rng, rows, d)
	}
	g := radgen.NoGrad()
	shared := NewKVCache(rows)
	for _, dev := range append(devs, devs[0]) {
		if err := radgen.ToDevice(m, dev); err != nil {
			t.Fatal(err)
		}
		shared.Reset(rows)
		fresh := NewKVCache(rows)
		for s, x := range xs {
			got := m.Step(g, x.To(dev), shared).To(radgen.CPU).Data()
			want := m.Step(g, x.To(dev), fresh).To(radgen.CPU).Data()
			if !slices.Equal(got, want) {
				t.Fatalf("%v, step %d: %v from a reset cache, %v from a new one", dev, s, got, want)
			}
		}
	}
}
