package radgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// convCase is a convolution of the deferred path's tests.
type convCase struct {
	name                string
	b, h, w, cin, cout  int
	k, stride, pad, dil int
}

var convCases = []convCase{
	{"1x1", 2, 7, 5, 16, 24, 1, 1, 0, 1},
	{"1x1 large", 2, 56, 56, 64, 64, 1, 1, 0, 1}, // products shared out between goroutines
	{"1x1 stride 2", 2, 7, 6, 16, 24, 1, 2, 0, 1},
	{"3x3 stride 1 (Winograd)", 2, 9, 7, 12, 20, 3, 1, 1, 1}, // odd planes: border tiles
	{"3x3 stride 1 few channels (Winograd)", 1, 5, 6, 2, 3, 3, 1, 1, 1},
	{"3x3 stride 1 large (Winograd)", 2, 28, 28, 32, 48, 3, 1, 1, 1},
	{"3x3 stride 2", 2, 9, 8, 12, 20, 3, 2, 1, 1},
	{"7x7 stride 2 (stem)", 2, 23, 19, 3, 16, 7, 2, 3, 1},
	{"3x3 dilation 2", 1, 9, 9, 4, 8, 3, 1, 0, 2},
}

func (c convCase) params() Conv2dParams {
	p := ConvSquare(c.stride, c.pad)
	p.Dilation = [2]int{c.dil, c.dil}
	return p
}

// convOperands are a convolution's operands in float64: x (B, Cin, H, W),
// the weight, a bias, a batch norm's weight, bias, mean and variance, and a
// residual of the output's shape.
type convOperands struct {
	x, w, bias, gamma, beta, mean, variance, res *Tensor
}

func normal64(rng *rand.Rand, scale, offset float64, shape ...int) *Tensor {
	t := Zeros64(shape...)
	d := t.Data64()
	for i := range d {
		d[i] = offset + scale*rng.NormFloat64()
	}
	return t
}

func (c convCase) operands(rng *rand.Rand) convOperands {
	geo := c.params().geom(c.h, c.w, c.k, c.k)
	variance := normal64(rng, 0.2, 0, c.cout)
	for i, v := range variance.Data64() {
		variance.Data64()[i] = 0.5 + math.Abs(v)
	}
	return convOperands{
		x:        normal64(rng, 1, 0, c.b, c.cin, c.h, c.w),
		w:        normal64(rng, 1/math.Sqrt(float64(c.cin*c.k*c.k)), 0, c.cout, c.cin, c.k, c.k),
		bias:     normal64(rng, 0.1, 0, c.cout),
		gamma:    normal64(rng, 0.2, 1, c.cout),
		beta:     normal64(rng, 0.1, 0, c.cout),
		mean:     normal64(rng, 0.1, 0, c.cout),
		variance: variance,
		res:      normal64(rng, 1, 0, c.b, c.cout, geo.OutH(), geo.OutW()),
	}
}

func (o convOperands) to32() convOperands {
	f := func(t *Tensor) *Tensor { return t.To32() }
	return convOperands{f(o.x), f(o.w), f(o.bias), f(o.gamma), f(o.beta), f(o.mean), f(o.variance), f(o.res)}
}

// block is ReLU(BN(conv(x) + bias) + res) with the parts chosen: the ops
// a ResNet's layers issue.
func (o convOperands) block(g *Graph, p Conv2dParams, bias, bn, res, relu bool) *Tensor {
	var b *Tensor
	if bias {
		b = o.bias
	}
	y := g.Conv2d(o.x, o.w, b, p)
	if bn {
		y = g.BatchNorm2d(y, o.gamma, o.beta, o.mean, o.variance, 1e-5)
	}
	if res {
		y = g.Add(y, o.res)
	}
	if relu {
		y = g.ReLU(y)
	}
	return y
}

