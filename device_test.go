package radgen

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/radgen/radgen/internal/testutil"
)

// testDevice returns the device RADGEN_DEVICE names, failing the test when
// it cannot be used. With the default (cpu) the device tests run on the
// reference engine, which needs no hardware, so that every run covers the
// device path.
func testDevice(t *testing.T) Device {
	t.Helper()
	name := testutil.DeviceName(t)
	d, err := ParseDevice(name)
	if err != nil {
		t.Fatal(err)
	}
	if d == CPU {
		d = Reference()
		t.Logf("device tests run on %v (RADGEN_DEVICE is cpu)", d)
	}
	if err := d.Check(); err != nil {
		t.Fatalf("RADGEN_DEVICE=%s: %v", name, err)
	}
	return d
}

func TestParseDevice(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Device
		str  string
	}{
		{"cpu", CPU, "cpu"}, {" CPU ", CPU, "cpu"}, {"reference", Reference(), "reference"},
		{"cuda", CUDA(0), "cuda:0"}, {"cuda:0", CUDA(0), "cuda:0"}, {"cuda:3", CUDA(3), "cuda:3"},
		{"cuda:65535", CUDA(65535), "cuda:65535"},
	} {
		d, err := ParseDevice(c.in)
		if err != nil || d != c.want || d.String() != c.str {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v", c.in, d, err, c.str)
		}
	}
	for _, bad := range []string{"", "gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:65536", "cuda:x", "reference:1", "cpu:0"} {
		if d, err := ParseDevice(bad); err == nil {
			t.Errorf("ParseDevice(%q) = %v, want an error", bad, d)
		}
	}
	if CUDA(2).Ordinal() != 2 || Reference().IsCPU() || !CPU.IsCPU() || CUDA(0) == Reference() {
		t.Error("device identity")
	}
}

func TestCUDAWithoutGPU(t *testing.T) {
	// In a build without the cuda tag (or without a GPU) CUDA devices are
	// refused with an error, never a panic or an exit.
	if err := CUDA(0).Check(); err == nil {
		t.Skip("a CUDA device is present")
	} else {
		t.Logf("cuda:0: %v", err)
		if err := ToDevice(NewLinear(2, 2, true, rand.New(rand.NewPCG(1, 1))), CUDA(0)); err == nil {
			t.Error("ToDevice(cuda:0) succeeded without a GPU")
		}
	}
}

// relErr returns max |got − want| / max(1, max |want|) over the elements.
func relErr(got, want []float64) float64 {
	var scale, worst float64 = 1, 0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range want {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	return worst / scale
}

// TestDeviceOps runs every gradient-checked op forward and backward on the
// test device and on the CPU from the same float32 inputs, and compares the
// outputs, the loss and every gradient. The CPU gradients are the ones
// TestGradients checks by finite differences.
func TestDeviceOps(t *testing.T) {
	dev := testDevice(t)
	const tol = 1e-6
	for _, c := range gradCases(rand.New(rand.NewPCG(1, 2))) {
		run := func(d Device) (out, loss *Tensor, grads []*Tensor) {
			in := make([]*Tensor, len(c.in))
			for i, x := range c.in {
				in[i] = x.To32().SetRequiresGrad(true).To(d)
			}
			g := NewGraph()
			out = c.f(g, in)
			if out.Device() != d {
				t.Fatalf("%s: output on %v, want %v", c.name, out.Device(), d)
			}
			w := Zeros(out.shape...)
			wr := rand.New(rand.NewPCG(7, 7))
			for i := range w.Data() {
				w.Data()[i] = float32(2*wr.Float64() - 1)
			}
			loss = g.Sum(g.Mul(out, w.To(d)))
			if err := g.Backward(loss); err != nil {
				t.Fatalf("%s on %v: %v", c.name, d, err)
			}
			for _, x := range in {
				if x.Grad() == nil {
					t.Fatalf("%s on %v: no gradient", c.name, d)
				}
				if x.Grad().Device() != d {
					t.Fatalf("%s: gradient on %v, want %v", c.name, x.Grad().Device(), d)
				}
				grads = append(grads, x.Grad())
			}
			return out, loss, grads
		}
		wantOut, wantLoss, wantGrads := run(CPU)
		gotOut, gotLoss, gotGrads := run(dev)
		e := relErr(gotOut.Float64s(), wantOut.Float64s())
		if l := relErr(gotLoss.Float64s(), wantLoss.Float64s()); l > e {
			e = l
		}
		eg := 0.0
		for i := range wantGrads {
			eg = math.Max(eg, relErr(gotGrads[i].Float64s(), wantGrads[i].Float64s()))
		}
		t.Logf("%-28s on %v: forward %.2g, gradients %.2g", c.name, dev, e, eg)
		if e > tol || eg > tol {
			t.Errorf("%s on %v: relative error forward %.3g, gradients %.3g (tolerance %g)", c.name, dev, e, eg, tol)
		}
	}
}

func expectPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want %q", want)
		}
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("panic %v, want %q", r, want)
		}
	}()
	f()
}

