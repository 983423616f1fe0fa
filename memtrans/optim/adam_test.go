package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/kernels"
)

// param returns a named float32 parameter holding vals with gradient grad
// (nil for none).
func param(name string, vals, grad []float32) radgen.Named {
	t := radgen.FromFloat32(slices.Clone(vals), len(vals)).SetRequiresGrad(true)
	if grad != nil {
		t.SetGrad(radgen.FromFloat32(slices.Clone(grad), len(grad)))
	}
	return radgen.Named{Name: name, Tensor: t}
}

func setGrad(p radgen.Named, g ...float32) {
	p.Tensor.SetGrad(radgen.FromFloat32(slices.Clone(g), len(g)))
}

func newAdam(t *testing.T, groups []Group, opts ...AdamOption) *Adam {
	t.Helper()
	a, err := NewAdam(groups, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func near(t *testing.T, what string, got []float32, want []float64, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > rel*math.Abs(want[i])+1e-12 {
			t.Errorf("%s[%d] = %.9g, want %.9g", what, i, got[i], want[i])
		}
	}
}

// adam64 is Algorithm 1 of Kingma & Ba in float64, with L2 weight decay,
// decoupled decay and AMSGrad as torch defines them: the hand computation
// the float32 optimiser must approximate.
type adam64 struct {
	lr, wd, b1, b2, eps float64
	ams, decoupled      bool
	t                   int
	m, v, vmax          float64
}

func (a *adam64) step(p, g float64) float64 {
	a.t++
	if a.decoupled {
		p *= 1 - a.lr*a.wd
	} else {
		g += a.wd * p
	}
	a.m = a.b1*a.m + (1-a.b1)*g
	a.v = a.b2*a.v + (1-a.b2)*g*g
	v := a.v
	if a.ams {
		a.vmax = math.Max(a.vmax, a.v)
		v = a.vmax
	}
	bc1 := 1 - math.Pow(a.b1, float64(a.t))
	bc2 := 1 - math.Pow(a.b2, float64(a.t))
	return p - a.lr/bc1*a.m/(math.Sqrt(v)/math.Sqrt(bc2)+a.eps)
}

func TestAdamHandComputed(t *testing.T) {
	// Step 1 of Adam moves every parameter by lr·sign(g) (up to eps):
	// m̂ = g, v̂ = g². Step 2, for the first element, with g = −0.5:
	// m = 0.9·0.05 − 0.05 = −0.005, v = 0.999·0.00025 + 0.00025 = 0.00049975,
	// m̂ = −0.005/0.19, v̂ = 0.00049975/0.001999 = 0.25, so
	// θ = 0.9 + 0.1·(0.005/0.19)/0.5 = 0.905263158.
	p := param("w", []float32{1, -2}, []float32{0.5, 0.1})
	a := newAdam(t, []Group{{Params: []radgen.Named{p}, LR: 0.1}})
	a.Step()
	near(t, "step 1", p.Tensor.Data(), []float64{0.9, -2.1}, 1e-7)
	setGrad(p, -0.5, 0.1)
	a.Step()
	near(t, "step 2", p.Tensor.Data(), []float64{0.9 + 0.1*(0.005/0.19)/0.5, -2.2}, 1e-7)
}

func TestAdamVariantsAgainstFloat64(t *testing.T) {
	grads := []float32{0.5, 0.01, -0.3, 0, 0.2, -1.5, 0.001, 0.7}
	for _, tc := range []struct {
		name       string
		wd         float64
		ams, decup bool
	}{
		{"plain", 0, false, false},
		{"l2", 0.1, false, false},
		{"amsgrad", 0, true, false},
		{"amsgrad+l2", 0.05, true, false},
		{"adamw", 0.1, false, true},
		{"adamw+amsgrad", 0.1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := param("w", []float32{1.5}, nil)
			a := newAdam(t, []Group{{Params: []radgen.Named{p}, LR: 0.01, WeightDecay: tc.wd}},
				WithAMSGrad(tc.ams), WithDecoupledWeightDecay(tc.decup))
			ref := adam64{lr: 0.01, wd: tc.wd, b1: 0.9, b2: 0.999, eps: 1e-8, ams: tc.ams, decoupled: tc.decup}
			want := 1.5
			for i, g := range grads {
				setGrad(p, g)
				a.Step()
				want = ref.step(want, float64(g))
				near(t, "step", p.Tensor.Data(), []float64{want}, 2e-6)
				if t.Failed() {
					t.Fatalf("diverged at step %d", i+1)
				}
			}
		})
	}
}

