//go:build cuda

package cuda_test

// GPU tests of the training primitives and the optimiser: every method of
// accel.Trainer and accel.Optimizer on the CUDA engine against the host
// engine (internal/accel.Host, the reference). Methods without a float64
// sum must give the host's bits; the others agree within 1e-5 relative
// (plus 1e-6 absolute near zero). Skipped without a GPU; the cases also run
// on the host alone so that they cannot rot unseen.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/cuda"
)

// trainCase runs one method on an engine over fresh copies of its inputs
// and returns what it wrote.
type trainCase struct {
	name  string
	exact bool // the host's bits: no sum in float64 to round differently
	run   func(t *testing.T, e accel.Engine) []float32
}

func up(t *testing.T, e accel.Engine, x []float32) accel.Ptr {
	t.Helper()
	p, err := e.AllocPtr(int64(4 * max(len(x), 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.FreePtr(p) })
	if err := e.CopyIn(p, x); err != nil {
		t.Fatal(err)
	}
	return p
}

func upInt32(t *testing.T, e accel.Engine, x []int32) accel.Ptr {
	t.Helper()
	p := up(t, e, make([]float32, len(x)))
	if err := e.CopyInInt32(p, x); err != nil {
		t.Fatal(err)
	}
	return p
}

func down(t *testing.T, e accel.Engine, p accel.Ptr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := e.CopyOut(out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func normal(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func trainCases() []trainCase {
	rng := rand.New(rand.NewPCG(7, 11))
	r := func(n int) []float32 { return normal(rng, n, 1) }
	var cs []trainCase
	add := func(name string, exact bool, run func(t *testing.T, e accel.Engine) []float32) {
		cs = append(cs, trainCase{name, exact, run})
	}

	{
		x := r(10007)
		add("Fill", true, func(t *testing.T, e accel.Engine) []float32 {
			p := up(t, e, x)
			ok(t, e.Fill(p.Add(3), -2.5, 10000))
			return down(t, e, p, len(x))
		})
		y := r(10007)
		add("Axpy", true, func(t *testing.T, e accel.Engine) []float32 {
			p, q := up(t, e, x), up(t, e, y)
			ok(t, e.Axpy(p, q, -0.37, len(x)))
			ok(t, e.Axpy(q, q, 1.5, len(y))) // in place on itself
			return append(down(t, e, p, len(x)), down(t, e, q, len(y))...)
		})
		c := r(5000)
		c[0], c[1], c[2], c[3] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))
		add("Clamp", true, func(t *testing.T, e accel.Engine) []float32 {
			p := up(t, e, c)
			ok(t, e.Clamp(p, 0.8, len(c)))
			return down(t, e, p, len(c))
		})
	}
	{
		// (4, 6, 9): a transposed view of a buffer against a (6, 9) operand
		// broadcast over the first dimension, with zeros for the masked fill.
		shape, sa, sb := []int{4, 6, 9}, []int{1, 4, 24}, []int{0, 9, 1}
		a, b := r(216), r(54)
		for i := 0; i < len(b); i += 4 {
			b[i] = 0
		}
		ops := []struct {
			name string
			op   accel.BinaryOp
		}{{"Add", accel.OpAdd}, {"Sub", accel.OpSub}, {"Mul", accel.OpMul}, {"MaskFill", accel.OpMaskFill}}
		for _, o := range ops {
			add("Binary/"+o.name, true, func(t *testing.T, e accel.Engine) []float32 {
				pa, pb, pd := up(t, e, a), up(t, e, b), up(t, e, make([]float32, 216))
				ok(t, e.Binary(o.op, pd, pa, pb, shape, sa, sb, -3))
				return down(t, e, pd, 216)
			})
		}
	}
	{
		type red struct {
			name       string
			shape, dst []int
			acc        bool
		}
		for _, c := range []red{
			{"bias", []int{300, 70}, []int{0, 1}, true},         // summed by blocks
			{"middle", []int{6, 40, 50}, []int{0, 1, 0}, false}, // blocks, over two dimensions
			{"planes", []int{64, 49}, []int{1, 0}, false},       // serial sums
			{"all", []int{5, 1000}, []int{0, 0}, false},         // one block
			{"gaps", []int{3, 4}, []int{8, 1}, false},           // zeros between the destinations
			{"transpose", []int{5, 7}, []int{1, 5}, true},       // nothing summed
		} {
			n, m := 1, 1
			for i, s := range c.shape {
				n *= s
				m += (s - 1) * c.dst[i]
			}
			x, d := normal(rng, n, 1), normal(rng, m, 1)
			add("ReduceSum/"+c.name, false, func(t *testing.T, e accel.Engine) []float32 {
				px, pd := up(t, e, x), up(t, e, d)
				ok(t, e.ReduceSum(pd, px, c.shape, c.dst, c.acc))
				return down(t, e, pd, m)
			})
		}
	}
	{
		y, dy, dx := r(4099), r(4099), r(4099)
		for i := range y[:2000] {
			y[i] = float32(math.Tanh(float64(y[i])))
		}
		for _, a := range []struct {
			name string
			act  accel.Activation
		}{{"ReLU", accel.ActReLU}, {"Tanh", accel.ActTanh}, {"Sigmoid", accel.ActSigmoid}} {
			add("ActivationBackward/"+a.name, true, func(t *testing.T, e accel.Engine) []float32 {
				px, pdy, py := up(t, e, dx), up(t, e, dy), up(t, e, y)
				ok(t, e.ActivationBackward(a.act, px, pdy, py, len(y)))
				return down(t, e, px, len(y))
			})
		}
	}
	for _, cols := range []int{1, 761, 3000} {
		const rows = 7
		z, dy, dx := r(rows*cols), r(rows*cols), r(rows*cols)
		for _, log := range []bool{false, true} {
			name := "SoftmaxBackward"
			if log {
				name = "LogSoftmaxBackward"
			}
			add(name+"/"+itoa(cols), false, func(t *testing.T, e accel.Engine) []float32 {
				pz, py, pdy, pdx := up(t, e, z), up(t, e, make([]float32, rows*cols)), up(t, e, dy), up(t, e, dx)
				if log {
					ok(t, e.LogSoftmax(py, pz, rows, cols))
				} else {
					ok(t, e.Softmax(py, pz, rows, cols))
				}
				ok(t, e.SoftmaxBackward(pdx, pdy, py, rows, cols, log))
				return down(t, e, pdx, rows*cols)
			})
		}
	}
	for _, cols := range []int{2, 37, 512, 2500} {
		const rows = 6
		x, dy, dx := r(rows*cols), r(rows*cols), r(rows*cols)
		for i := range x {
			x[i] += 3
		}
		for _, k := range []struct {
			name string
			kind accel.NormKind
			eps  float64
		}{{"R2Gen", accel.NormR2Gen, 1e-6}, {"Standard", accel.NormStandard, 1e-5}} {
			add("Normalize/"+k.name+"/"+itoa(cols), false, func(t *testing.T, e accel.Engine) []float32 {
				px, py, pinv := up(t, e, x), up(t, e, make([]float32, rows*cols)), up(t, e, make([]float32, rows))
				ok(t, e.Normalize(py, pinv, px, rows, cols, k.eps, k.kind))
				return append(down(t, e, py, rows*cols), down(t, e, pinv, rows)...)
			})
			// The backward pass from the host's forward outputs, so that
			// only NormalizeBackward is compared.
			y, inv := hostNormalize(x, rows, cols, k.eps, k.kind)
			add("NormalizeBackward/"+k.name+"/"+itoa(cols), false, func(t *testing.T, e accel.Engine) []float32 {
				py, pinv, pdy, pdx := up(t, e, y), up(t, e, inv), up(t, e, dy), up(t, e, dx)
				ok(t, e.NormalizeBackward(pdx, pdy, py, pinv, rows, cols, k.eps, k.kind))
				return down(t, e, pdx, rows*cols)
			})
		}
	}
	{
		shape, perm := []int{2, 3, 4, 5}, []int{3, 1, 0, 2}
		x := r(120)
		add("Permute", true, func(t *testing.T, e accel.Engine) []float32 {
			px, py := up(t, e, x), up(t, e, make([]float32, 120))
			ok(t, e.Permute(py, px, shape, perm))
			return down(t, e, py, 120)
		})
		const rows, cols, ldd, lds = 9, 33, 40, 35
		s, d := r(rows*lds), r(rows*ldd)
		for _, c := range []struct {
			name string
			lds  int
			acc  bool
		}{{"copy", lds, false}, {"add", lds, true}, {"bias", 0, false}, {"addbias", 0, true}} {
			add("CopyStrided/"+c.name, true, func(t *testing.T, e accel.Engine) []float32 {
				ps, pd := up(t, e, s), up(t, e, d)
				ok(t, e.CopyStrided(pd.Add(2), ldd, ps.Add(1), c.lds, rows-1, cols, c.acc))
				return down(t, e, pd, rows*ldd)
			})
		}
	}
	{
		const n, vocab, dim = 500, 300, 129
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(rng.IntN(vocab/10+4)*10 - 20) // repeats, and some outside [0, vocab)
		}
		src, dst := r(n*dim), r(vocab*dim)
		add("ScatterAdd", true, func(t *testing.T, e accel.Engine) []float32 {
			pd, ps, pi := up(t, e, dst), up(t, e, src), upInt32(t, e, ids)
			ok(t, e.ScatterAdd(pd, ps, pi, n, vocab, dim))
			return down(t, e, pd, vocab*dim)
		})
	}
	for _, g := range []accel.ConvGeom{
		{H: 13, W: 11, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilH: 1, DilW: 1},
		{H: 9, W: 12, KH: 2, KW: 3, StrideH: 1, StrideW: 3, PadH: 2, PadW: 0, DilH: 3, DilW: 2},
	} {
		const c = 3
		npix, rows := g.OutH()*g.OutW(), c*g.KH*g.KW
		ld := npix + 3
		x, col, dx := r(c*g.H*g.W), r(rows*ld), r(c*g.H*g.W)
		name := itoa(g.KH) + "x" + itoa(g.KW) + "s" + itoa(g.StrideH)
		add("Im2col/"+name, true, func(t *testing.T, e accel.Engine) []float32 {
			px, pc := up(t, e, x), up(t, e, col)
			ok(t, e.Im2col(pc, ld, px, c, g))
			return down(t, e, pc, rows*ld)
		})
		add("Col2im/"+name, true, func(t *testing.T, e accel.Engine) []float32 {
			pdx, pc := up(t, e, dx), up(t, e, col)
			ok(t, e.Col2im(pdx, pc, ld, c, g))
			return down(t, e, pdx, len(dx))
		})
	}
	for _, g := range []accel.ConvGeom{
		{H: 15, W: 17, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilH: 1, DilW: 1},
		{H: 6, W: 6, KH: 1, KW: 1, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilH: 1, DilW: 1}, // windows of padding only
	} {
		const planes = 5
		x := r(planes * g.H * g.W)
		x[7] = float32(math.NaN())
		x[g.H*g.W+2], x[g.H*g.W+3] = 9, 9 // a tie
		nOut := planes * g.OutH() * g.OutW()
		dy, dx := r(nOut), r(planes*g.H*g.W)
		name := itoa(g.KH) + "s" + itoa(g.StrideH) + "p" + itoa(g.PadH)
		add("MaxPool/"+name, true, func(t *testing.T, e accel.Engine) []float32 {
			px, py, pa := up(t, e, x), up(t, e, make([]float32, nOut)), up(t, e, make([]float32, nOut))
			ok(t, e.MaxPool(py, pa, px, planes, g))
			return append(down(t, e, py, nOut), down(t, e, pa, nOut)...)
		})
		add("MaxPoolBackward/"+name, true, func(t *testing.T, e accel.Engine) []float32 {
			px, py, pa := up(t, e, x), up(t, e, make([]float32, nOut)), up(t, e, make([]float32, nOut))
			ok(t, e.MaxPool(py, pa, px, planes, g))
			pdx, pdy := up(t, e, dx), up(t, e, dy)
			ok(t, e.MaxPoolBackward(pdx, pdy, pa, planes, g.H*g.W, g.OutH()*g.OutW()))
			return down(t, e, pdx, len(dx))
		})
	}
	{
		const n = 30011
		p, g, m, v, vm := r(n), r(n), normal(rng, n, 0.1), normal(rng, n, 0.01), normal(rng, n, 0.01)
		for i := range v {
			v[i], vm[i] = float32(math.Abs(float64(v[i]))), float32(math.Abs(float64(vm[i])))
		}
		const lr, step = 1e-3, 3
		bc1, bc2 := 1-math.Pow(0.9, step), 1-math.Pow(0.999, step)
		base := accel.AdamConsts{Decay: 1, Beta1: 0.9, OneMinusB1: float32(1 - 0.9), Beta2: 0.999, OneMinusB2: float32(1 - 0.999),
			BC2Sqrt: float32(math.Sqrt(bc2)), Eps: 1e-8, NegStepLen: float32(-lr / bc1)}
		l2, ams, adamw := base, base, base
		l2.WD, l2.AMSGrad = 5e-4, true
		ams.AMSGrad = true
		adamw.Decoupled, adamw.Decay = true, float32(1-lr*0.01)
		for _, c := range []struct {
			name string
			k    accel.AdamConsts
		}{{"Adam", base}, {"AMSGrad", ams}, {"AdamW", adamw}, {"L2+AMSGrad", l2}} {
			add("AdamStep/"+c.name, true, func(t *testing.T, e accel.Engine) []float32 {
				pp, pg, pm, pv, pvm := up(t, e, p), up(t, e, g), up(t, e, m), up(t, e, v), up(t, e, vm)
				for range 3 {
					ok(t, e.AdamStep(pp, pg, pm, pv, pvm, n, c.k))
				}
				out := append(down(t, e, pp, n), down(t, e, pm, n)...)
				out = append(out, down(t, e, pv, n)...)
				return append(out, down(t, e, pvm, n)...)
			})
		}
	}
	return cs
}

// hostNormalize returns Normalize's outputs on the host engine.
func hostNormalize(x []float32, rows, cols int, eps float64, kind accel.NormKind) (y, inv []float32) {
	h := accel.NewHost()
	defer h.Close()
	y, inv = make([]float32, rows*cols), make([]float32, rows)
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	pin, err := h.AllocPtr(int64(4 * len(x)))
	must(err)
	py, err := h.AllocPtr(int64(4 * len(y)))
	must(err)
	pinv, err := h.AllocPtr(int64(4 * rows))
	must(err)
	must(h.CopyIn(pin, x))
	must(h.Normalize(py, pinv, pin, rows, cols, eps, kind))
	must(h.CopyOut(y, py))
	must(h.CopyOut(inv, pinv))
	return y, inv
}

func itoa(v int) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

// agree reports the worst relative difference of got from want (NaN equal
// to NaN), and whether every element has want's bits.
func agree(got, want []float32) (worst float64, bitwise bool) {
	bitwise = len(got) == len(want)
	for i := range min(len(got), len(want)) {
		g, w := float64(got[i]), float64(want[i])
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			bitwise = bitwise && math.IsNaN(g) && math.IsNaN(w)
		}
		switch {
		case math.IsNaN(g) || math.IsNaN(w):
			if math.IsNaN(g) != math.IsNaN(w) {
				worst = math.Inf(1)
			}
		case g == w:
		default:
			worst = max(worst, math.Abs(g-w)/(math.Abs(w)+1e-6/1e-5))
		}
	}
	return worst, bitwise
}

// Every training primitive and optimiser step of the CUDA engine against
// the host engine.
func TestGPUTrain(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	gpu, err := accel.OpenCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	host := accel.NewHost()
	defer host.Close()
	for _, c := range trainCases() {
		t.Run(c.name, func(t *testing.T) {
			want := c.run(t, host)
			got := c.run(t, gpu)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			worst, bitwise := agree(got, want)
			t.Logf("max relative |Δ| %.3g, bitwise %v", worst, bitwise)
			if c.exact && !bitwise {
				t.Errorf("not the host's bits (max relative |Δ| %.3g)", worst)
			}
			if worst > 1e-5 {
				t.Errorf("GPU and host differ by %.3g relative", worst)
			}
		})
	}
}

// The cases run on the host engine and give the same bits twice.
func TestTrainCasesRunOnHost(t *testing.T) {
	host := accel.NewHost()
	defer host.Close()
	for _, c := range trainCases() {
		a, b := c.run(t, host), c.run(t, host)
		if len(a) == 0 {
			t.Errorf("%s: no output", c.name)
		}
		if _, same := agree(a, b); !same {
			t.Errorf("%s: two runs on the host differ", c.name)
		}
	}
}