func TestMixedDevicesPanic(t *testing.T) {
	dev := testDevice(t)
	a, b := Zeros(2, 3), Zeros(2, 3).To(dev)
	want := "radgen: Add: operands on cpu and " + dev.String()
	expectPanic(t, want, func() { NoGrad().Add(a, b) })
	expectPanic(t, "radgen: MatMul: operands on "+dev.String()+" and cpu", func() { NoGrad().MatMul(b, Zeros(3, 2), false) })
	expectPanic(t, "radgen: Linear: operands on cpu and "+dev.String(), func() { NoGrad().Linear(a, Zeros(4, 3), Zeros(4).To(dev)) })
	expectPanic(t, "radgen: Conv2d: operands on "+dev.String()+" and cpu", func() {
		NoGrad().Conv2d(Zeros(1, 1, 3, 3).To(dev), Zeros(1, 1, 1, 1), nil, ConvSquare(1, 0))
	})
	expectPanic(t, "radgen: host access to a tensor on "+dev.String(), func() { _ = b.Data() })
	expectPanic(t, "float32 only", func() { Zeros64(2).To(dev) })
}

func TestToAndBack(t *testing.T) {
	dev := testDevice(t)
	x := FromFloat32([]float32{1, -2, 3.5, 4, 5, 6}, 2, 3)
	d := x.To(dev)
	if d.Device() != dev || x.To(CPU) != x || d.To(dev) != d {
		t.Fatalf("devices %v, %v", d.Device(), x.Device())
	}
	if d.Dense().IsNativelyAccessible() {
		t.Error("a device dense claims Go memory")
	}
	if got := d.At(1, 0); got != 4 {
		t.Errorf("At(1, 0) = %v on %v", got, dev)
	}
	back := d.To(CPU)
	for i, v := range x.Data() {
		if back.Data()[i] != v {
			t.Fatalf("round trip %v, want %v", back.Data(), x.Data())
		}
	}
	// A device tensor's Dense goes back through FromDense, as a copy.
	f, err := FromDense(d.Dense())
	if err != nil {
		t.Fatal(err)
	}
	if f.Device() != dev || f.Clone().To(CPU).Data()[2] != 3.5 {
		t.Errorf("FromDense of a device dense: %v", f)
	}
	// Memory no radgen engine knows is refused.
	foreign := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2), tensor.WithEngine(noEngine{}))
	if _, err := FromDense(foreign); err == nil {
		t.Error("FromDense accepted memory of an unknown engine")
	}
}

// noEngine is a gorgonia engine whose memory is not Go's and not radgen's.
type noEngine struct{ tensor.StdEng }

func (noEngine) AllocAccessible() bool { return false }

func TestToDeviceModule(t *testing.T) {
	dev := testDevice(t)
	r := rand.New(rand.NewPCG(3, 4))
	cpu, moved := NewLinear(4, 3, true, r), NewLinear(4, 3, true, r)
	if err := LoadParams(moved, StateDict(cpu, ""), ""); err != nil {
		t.Fatal(err)
	}
	w := moved.Weight
	if err := ToDevice(moved, dev); err != nil {
		t.Fatal(err)
	}
	if moved.Weight != w || w.Device() != dev || !w.RequiresGrad() || moved.Bias.Device() != dev {
		t.Fatalf("after ToDevice: weight %v (same tensor %v)", w, moved.Weight == w)
	}
	x := FromFloat32([]float32{1, 2, 3, 4, -1, 0, 1, 2}, 2, 4)
	want := cpu.Forward(NewGraph(), x).Data() // the CPU's GEMM, not a deferred product
	got := moved.Forward(NoGrad(), x.To(dev)).To(CPU).Data()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Linear on %v = %v, on the CPU %v", dev, got, want)
		}
	}
	// A state dict of a device module reads its values back (checkpoints).
	data, _, err := StateDict(moved, "").Float32("weight")
	if err != nil || data[0] != cpu.Weight.Data()[0] {
		t.Fatalf("state dict of a module on %v: %v, %v", dev, data[:1], err)
	}
	if err := ToDevice(moved, CPU); err != nil || moved.Weight.Device() != CPU || moved.Weight.Data()[1] != cpu.Weight.Data()[1] {
		t.Fatalf("back to the CPU: %v", err)
	}
	p64 := NewLinear(2, 2, false, r)
	Promote64(p64)
	if err := ToDevice(p64, dev); err == nil || p64.Weight.Device() != CPU {
		t.Errorf("ToDevice of a float64 module: %v", err)
	}
}