// TestDeferredConv compares the CPU engine's deferred float32 convolution,
// with each combination of bias, batch norm, residual and ReLU absorbed,
// with the same ops in float64 and with the eager float32 ops of a
// recording graph. Tolerance: relative error (max |Δ| / max(1, max |ref|))
// 2e-6; measured on this project's machine at most about 6e-7.
func TestDeferredConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 30))
	const tol = 2e-6
	for _, c := range convCases {
		if testing.Short() && c.b*c.h*c.w > 2000 {
			continue // the large cases (products shared out between goroutines) run without -short
		}
		o64 := c.operands(rng)
		o32 := o64.to32()
		p := c.params()
		worst := 0.0
		for mask := range 16 {
			bias, bn, res, relu := mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0
			want := o64.block(NoGrad(), p, bias, bn, res, relu)
			got := o32.block(NoGrad(), p, bias, bn, res, relu)
			if got.lazy == nil {
				t.Fatalf("%s: the result is not deferred", c.name)
			}
			eager := o32.block(NewGraph(), p, bias, bn, res, relu)
			if eager.lazy != nil {
				t.Fatalf("%s: a recording graph deferred the convolution", c.name)
			}
			if !slices.Equal(got.Shape(), want.Shape()) {
				t.Fatalf("%s: shape %v, want %v", c.name, got.Shape(), want.Shape())
			}
			e, eEager := relErr(got.Float64s(), want.Data64()), relErr(eager.Float64s(), want.Data64())
			if e > tol || eEager > tol {
				t.Errorf("%s bias=%v bn=%v res=%v relu=%v: relative error deferred %.3g, eager %.3g (tolerance %g)", c.name, bias, bn, res, relu, e, eEager, tol)
			}
			worst = max(worst, e)
		}
		t.Logf("%-38s %.2g", c.name, worst)
	}
}

// TestDeferredKeepsUnabsorbed holds a convolution's raw output, and its
// batch norm's, while the batch norm, the residual and the ReLU are
// absorbed into later results, then reads them all, in either order: each
// has the eager ops' values, the raw output too, though nothing was
// absorbed into it.
func TestDeferredKeepsUnabsorbed(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 40))
	c := convCase{"3x3", 2, 9, 7, 12, 20, 3, 1, 1, 1}
	o := c.operands(rng).to32()
	p := c.params()
	eager := func() (raw, norm, out *Tensor) {
		g := NewGraph()
		raw = g.Conv2d(o.x, o.w, nil, p)
		norm = g.BatchNorm2d(raw, o.gamma, o.beta, o.mean, o.variance, 1e-5)
		return raw, norm, g.ReLU(g.Add(norm, o.res))
	}
	wantRaw, wantNorm, wantOut := eager()
	for _, rawFirst := range []bool{false, true} {
		g := NoGrad()
		raw := g.Conv2d(o.x, o.w, nil, p)
		norm := g.BatchNorm2d(raw, o.gamma, o.beta, o.mean, o.variance, 1e-5)
		out := g.ReLU(g.Add(norm, o.res))
		if raw.lazy == nil || norm.lazy == nil || out.lazy == nil || norm.lazy == raw.lazy || out.lazy == norm.lazy {
			t.Fatal("the batch norm, the sum and the ReLU were not absorbed into new deferred results")
		}
		var gotRaw []float64
		if rawFirst {
			gotRaw = raw.Float64s()
		}
		gotOut, gotNorm := out.Float64s(), norm.Float64s()
		if !rawFirst {
			gotRaw = raw.Float64s()
		}
		for _, r := range []struct {
			name      string
			got, want []float64
		}{{"raw", gotRaw, wantRaw.Float64s()}, {"batch norm", gotNorm, wantNorm.Float64s()}, {"block", gotOut, wantOut.Float64s()}} {
			if e := relErr(r.got, r.want); e > 2e-6 {
				t.Errorf("raw first=%v: %s output differs from the eager ops' by %.3g", rawFirst, r.name, e)
			}
		}
		if slices.Equal(gotRaw, gotNorm) || slices.Equal(gotNorm, gotOut) {
			t.Error("an absorbed op changed the values of the result it read")
		}
	}
}

