package half

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/f32"
)

var oddSizes = []int{1, 7, 63, 65, 511, 513}

// product is one Op with its operands and a float64 reference.
type product struct {
	op   Op
	y0   []float32 // Y before the product (read when Add)
	wf   []float64 // the weights as stored (after rounding to binary16)
	bias []float32
}

func newProduct(rng *rand.Rand, half bool, m, n, k int, pad int, bias, relu, add bool) *product {
	ldx, ldy, ldw := k+pad, n+pad, k+pad
	w := make([]float32, max(n*ldw-pad, 0))
	for i := range w {
		w[i] = float32(rng.NormFloat64() / math.Sqrt(float64(k)))
	}
	p := &product{}
	p.op = Op{M: m, LDX: ldx, LDY: ldy, ReLU: relu, Add: add}
	p.op.W = Weights{N: n, K: k, LD: ldw, F32: w}
	if half {
		dense := make([]float32, n*k)
		for j := 0; j < n; j++ {
			copy(dense[j*k:(j+1)*k], w[j*ldw:])
		}
		p.op.W = NewWeights(n, k, dense)
	}
	// The reference reads the weights as stored, through At.
	p.wf = make([]float64, n*k)
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			p.wf[j*k+q] = float64(p.op.W.At(j, q))
		}
	}
	p.op.X = make([]float32, max(m*ldx-pad, 0))
	for i := range p.op.X {
		p.op.X[i] = float32(rng.NormFloat64())
	}
	p.op.Y = make([]float32, max(m*ldy-pad, 0)+pad) // a guard past the end
	for i := range p.op.Y {
		p.op.Y[i] = float32(rng.NormFloat64())
	}
	p.y0 = append([]float32(nil), p.op.Y...)
	if bias {
		p.op.Bias = make([]float32, n)
		for i := range p.op.Bias {
			p.op.Bias[i] = float32(rng.NormFloat64())
		}
	}
	return p
}

// verify compares Y with the float64 reference, allowing the float32
// rounding of a K-term sum, and checks that the padding of Y was not
// written.
func (p *product) verify() error {
	op := p.op
	n, k := op.W.N, op.W.K
	eps := math.Ldexp(1, -23)
	for i := 0; i < op.M; i++ {
		for j := 0; j < n; j++ {
			var s, mag float64
			for q := 0; q < k; q++ {
				v := float64(op.X[i*op.LDX+q]) * p.wf[j*k+q]
				s += v
				mag += math.Abs(v)
			}
			if op.Bias != nil {
				s += float64(op.Bias[j])
				mag += math.Abs(float64(op.Bias[j]))
			}
			if op.ReLU {
				s = max(s, 0)
			}
			if op.Add {
				s += float64(p.y0[i*op.LDY+j])
				mag += math.Abs(float64(p.y0[i*op.LDY+j]))
			}
			got := float64(op.Y[i*op.LDY+j])
			if tol := float64(k+3) * eps * mag; math.Abs(got-s) > tol {
				return fmt.Errorf("y[%d][%d] = %v, want %v (|Δ| %.3g > %.3g)", i, j, got, s, math.Abs(got-s), tol)
			}
		}
	}
	for i := range op.Y {
		if r, j := i/op.LDY, i%op.LDY; (r >= op.M || j >= n) && op.Y[i] != p.y0[i] {
			return fmt.Errorf("y[%d] (row %d, column %d) written outside the product", i, r, j)
		}
	}
	return nil
}

func (p *product) check(t *testing.T, what string) {
	t.Helper()
	if err := p.verify(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, asm := range asmModes() {
		for _, half := range []bool{false, true} {
			for _, m := range []int{1, 2, 3, 4, 7} {
				for _, n := range oddSizes {
					for _, k := range oddSizes {
						if m > 3 && n*k > 70000 {
							continue
						}
						pad := rng.IntN(3)
						p := newProduct(rng, half, m, n, k, pad, rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0)
						what := fmt.Sprintf("asm=%v half=%v m=%d n=%d k=%d pad=%d relu=%v add=%v bias=%v", asm, half, m, n, k, pad, p.op.ReLU, p.op.Add, p.op.Bias != nil)
						runMode(asm, func() {
							var r Runner
							r.Add(p.op)
							r.Run()
						})
						p.check(t, what)
					}
				}
			}
		}
	}
}

// TestRunnerBatch runs batches of several products on several goroutines
// and requires the results of a serial run, bit for bit: each output is
// computed by one goroutine with one kernel, whichever it is.
func TestRunnerBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rng := rand.New(rand.NewPCG(7, 8))
	var r Runner
	for round := range 20 {
		var ps []*product
		for range 1 + rng.IntN(6) {
			m, n, k := 1+rng.IntN(5), 1+rng.IntN(700), 1+rng.IntN(700)
			ps = append(ps, newProduct(rng, rng.IntN(2) == 0, m, n, k, rng.IntN(2), rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0))
		}
		// Serially, one product at a time on a small batch each.
		want := make([][]float32, len(ps))
		for i, p := range ps {
			y := append([]float32(nil), p.op.Y...)
			op := p.op
			op.Y = y
			var tile [maxRows * maxChunk]float32
			op.check()
			for j0 := 0; j0 < op.W.N; j0 += op.chunkCols() {
				op.columns(j0, min(j0+op.chunkCols(), op.W.N), &tile)
			}
			want[i] = y
		}
		for _, p := range ps {
			r.Add(p.op)
		}
		r.Run()
		for i, p := range ps {
			p.check(t, fmt.Sprintf("round %d product %d", round, i))
			for j := range want[i] {
				if math.Float32bits(want[i][j]) != math.Float32bits(p.op.Y[j]) {
					t.Fatalf("round %d product %d: y[%d] = %v in the batch, %v alone", round, i, j, p.op.Y[j], want[i][j])
				}
			}
		}
	}
}