// TestDeviceMemoryIsFreed trains a small layer for many steps and checks
// that the engine's live bytes return to where they were: every
// intermediate, gradient and mask is freed once unreachable.
func TestDeviceMemoryIsFreed(t *testing.T) {
	dev := testDevice(t)
	settle := func() int64 {
		var prev int64 = -1
		for i := 0; i < 50; i++ {
			runtime.GC()
			n := liveBytes(dev)
			if n == prev {
				return n
			}
			prev = n
			runtime.Gosched()
		}
		return prev
	}
	r := rand.New(rand.NewPCG(5, 6))
	l := NewLinear(16, 8, true, r)
	if err := ToDevice(l, dev); err != nil {
		t.Fatal(err)
	}
	x := Zeros(4, 16)
	Uniform(x, r, 1)
	xd := x.To(dev)
	step := func(i int) {
		g := NewGraph(Train(uint64(i)))
		y := g.Dropout(g.ReLU(l.Forward(g, xd)), 0.1)
		if err := g.Backward(g.Sum(g.Softmax(y))); err != nil {
			t.Fatal(err)
		}
		l.Weight.ZeroGrad()
		l.Bias.ZeroGrad()
	}
	step(0)
	base := settle()
	for i := 1; i <= 200; i++ {
		step(i)
	}
	after := settle()
	runtime.KeepAlive(l)
	runtime.KeepAlive(xd)
	t.Logf("%v live bytes: %d after the first step, %d after 200 more", dev, base, after)
	if want := int64(4 * (8*16 + 8 + 4*16)); base != want || after != base {
		t.Errorf("live bytes %d after the first step and %d after 200 more; want %d (the layer and its input)", base, after, want)
	}
}

func TestDeviceBatchNormRunningStats(t *testing.T) {
	dev := testDevice(t)
	r := rand.New(rand.NewPCG(8, 9))
	x := Zeros(4, 3, 2, 2)
	Uniform(x, r, 2)
	rm, rv := FromFloat32([]float32{0.1, -0.2, 0.3}, 3), FromFloat32([]float32{1, 2, 0.5}, 3)
	_, wm, wv := NoGrad().BatchNorm2dTrain(x, nil, nil, rm, rv, 1e-5, 0.1)
	_, gm, gv := NoGrad().BatchNorm2dTrain(x.To(dev), nil, nil, rm.To(dev), rv.To(dev), 1e-5, 0.1)
	if gm.Device() != dev || gv.Device() != dev {
		t.Fatalf("running statistics on %v and %v", gm.Device(), gv.Device())
	}
	if e := math.Max(relErr(gm.Float64s(), wm.Float64s()), relErr(gv.Float64s(), wv.Float64s())); e > 1e-6 {
		t.Errorf("running statistics on %v differ by %.3g", dev, e)
	}
}

func TestPromote64FromDevice(t *testing.T) {
	dev := testDevice(t)
	l := NewLinear(3, 2, true, rand.New(rand.NewPCG(1, 2)))
	want := l.Weight.Float64s()
	if err := ToDevice(l, dev); err != nil {
		t.Fatal(err)
	}
	Promote64(l)
	if l.Weight.Device() != CPU || !l.Weight.Is64() || l.Weight.Data64()[4] != want[4] {
		t.Fatalf("Promote64 of a module on %v: %v", dev, l.Weight)
	}
}

// TestDeviceConcurrentInference runs one module's forward pass on the test
// device from several goroutines at once (a loaded model is shared by
// concurrent requests); run it with -race.
func TestDeviceConcurrentInference(t *testing.T) {
	dev := testDevice(t)
	r := rand.New(rand.NewPCG(21, 22))
	l := NewLinear(6, 5, true, r)
	x := Zeros(3, 6)
	Uniform(x, r, 1)
	g := NewGraph() // the CPU's GEMM, not a deferred product
	want := g.Softmax(l.Forward(g, x)).Data()
	if err := ToDevice(l, dev); err != nil {
		t.Fatal(err)
	}
	xd := x.To(dev)
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			g := NoGrad() // a graph per goroutine, the parameters shared
			for range 20 {
				got := g.Softmax(l.Forward(g, xd)).To(CPU).Data()
				for i := range want {
					if got[i] != want[i] {
						errs <- "concurrent forward differs from the CPU"
						return
					}
				}
			}
			errs <- ""
		}()
	}
	for range 8 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

// TestDeviceEmptyTensors: tensors with no elements move, compute and get
// (empty) gradients on a device as on the CPU.
func TestDeviceEmptyTensors(t *testing.T) {
	dev := testDevice(t)
	for _, s := range [][]int{{0, 5}, {}, {3, 0, 2}} {
		x := Zeros(s...).SetRequiresGrad(true).To(dev)
		g := NewGraph()
		y := g.Sum(g.Sigmoid(g.Tanh(g.Add(x, x))))
		if err := g.Backward(y); err != nil {
			t.Fatal(err)
		}
		if x.Grad() == nil || x.Grad().Len() != x.Len() || x.Grad().Device() != dev {
			t.Fatalf("shape %v on %v: gradient %v", s, dev, x.Grad())
		}
		want := 0.0
		if len(s) == 0 {
			want = 0.5 // σ(tanh(0))
		}
		if got := y.To(CPU).Data()[0]; float64(got) != want {
			t.Errorf("shape %v on %v: sum %v, want %v", s, dev, got, want)
		}
	}
}