// TestDeferredChain runs two residual blocks of deferred ops, a max pool
// and a downsampling shortcut between them, reads the output, then every
// intermediate result (whose channels-last values went back to the pool
// once read, so they are computed again), and compares each with the
// eager ops, bit for bit with the first read.
func TestDeferredChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 60))
	w := func(cout, cin, k int) *Tensor {
		return normal64(rng, 1/math.Sqrt(float64(cin*k*k)), 0, cout, cin, k, k).To32()
	}
	bn := func(c int) [4]*Tensor {
		v := normal64(rng, 0.2, 0, c)
		for i, x := range v.Data64() {
			v.Data64()[i] = 0.5 + math.Abs(x)
		}
		return [4]*Tensor{normal64(rng, 0.2, 1, c).To32(), normal64(rng, 0.1, 0, c).To32(), normal64(rng, 0.1, 0, c).To32(), v.To32()}
	}
	stem, stemBN := w(8, 3, 3), bn(8)
	c1, bn1, c2, bn2 := w(8, 8, 3), bn(8), w(8, 8, 3), bn(8)
	ds, dsBN, c3, bn3 := w(16, 8, 1), bn(16), w(16, 8, 3), bn(16)
	x := normal64(rng, 1, 0, 2, 3, 15, 13).To32()
	net := func(g *Graph) []*Tensor {
		cbn := func(x, w *Tensor, b [4]*Tensor, stride int) *Tensor {
			return g.BatchNorm2d(g.Conv2d(x, w, nil, ConvSquare(stride, w.Dim(2)/2)), b[0], b[1], b[2], b[3], 1e-5)
		}
		s := g.ReLU(cbn(x, stem, stemBN, 1))
		pool := g.MaxPool2d(s, PoolSquare(3, 2, 1))
		y1 := g.ReLU(cbn(pool, c1, bn1, 1))
		b1 := g.ReLU(g.Add(cbn(y1, c2, bn2, 1), pool))
		id := cbn(b1, ds, dsBN, 2)
		b2 := g.ReLU(g.Add(cbn(b1, c3, bn3, 2), id))
		return []*Tensor{b2, s, pool, y1, b1, id}
	}
	want := net(NewGraph())
	got := net(NoGrad())
	first := got[0].Float64s()
	for i := range got {
		if got[i].lazy == nil {
			t.Errorf("result %d is not deferred", i)
		}
		if e := relErr(got[i].Float64s(), want[i].Float64s()); e > 2e-6 {
			t.Errorf("result %d differs from the eager ops' by %.3g", i, e)
		}
	}
	if !slices.Equal(got[0].Float64s(), first) {
		t.Error("a second read changed the output")
	}
	// Each result read after the others computes the same bits.
	again := net(NoGrad())
	for i := len(again) - 1; i >= 0; i-- {
		if !slices.Equal(again[i].Float64s(), got[i].Float64s()) {
			t.Errorf("result %d read in another order differs", i)
		}
	}
	// A max pool of a tensor that is not deferred runs the plain op.
	if NoGrad().MaxPool2d(x, PoolSquare(3, 2, 1)).lazy != nil {
		t.Error("a max pool of plain values was deferred")
	}
}

// TestDeferredPoolNaN compares a max pool of a deferred convolution with
// the eager one where the convolution's output holds NaN and large values,
// and where the padding borders every window.
func TestDeferredPoolNaN(t *testing.T) {
	w := FromFloat32([]float32{1}, 1, 1, 1, 1)
	x := FromFloat32([]float32{1, float32(math.NaN()), -3, 4, -1e30, 6, 7, -8, 9, 10, 11, -12}, 2, 1, 2, 3)
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(u, v float64) bool { return u == v || math.IsNaN(u) && math.IsNaN(v) })
	}
	for _, p := range []Pool2dParams{PoolSquare(3, 2, 1), PoolSquare(2, 1, 1), PoolSquare(2, 0, 0)} {
		ng, rg := NoGrad(), NewGraph()
		got := ng.MaxPool2d(ng.Conv2d(x, w, nil, Conv2dParams{}), p)
		want := rg.MaxPool2d(rg.Conv2d(x, w, nil, Conv2dParams{}), p)
		if got.lazy == nil || !slices.Equal(got.Shape(), want.Shape()) || !same(got.Float64s(), want.Float64s()) {
			t.Errorf("%+v: %v %v, want %v %v", p, got.Shape(), got.Float64s(), want.Shape(), want.Float64s())
		}
	}
}