// TestRunnerEmpty runs and starts batches with no op, or with ops of no
// columns, as a module's batch with nothing to compute beside its owner is.
func TestRunnerEmpty(t *testing.T) {
	var r Runner
	r.Run()
	r.Start()
	r.Wait(0)
	r.Finish()
	r.Add(Op{M: 3, X: make([]float32, 3*8), W: Float32(0, 8, nil)})
	r.Start()
	r.Finish()
	if n := r.chunks(); n != 0 {
		t.Fatalf("an emptied batch has %d chunks", n)
	}
}

// TestRunnerConcurrent runs Runners on several goroutines at once (the
// helpers serve whichever batch is posted).
func TestRunnerConcurrent(t *testing.T) {
	done := make(chan error)
	for g := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			var r Runner
			var err error
			for range 30 {
				p := newProduct(rng, g%2 == 0, 3, 512, 512, 0, true, false, false)
				q := newProduct(rng, g%2 == 1, 2, 300, 400, 1, false, true, true)
				r.Add(p.op)
				r.Add(q.op)
				r.Run()
				for _, x := range []*product{p, q} {
					if e := x.verify(); e != nil && err == nil {
						err = e
					}
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestRunnerSlowHelper makes the helpers lose their core in the middle of
// their chunks (they sleep): the caller, out of chunks, blocks until the
// last one is done, and the results are complete.
func TestRunnerSlowHelper(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	if !f32.StartHelpers() {
		t.Skip("no helpers")
	}
	helperHook = func() { time.Sleep(time.Millisecond) }
	defer func() { helperHook = nil }()
	rng := rand.New(rand.NewPCG(9, 9))
	var r Runner
	for range 5 {
		p := newProduct(rng, true, 3, 512, 512, 0, true, false, true)
		q := newProduct(rng, false, 3, 256, 512, 0, false, true, false)
		r.Add(p.op)
		r.Add(q.op)
		r.Run()
		for _, x := range []*product{p, q} {
			x.check(t, "slow helper")
		}
	}
}

func TestOpPanics(t *testing.T) {
	w := Float32(4, 8, make([]float32, 32))
	for name, op := range map[string]Op{
		"short X":    {M: 2, X: make([]float32, 15), W: w, Y: make([]float32, 8)},
		"short Y":    {M: 2, X: make([]float32, 16), W: w, Y: make([]float32, 7)},
		"short W":    {M: 1, X: make([]float32, 8), W: Float32(4, 8, make([]float32, 31)), Y: make([]float32, 4)},
		"no weights": {M: 1, X: make([]float32, 8), W: Weights{N: 4, K: 8}, Y: make([]float32, 4)},
		"both":       {M: 1, X: make([]float32, 8), W: Weights{N: 4, K: 8, F32: make([]float32, 32), f16: make([]uint16, 32)}, Y: make([]float32, 4)},
		"short half": {M: 1, X: make([]float32, 8), W: Weights{N: 5, K: 8, f16: make([]uint16, 32)}, Y: make([]float32, 5)},
		"bad LDX":    {M: 2, X: make([]float32, 16), LDX: 7, W: w, Y: make([]float32, 8)},
		"short bias": {M: 1, X: make([]float32, 8), W: w, Y: make([]float32, 4), Bias: make([]float32, 3)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			var r Runner
			r.Add(op)
		}()
	}
}

// After warm-up, batching and running products allocates nothing.
func TestRunnerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	p := newProduct(rng, true, 3, 512, 1536, 0, true, true, false)
	q := newProduct(rng, false, 3, 512, 512, 0, true, false, true)
	var r Runner
	allocs := testing.AllocsPerRun(50, func() {
		r.Add(p.op)
		r.Add(q.op)
		r.Run()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
}

// stageChain returns the ops of a chain of products, each reading the
// last one's result: x (3×k0) → y1 → y2 → …, ReLU between them, with
// the results' buffers.
func stageChain(rng *rand.Rand, sizes []int) (ops []Op, ys [][]float32) {
	x := make([]float32, 3*sizes[0])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := 1; i < len(sizes); i++ {
		k, n := sizes[i-1], sizes[i]
		w := make([]float32, n*k)
		for j := range w {
			w[j] = float32(rng.NormFloat64() / math.Sqrt(float64(k)))
		}
		y := make([]float32, 3*n)
		ops = append(ops, Op{M: 3, X: x, W: Float32(n, k, w), Y: y, ReLU: i < len(sizes)-1})
		ys = append(ys, y)
		x = y
	}
	return ops, ys
}

// A started batch of a chain of ops, each reading the one before
// (Op.After), gives what the ops run one after the other give, bit for
// bit, while its owner runs other batches (which the helpers serve
// first), waits for it op by op, and with helpers that lose their core.
func TestRunnerChain(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	sizes := []int{1536, 512, 512, 1536, 512, 64}
	for _, slow := range []bool{false, true} {
		if slow {
			helperHook = func() { time.Sleep(200 * time.Microsecond) }
		}
		rng := rand.New(rand.NewPCG(11, 12))
		ops, want := stageChain(rng, sizes)
		var serial Runner
		for _, op := range ops {
			serial.Add(op)
			serial.Run()
		}
		for round := range 5 {
			ops2, got := stageChain(rand.New(rand.NewPCG(11, 12)), sizes)
			var bg, fg Runner
			for i, op := range ops2 {
				op.After = i // the op before
				if got := bg.Add(op); got != i {
					t.Fatalf("Add returned %d, want %d", got, i)
				}
			}
			bg.Start()
			for range round {
				p := newProduct(rng, round%2 == 0, 3, 512, 512, 0, true, false, false)
				fg.Add(p.op)
				fg.Run()
				p.check(t, "foreground batch beside a started one")
			}
			for s := range len(ops2) {
				bg.Wait(s)
				for i := range s + 1 {
					for j := range got[i] {
						if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
							t.Fatalf("slow=%v round %d: after Wait(%d), op %d y[%d] = %v, want %v", slow, round, s, i, j, got[i][j], want[i][j])
						}
					}
				}
			}
			bg.Finish()
		}
		helperHook = nil
	}
}

// Batches of ops with random dependencies, started beside their owner and
// waited for op by op in a random order, or run at once, beside other
// goroutines' batches, give the bits of the ops run one by one, and end.
func TestRunnerRandomDependencies(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2)))
	done := make(chan error)
	for gr := range 3 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(gr), 77))
			var bg Runner
			for trial := range 60 {
				n := 1 + rng.IntN(12)
				type opy struct {
					op   Op
					want []float32
				}
				ops := make([]opy, n)
				for i := range ops {
					k := 64 * (1 + rng.IntN(8))
					nn := 4 * (1 + rng.IntN(200))
					w := make([]float32, nn*k)
					for j := range w {
						w[j] = float32(rng.NormFloat64())
					}
					x := make([]float32, 2*k)
					for j := range x {
						x[j] = float32(rng.NormFloat64())
					}
					ops[i].op = Op{M: 2, X: x, W: Float32(nn, k, w), Y: make([]float32, 2*nn)}
				}
				// Chain some ops: op i reads a prefix of op j's output as its X.
				for i := 1; i < n; i++ {
					if rng.IntN(2) == 0 {
						j := rng.IntN(i)
						if len(ops[j].op.Y) >= len(ops[i].op.X) {
							ops[i].op.X = ops[j].op.Y[:len(ops[i].op.X)]
							ops[i].op.After = j + 1
						}
					}
				}
				// The ops one by one, in order, give the bits to expect.
				var one Runner
				for i := range ops {
					o := ops[i].op
					o.After = 0
					y := make([]float32, len(o.Y))
					if a := ops[i].op.After; a > 0 {
						o.X = ops[a-1].want[:len(o.X)]
					}
					o.Y = y
					one.Add(o)
					one.Run()
					ops[i].want = y
				}
				for i := range ops {
					if got := bg.Add(ops[i].op); got != i {
						done <- fmt.Errorf("Add returned %d, want %d", got, i)
						return
					}
				}
				if trial%3 == 0 {
					bg.Run()
				} else {
					bg.Start()
					for _, i := range rng.Perm(n)[:rng.IntN(n)] {
						bg.Wait(i)
						for j, v := range ops[i].want {
							if math.Float32bits(ops[i].op.Y[j]) != math.Float32bits(v) {
								done <- fmt.Errorf("trial %d: after Wait(%d): y[%d] = %v, want %v", trial, i, j, ops[i].op.Y[j], v)
								return
							}
						}
					}
					bg.Finish()
				}
				for i := range ops {
					for j, v := range ops[i].want {
						if math.Float32bits(ops[i].op.Y[j]) != math.Float32bits(v) {
							done <- fmt.Errorf("trial %d: op %d y[%d] = %v, want %v", trial, i, j, ops[i].op.Y[j], v)
							return
						}
					}
				}
			}
			done <- nil
		}()
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
