package mesh

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
)

// familyMembers returns the package's incremental attentions of width d:
// R2Gen's multi-head attention, M²'s without and with memory slots.
func familyMembers(d int, rng *rand.Rand) map[string]IncrementalAttention {
	out := map[string]IncrementalAttention{
		"multi-head": NewMultiHeadAttention(d, 2, 0, rng),
		"m2":         NewScaledDotProductAttention(d, 3, 2, 2, rng),
		"m2-memory":  NewMemoryAttention(d, 3, 2, 2, 3, rng),
	}
	for _, a := range out {
		randomizeVectors(a, rng)
	}
	return out
}

// The same step code serves every member of the family: StepMasked over a
// key/value cache, masks of rank 3 and 4 alike and beam-style reorders in
// between, gives Forward over each row's history; Attend over a source
// projected with its mask gives Forward's result, rows grouped by study
// and gathered.
func TestIncrementalAttentionStepMatchesForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for name, a := range familyMembers(8, rand.New(rand.NewPCG(9, 9))) {
			t.Run(dev.String()+"/"+name, func(t *testing.T) {
				const d, steps, rows = 8, 5, 3
				rng := rand.New(rand.NewPCG(10, 10))
				if err := radgen.ToDevice(a, dev); err != nil {
					t.Fatal(err)
				}
				g := radgen.NoGrad()
				reorders := map[int][]int{1: {2, 0, 0}, 3: {1, 1, 2}}
				hist := make([][]*radgen.Tensor, rows)
				masked := make([][]bool, rows)
				c := NewKVCache(rows)
				for s := range steps {
					x := randInput(rng, rows, d)
					mask := radgen.Zeros(rows, 1, s+1) // rank 3 on odd steps, 4 on even ones
					for r := range rows {
						masked[r] = append(masked[r], false)
						if s > 1 && (r+s)%2 == 0 {
							masked[r][0] = true
						}
						for j, m := range masked[r] {
							if !m {
								mask.Data()[r*(s+1)+j] = 1 // zero = masked
							}
						}
					}
					if s%2 == 0 {
						mask = radgen.NoGrad().Reshape(mask, rows, 1, 1, s+1)
					}
					var out *radgen.Tensor
					if s == 0 {
						out = a.Step(g, x.To(dev), c) // nothing to mask yet
					} else {
						out = a.StepMasked(g, x.To(dev), c, mask) // on the host: any device is accepted
					}
					for r := range rows {
						hist[r] = append(hist[r][:len(hist[r]):len(hist[r])], rowOf(g, x, r))
						seq := g.Concat(1, hist[r]...).To(dev)
						rm := g.Reshape(g.Slice(mask, 0, r, r+1), 1, 1, 1, s+1).To(dev)
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
				encMask := radgen.Zeros(b, 1, n) // rank 3; Forward is given rank 4
				radgen.Fill(encMask, 1)
				encMask.Data()[n+3], encMask.Data()[n+4] = 0, 0 // study 1's last two regions
				for _, masked := range []bool{false, true} {
					var proj *Source
					if masked {
						proj = a.ProjectMasked(g, src.To(dev), encMask)
					} else {
						proj = a.Project(g, src.To(dev))
					}
					if proj.Studies() != b || proj.Width() != n || proj.Levels() != 1 {
						t.Fatalf("source of %d studies × %d in %d levels, want %d × %d in 1", proj.Studies(), proj.Width(), proj.Levels(), b, n)
					}
					for _, study := range [][]int{{0, 1}, {0, 0, 0, 1, 1, 1}, {1, 0, 0}} {
						q := randInput(rng, len(study), d)
						out, _ := a.Attend(g, q.To(dev), proj, study, false)
						for r, st := range study {
							s := g.Slice(src, 0, st, st+1).To(dev)
							var m *radgen.Tensor
							if masked {
								m = g.Reshape(g.Slice(encMask, 0, st, st+1), 1, 1, 1, n).To(dev)
							}
							want := a.Forward(g, rowOf(g, q, r).To(dev), s, s, m)
							if w := worstDiff(t, rowOf(g, out, r), want); w > 1e-5 {
								t.Fatalf("masked %v, rows %v, row %d: |Δ out| = %g", masked, study, r, w)
							}
						}
					}
				}
			})
		}
	}
}

// A mask of rank 3, (B|1, Tq|1, Tk), and the same mask with the heads'
// unit dimension, (B|1, 1, Tq|1, Tk), give the same Forward, bit for bit,
// in every member of the family.
func TestMaskRanksAgree(t *testing.T) {
	for name, a := range familyMembers(8, rand.New(rand.NewPCG(11, 11))) {
		rng := rand.New(rand.NewPCG(12, 12))
		q, kv := randInput(rng, 2, 3, 8), randInput(rng, 2, 4, 8)
		m3 := radgen.FromFloat32([]float32{1, 1, 0, 1, 0, 1, 1, 1}, 2, 1, 4)
		g := radgen.NoGrad()
		want := a.Forward(g, q, kv, kv, m3).Data()
		for i, v := range a.Forward(g, q, kv, kv, g.Reshape(m3, 2, 1, 1, 4)).Data() {
			if v != want[i] {
				t.Fatalf("%s: element %d is %v with a rank-4 mask, %v with rank 3", name, i, v, want[i])
			}
		}
	}
}