// TestDeferredNotEverywhere checks that the ops run as before where the
// engine defers nothing: on a recording graph, a graph with an arena, in
// float64, on the test device; and that a sum or ReLU that cannot be
// absorbed runs on the computed values.
func TestDeferredNotEverywhere(t *testing.T) {
	dev := testDevice(t)
	rng := rand.New(rand.NewPCG(7, 70))
	c := convCase{"1x1", 1, 4, 4, 3, 5, 1, 1, 0, 1}
	o := c.operands(rng)
	ga := NoGrad()
	ga.SetArena(NewArena())
	x32, w32 := o.x.To32(), o.w.To32()
	for name, y := range map[string]*Tensor{
		"recording": NewGraph().Conv2d(x32, w32, nil, Conv2dParams{}),
		"arena":     ga.Conv2d(x32, w32, nil, Conv2dParams{}),
		"float64":   NoGrad().Conv2d(o.x, o.w, nil, Conv2dParams{}),
		"device":    NoGrad().Conv2d(x32.To(dev), w32.To(dev), nil, Conv2dParams{}),
	} {
		if y.lazy != nil {
			t.Errorf("%s: the convolution was deferred", name)
		}
	}
	g := NoGrad()
	y := g.Conv2d(x32, w32, nil, Conv2dParams{})
	want := NewGraph().Conv2d(x32, w32, nil, Conv2dParams{}).Float64s()
	twice := g.Add(y, y) // not a residual of its own
	if twice.lazy != nil {
		t.Error("x + x was absorbed")
	}
	if g.ReLU(y).lazy != nil {
		t.Error("the ReLU of a convolution already read was absorbed")
	}
	bcast := g.Add(y, g.Reshape(o.bias.To32(), 5, 1, 1)) // broadcast: not a residual
	if bcast.lazy != nil {
		t.Error("a broadcast sum was absorbed")
	}
	relu1 := g.ReLU(g.Conv2d(x32, w32, nil, Conv2dParams{}))
	relu2 := g.ReLU(relu1)
	if relu1.lazy == nil || relu2.lazy != nil {
		t.Error("ReLU of ReLU: the first is absorbed, the second runs")
	}
	for i, v := range want {
		if got := twice.Float64s()[i]; math.Abs(got-2*v) > 1e-5 {
			t.Fatalf("x + x [%d] = %v, want %v", i, got, 2*v)
		}
		if got := relu2.Float64s()[i]; math.Abs(got-math.Max(v, 0)) > 1e-5 {
			t.Fatalf("ReLU(ReLU(x)) [%d] = %v, want %v", i, got, math.Max(v, 0))
		}
	}
}

// TestDeferredWeightsChange changes, between forwards, every tensor the
// prepared weight was made from, through each way the package writes
// tensors in place, and requires each forward to follow: the engine
// never serves a stale preparation.
func TestDeferredWeightsChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 80))
	c := convCase{"3x3", 1, 6, 6, 4, 4, 3, 1, 1, 1}
	o := c.operands(rng).to32()
	p := c.params()
	check := func(what string) {
		t.Helper()
		got := o.block(NoGrad(), p, true, true, false, false).Float64s()
		want := o.block(NewGraph(), p, true, true, false, false).Float64s()
		if e := relErr(got, want); e > 2e-6 {
			t.Errorf("after %s: differs from the eager ops by %.3g", what, e)
		}
	}
	check("the first forward")
	if o.w.prep.Load() == nil {
		t.Fatal("the weight was not prepared")
	}
	prep := o.w.prep.Load()
	check("a second forward")
	if o.w.prep.Load() != prep {
		t.Error("an unchanged weight was prepared again")
	}
	o.w.CopyFrom(normal64(rng, 0.3, 0, 4, 4, 3, 3).To32())
	check("CopyFrom of the weight")
	o.bias.Data()[1] = 5
	check("a write through Data of the bias")
	Fill(o.gamma, 2)
	check("Fill of the batch norm's weight")
	o.beta.ScaleInPlace(-3)
	check("ScaleInPlace of the batch norm's bias")
	o.mean.ClampInPlace(0.01)
	check("ClampInPlace of the running mean")
	grad := Zeros(4)
	Fill(grad, 1)
	o.variance.AdamUpdate(grad, Zeros(4), Zeros(4), nil, AdamConsts{Beta1: 0.9, Beta2: 0.999, OneMinusB1: 0.1, OneMinusB2: 0.001, BC2Sqrt: 1, Eps: 1e-8, NegStepLen: 0.1})
	check("AdamUpdate of the running variance")
	if err := LoadParams(&Linear{Weight: o.w}, MapSource{"weight": normal64(rng, 0.3, 0, 4, 4, 3, 3).To32()}, ""); err != nil {
		t.Fatal(err)
	}
	check("LoadParams of the weight")
	// Another batch norm on the same weight is another preparation.
	other := o
	other.gamma = normal64(rng, 0.2, 1, 4).To32()
	got := other.block(NoGrad(), p, true, true, false, false).Float64s()
	if e := relErr(got, other.block(NewGraph(), p, true, true, false, false).Float64s()); e > 2e-6 {
		t.Errorf("another batch norm: differs from the eager ops by %.3g", e)
	}
	check("going back to the first batch norm")
}