func TestAMSGradKeepsMaximum(t *testing.T) {
	// After a large gradient and then zero gradients, AMSGrad divides by
	// the largest second moment seen, plain Adam by the decayed one.
	for _, ams := range []bool{false, true} {
		p := param("w", []float32{0}, []float32{1})
		a := newAdam(t, []Group{{Params: []radgen.Named{p}, LR: 0.1}}, WithAMSGrad(ams))
		a.Step()
		setGrad(p, 0)
		a.Step()
		st := a.State().Groups[0].Params[0]
		// v after step 2 is 0.999·0.001 = 0.000999; vmax stays 0.001.
		near(t, "exp_avg_sq", st.ExpAvgSq, []float64{0.000999}, 1e-6)
		m := 0.9 * 0.1
		bc1, bc2 := 1-0.81, 1-0.999*0.999
		v := 0.000999
		if ams {
			near(t, "max_exp_avg_sq", st.MaxExpAvgSq, []float64{0.001}, 1e-6)
			v = 0.001
		} else if st.MaxExpAvgSq != nil {
			t.Errorf("max_exp_avg_sq kept without AMSGrad")
		}
		want := -0.1 - 0.1/bc1*m/(math.Sqrt(v)/math.Sqrt(bc2)+1e-8)
		near(t, "θ", p.Tensor.Data(), []float64{want}, 1e-6)
	}
}

// refStep is torch 1.13's _single_tensor_adam written as the sequence of
// whole-tensor operations it performs, each rounding to float32 (add with
// alpha fused, as ATen's vectorised kernel is): the oracle for the fused
// single-pass kernel.
func refStep(p, grad, m, v, vmax []float32, step int, lr, wd, b1, b2, eps float64, ams, decoupled bool) {
	n := len(p)
	g := slices.Clone(grad)
	if decoupled {
		for i := range n {
			p[i] = float32(p[i] * float32(1-lr*wd))
		}
	} else if wd != 0 {
		for i := range n {
			g[i] = kernels.FMA32(p[i], float32(wd), g[i])
		}
	}
	for i := range n {
		m[i] = float32(m[i] * float32(b1))
	}
	for i := range n {
		m[i] = kernels.FMA32(g[i], float32(1-b1), m[i])
	}
	for i := range n {
		v[i] = float32(v[i] * float32(b2))
	}
	for i := range n {
		v[i] = v[i] + float32(float32(float32(1-b2)*g[i])*g[i])
	}
	bc1 := 1 - math.Pow(b1, float64(step))
	bc2 := 1 - math.Pow(b2, float64(step))
	src := v
	if ams {
		for i := range n {
			vmax[i] = max(vmax[i], v[i])
		}
		src = vmax
	}
	denom := make([]float32, n)
	for i := range n {
		denom[i] = float32(math.Sqrt(float64(src[i])))
	}
	for i := range n {
		denom[i] /= float32(math.Sqrt(bc2))
	}
	for i := range n {
		denom[i] += float32(eps)
	}
	s := float32(-(lr / bc1))
	for i := range n {
		p[i] += float32(s*m[i]) / denom[i]
	}
}