// Masks that do not fit the rows or the keys are refused.
func TestStepMaskShapes(t *testing.T) {
	for name, a := range familyMembers(8, rand.New(rand.NewPCG(13, 13))) {
		for _, shape := range [][]int{{3, 1, 1}, {2, 1, 2}, {2, 2, 1, 1}, {2, 1}} {
			t.Run(fmt.Sprint(name, shape), func(t *testing.T) {
				defer func() {
					if recover() == nil {
						t.Fatalf("mask %v accepted for 2 rows over 1 position", shape)
					}
				}()
				a.StepMasked(radgen.NoGrad(), radgen.Zeros(2, 8), NewKVCache(2), radgen.Zeros(shape...))
			})
		}
	}
}

// Steps on a recording graph give the gradients that Forward over each
// row's history gives, with beam-style reorders in between (rows that
// continue the same history send gradients to the same inputs), for every
// member of the family: the cache's writes and gathers are ops of the
// graph like any other.
func TestIncrementalAttentionStepGradientsMatchForward(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for name, a := range familyMembers(8, rand.New(rand.NewPCG(14, 14))) {
			t.Run(dev.String()+"/"+name, func(t *testing.T) {
				const d, steps, rows = 8, 4, 3
				if err := radgen.ToDevice(a, dev); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(15, 15))
				reorders := map[int][]int{0: {0, 0, 1}, 2: {2, 0, 2}}
				xs, ws := make([]*radgen.Tensor, steps), make([]*radgen.Tensor, steps)
				for s := range steps {
					xs[s] = randInput(rng, rows, d).To(dev).SetRequiresGrad(true)
					ws[s] = randInput(rng, rows, d).To(dev)
				}
				params := radgen.Trainable(a)
				// grads runs loss and returns the gradients of the
				// parameters and of the inputs, on the CPU.
				grads := func(loss func(g *radgen.Graph) *radgen.Tensor) []*radgen.Tensor {
					for _, p := range params {
						p.Tensor.ZeroGrad()
					}
					for _, x := range xs {
						x.ZeroGrad()
					}
					g := radgen.NewGraph()
					if err := g.Backward(loss(g)); err != nil {
						t.Fatal(err)
					}
					var out []*radgen.Tensor
					for _, p := range params {
						if p.Tensor.Grad() == nil {
							t.Fatalf("%s: no gradient", p.Name)
						}
						out = append(out, p.Tensor.Grad().To(radgen.CPU))
					}
					for s, x := range xs {
						if x.Grad() == nil {
							t.Fatalf("input of step %d: no gradient", s)
						}
						out = append(out, x.Grad().To(radgen.CPU))
					}
					return out
				}
				got := grads(func(g *radgen.Graph) *radgen.Tensor {
					c := NewKVCache(rows)
					var loss *radgen.Tensor
					for s := range steps {
						l := g.Sum(g.Mul(a.Step(g, xs[s], c), ws[s]))
						if loss != nil {
							l = g.Add(loss, l)
						}
						loss = l
						if src, ok := reorders[s]; ok {
							if err := c.Reorder(src); err != nil {
								t.Fatal(err)
							}
						}
					}
					return loss
				})
				want := grads(func(g *radgen.Graph) *radgen.Tensor {
					hist := make([][]*radgen.Tensor, rows)
					var loss *radgen.Tensor
					for s := range steps {
						for r := range rows {
							hist[r] = append(hist[r][:len(hist[r]):len(hist[r])], rowOf(g, xs[s], r))
							seq := g.Concat(1, hist[r]...)
							out := a.Forward(g, g.Slice(seq, 1, s, s+1), seq, seq, nil)
							l := g.Sum(g.Mul(out, rowOf(g, ws[s], r)))
							if loss != nil {
								l = g.Add(loss, l)
							}
							loss = l
						}
						if src, ok := reorders[s]; ok {
							next := make([][]*radgen.Tensor, len(src))
							for i, r := range src {
								next[i] = hist[r]
							}
							hist = next
						}
					}
					return loss
				})
				for i := range want {
					what := "input"
					if i < len(params) {
						what = params[i].Name
					}
					if w := worstDiff(t, got[i], want[i]); w > 1e-4 {
						t.Errorf("gradient %d (%s): |Δ| = %g", i, what, w)
					}
				}
			})
		}
	}
}