// TestDeferredConcurrent runs the same deferred network from many
// goroutines at once, on shared weights prepared during the first
// forwards (under -race, this checks the engine's shared state), and
// reads one deferred result from many goroutines.
func TestDeferredConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 90))
	c := convCase{"3x3", 2, 8, 8, 6, 6, 3, 1, 1, 1}
	o := c.operands(rng).to32()
	p := c.params()
	want := o.block(NewGraph(), p, true, true, true, true).Float64s()
	var wg sync.WaitGroup
	errs := make([]float64, 8)
	for i := range errs {
		wg.Go(func() {
			for range 3 {
				errs[i] = max(errs[i], relErr(o.block(NoGrad(), p, true, true, true, true).Float64s(), want))
			}
		})
	}
	wg.Wait()
	shared := o.block(NoGrad(), p, true, true, true, true)
	reads := make([][]float64, 8)
	for i := range reads {
		wg.Go(func() { reads[i] = shared.Float64s() })
	}
	wg.Wait()
	for i, e := range errs {
		if e > 2e-6 {
			t.Errorf("goroutine %d: differs from the eager ops by %.3g", i, e)
		}
		if !slices.Equal(reads[i], reads[0]) {
			t.Errorf("concurrent read %d differs", i)
		}
	}
}

// TestDeferredEmpty runs a batch of no images.
func TestDeferredEmpty(t *testing.T) {
	g := NoGrad()
	y := g.ReLU(g.Conv2d(Zeros(0, 3, 4, 4), Zeros(4, 3, 3, 3), Zeros(4), ConvSquare(1, 1)))
	if y.lazy == nil || !slices.Equal(y.Shape(), []int{0, 4, 4, 4}) || len(y.Data()) != 0 {
		t.Errorf("got %v, %d values", y.Shape(), len(y.Data()))
	}
	if z := g.MaxPool2d(g.Conv2d(Zeros(0, 3, 4, 4), Zeros(4, 3, 1, 1), nil, Conv2dParams{}), PoolSquare(2, 2, 0)); len(z.Data()) != 0 {
		t.Errorf("max pool: %d values", len(z.Data()))
	}
}

// TestScratchBuffers checks the size classes of the package's temporaries:
// each buffer has the length asked for, a capacity of the next power of
// two, and comes back for a request of its class; a buffer given back
// with another capacity goes to the class it covers whole.
func TestScratchBuffers(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 1000, 1024, 1025, 3 << 20} {
		b := scratch[float32](n)
		c := cap(b)
		if len(b) != n || c < max(n, 1) || c&(c-1) != 0 || c >= 2*max(n, 1) {
			t.Errorf("scratch(%d): len %d cap %d", n, len(b), c)
		}
		release(b)
	}
	if sizeClass(1) != 0 || sizeClass(2) != 1 || sizeClass(3) != 2 || sizeClass(1024) != 10 || sizeClass(1025) != 11 {
		t.Error("sizeClass")
	}
	release(make([]float64, 1000)) // class 9 (at least 512), not 10
	if b := scratch[float64](1024); cap(b) < 1024 {
		t.Fatalf("scratch(1024) of capacity %d", cap(b))
	}
}