// TestAdamMatchesTorchOpSequence compares the single-pass kernel, bit for
// bit, with the op-by-op oracle over several steps and every variant.
func TestAdamMatchesTorchOpSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n, steps = 1000, 5
	for _, tc := range []struct {
		wd         float64
		ams, decup bool
	}{{0, false, false}, {5e-5, true, false}, {0.01, false, false}, {0.01, true, true}, {0.05, false, true}} {
		p0 := make([]float32, n)
		for i := range p0 {
			p0[i] = float32(rng.NormFloat64() * 0.2)
		}
		p := param("w", p0, nil)
		a := newAdam(t, []Group{{Params: []radgen.Named{p}, LR: 1e-3, WeightDecay: tc.wd}},
			WithAMSGrad(tc.ams), WithDecoupledWeightDecay(tc.decup))
		rp, rm, rv, rvmax := slices.Clone(p0), make([]float32, n), make([]float32, n), make([]float32, n)
		for s := 1; s <= steps; s++ {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-4)))
			}
			setGrad(p, g...)
			a.Step()
			refStep(rp, g, rm, rv, rvmax, s, 1e-3, tc.wd, 0.9, 0.999, 1e-8, tc.ams, tc.decup)
			got := p.Tensor.Data()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(rp[i]) {
					t.Fatalf("wd %v ams %v adamw %v step %d [%d]: %g, oracle %g", tc.wd, tc.ams, tc.decup, s, i, got[i], rp[i])
				}
			}
		}
		st := a.State().Groups[0].Params[0]
		if !slices.Equal(st.ExpAvg, rm) || !slices.Equal(st.ExpAvgSq, rv) {
			t.Errorf("moments differ from the oracle (wd %v ams %v)", tc.wd, tc.ams)
		}
		if tc.ams && !slices.Equal(st.MaxExpAvgSq, rvmax) {
			t.Errorf("max_exp_avg_sq differs from the oracle")
		}
		if st.Step != steps {
			t.Errorf("step count %d, want %d", st.Step, steps)
		}
	}
}

func TestAdamGroupsAndSkippedParams(t *testing.T) {
	ve := param("visual_extractor.conv.weight", []float32{1}, []float32{1})
	ed := param("encoder.w", []float32{1}, []float32{1})
	idle := param("encoder.unused", []float32{7}, nil)
	groups := R2GenGroups([]radgen.Named{ed, ve, idle}, 5e-5, 1e-4, 5e-5)
	if len(groups) != 2 || len(groups[0].Params) != 1 || groups[0].Params[0].Name != ve.Name || len(groups[1].Params) != 2 {
		t.Fatalf("R2GenGroups: %+v", groups)
	}
	a := newAdam(t, groups, WithAMSGrad(true))
	if a.NumGroups() != 2 || a.LR(0) != 5e-5 || a.LR(1) != 1e-4 || a.WeightDecay(1) != 5e-5 {
		t.Fatalf("groups: lr %v %v", a.LR(0), a.LR(1))
	}
	a.Step()
	// First step: θ − lr·(g+λθ)/(|g+λθ| + eps·…) ≈ θ − lr.
	near(t, "visual extractor", ve.Tensor.Data(), []float64{1 - 5e-5}, 1e-7)
	near(t, "encoder", ed.Tensor.Data(), []float64{1 - 1e-4}, 1e-7)
	if idle.Tensor.Data()[0] != 7 {
		t.Errorf("a parameter without gradient moved")
	}
	st := a.State()
	if st.Groups[1].Params[1].Step != 0 || st.Groups[1].Params[1].ExpAvg != nil {
		t.Errorf("a parameter without gradient has state %+v", st.Groups[1].Params[1])
	}
	a.ZeroGrad()
	if ve.Tensor.Grad() != nil || ed.Tensor.Grad() != nil {
		t.Errorf("ZeroGrad left gradients")
	}
	a.Step() // no gradients: nothing changes
	near(t, "encoder after an empty step", ed.Tensor.Data(), []float64{1 - 1e-4}, 1e-7)
	if got := len(a.Params()); got != 3 {
		t.Errorf("Params returned %d, want 3", got)
	}
}

func TestAdamParallelEqualsSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	mk := func() []radgen.Named {
		r := rand.New(rand.NewPCG(9, 9))
		var ps []radgen.Named
		for i, n := range []int{5*chunk + 17, 3, chunk, 2*chunk - 1} {
			v := make([]float32, n)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			ps = append(ps, param(string(rune('a'+i)), v, nil))
		}
		return ps
	}
	serial, par := mk(), mk()
	as := newAdam(t, []Group{{Params: serial, LR: 1e-3, WeightDecay: 1e-4}}, WithAMSGrad(true), WithWorkers(1))
	ap := newAdam(t, []Group{{Params: par, LR: 1e-3, WeightDecay: 1e-4}}, WithAMSGrad(true), WithWorkers(4))
	for range 3 {
		for i := range serial {
			g := make([]float32, serial[i].Tensor.Len())
			for j := range g {
				g[j] = float32(rng.NormFloat64())
			}
			setGrad(serial[i], g...)
			setGrad(par[i], g...)
		}
		as.Step()
		ap.Step()
	}
	for i := range serial {
		if !slices.Equal(serial[i].Tensor.Data(), par[i].Tensor.Data()) {
			t.Errorf("tensor %d differs between 1 and 4 workers", i)
		}
	}
}

func TestNewAdamErrors(t *testing.T) {
	a := param("a", []float32{1}, nil)
	for name, tc := range map[string]struct {
		groups []Group
		opts   []AdamOption
	}{
		"negative lr":      {[]Group{{Params: []radgen.Named{a}, LR: -1}}, nil},
		"NaN weight decay": {[]Group{{Params: []radgen.Named{a}, LR: 1, WeightDecay: math.NaN()}}, nil},
		"beta 1":           {[]Group{{LR: 1}}, []AdamOption{WithBetas(1, 0.999)}},
		"negative eps":     {[]Group{{LR: 1}}, []AdamOption{WithEps(-1)}},
		"workers":          {[]Group{{LR: 1}}, []AdamOption{WithWorkers(0)}},
		"duplicate name":   {[]Group{{Params: []radgen.Named{a}, LR: 1}, {Params: []radgen.Named{{Name: "a", Tensor: radgen.NewParam(1)}}, LR: 1}}, nil},
		"same tensor":      {[]Group{{Params: []radgen.Named{a, {Name: "b", Tensor: a.Tensor}}, LR: 1}}, nil},
		"float64":          {[]Group{{Params: []radgen.Named{{Name: "x", Tensor: radgen.Zeros64(2)}}, LR: 1}}, nil},
		"nil tensor":       {[]Group{{Params: []radgen.Named{{Name: "x"}}, LR: 1}}, nil},
	} {
		if _, err := NewAdam(tc.groups, tc.opts...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", name, err)
		}
	}
}

func TestSetGradChecksShape(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("SetGrad with a wrong shape did not panic")
		}
	}()
	radgen.NewParam(2, 3).SetGrad(radgen.Zeros(3, 2))
}

func TestPowIntMatchesPython(t *testing.T) {
	// beta**step as CPython computes it (glibc pow); math.Pow misses most.
	for _, tc := range []struct {
		x    float64
		n    int64
		want float64
	}{
		{0.9, 1, 0.9},
		{0.9, 7, 0.4782969000000001},
		{0.9, 100, 2.6561398887587544e-05},
		{0.9, 2000, 3.0550539125986597e-92},
		{0.999, 3, 0.997002999},
		{0.999, 17, 0.9831353223738244},
		{0.999, 1000, 0.36769542477096373},
		{0.999, 12345, 4.324661796025634e-06},
	} {
		if got := powInt(tc.x, tc.n); got != tc.want {
			t.Errorf("powInt(%v, %d) = %v, want %v", tc.x, tc.n, got, tc.want)
		}
	}
}

// chunk is the size of the ranges the engine spreads a parameter's update
// over (radgen's adamChunk): the tests' sizes straddle it.
const chunk = 1 << 16
