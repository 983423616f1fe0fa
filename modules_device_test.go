package radgen_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/mesh"
	"github.com/radgen/radgen/relmem"
	"github.com/radgen/radgen/vision"
)

// moduleDevice is the device of the module tests: RADGEN_DEVICE, or the
// reference engine when that is cpu.
func moduleDevice(t *testing.T) radgen.Device {
	t.Helper()
	d, err := testdevice.Compared(t)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func randTensor(r *rand.Rand, shape ...int) *radgen.Tensor {
	x := radgen.Zeros(shape...)
	radgen.Uniform(x, r, 1)
	return x
}

func maxRel(got, want []float64) float64 {
	scale, worst := 1.0, 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range want {
		worst = math.Max(worst, math.Abs(got[i]-want[i]))
		if math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			return math.Inf(1)
		}
	}
	return worst / scale
}

// moduleTol bounds the relative error of a module on a device against the
// CPU. The device path sums some reductions in another order than the CPU's
// fused kernels (a convolution's weight gradient image by image rather than
// over a group of images side by side), so deep networks differ by a few
// ulps more than single ops.
var moduleTol = 1e-6

// compareModule runs forward (a scalar loss from f) and backward with m on
// the CPU and then, moved, on dev, and compares the loss, the inputs'
// gradients and every parameter's gradient.
func compareModule(t *testing.T, name string, dev radgen.Device, m radgen.Module, inputs []*radgen.Tensor,
	f func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor, opts ...radgen.GraphOption) {
	t.Helper()
	run := func() (loss []float64, grads [][]float64) {
		d := radgen.Params(m)[0].Tensor.Device()
		in := make([]*radgen.Tensor, len(inputs))
		for i, x := range inputs {
			in[i] = x.Clone().SetRequiresGrad(true).To(d)
		}
		if opts == nil {
			opts = []radgen.GraphOption{radgen.Train(9)}
		}
		g := radgen.NewGraph(opts...)
		l := f(g, in)
		if err := g.Backward(l); err != nil {
			t.Fatalf("%s on %v: %v", name, d, err)
		}
		for _, x := range in {
			grads = append(grads, x.Grad().Float64s())
		}
		for _, p := range radgen.Trainable(m) {
			if p.Tensor.Grad() == nil {
				grads = append(grads, nil)
				continue
			}
			grads = append(grads, p.Tensor.Grad().Float64s())
			p.Tensor.ZeroGrad()
		}
		return l.Float64s(), grads
	}
	wantLoss, wantGrads := run()
	if err := radgen.ToDevice(m, dev); err != nil {
		t.Fatal(err)
	}
	gotLoss, gotGrads := run()
	worst := maxRel(gotLoss, wantLoss)
	for i := range wantGrads {
		if (wantGrads[i] == nil) != (gotGrads[i] == nil) {
			t.Fatalf("%s: gradient %d present on one device only", name, i)
		}
		worst = math.Max(worst, maxRel(gotGrads[i], wantGrads[i]))
	}
	t.Logf("%s on %v: loss %.6g vs %.6g, max relative error (loss and %d gradients) %.2g", name, dev, gotLoss[0], wantLoss[0], len(wantGrads), worst)
	if worst > moduleTol {
		t.Errorf("%s on %v: max relative error %.3g (tolerance %g)", name, dev, worst, moduleTol)
	}
}

// TestModulesOnDevice runs R2Gen's memory modules forward and backward on
// the test device against the CPU.
func TestModulesOnDevice(t *testing.T) {
	dev := moduleDevice(t)
	r := rand.New(rand.NewPCG(11, 12))

	rm := relmem.New(3, 8, 2, 0.1, r)
	mem0 := rm.InitMemory(2)
	compareModule(t, "relmem.Relational (3 steps, dropout)", dev, rm, []*radgen.Tensor{randTensor(r, 2, 3, 8)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
			return g.Sum(g.Tanh(rm.Forward(g, in[0], mem0.To(in[0].Device()))))
		})

	cn := mcln.NewConditional(8, 24, r)
	compareModule(t, "mcln.Conditional", dev, cn, []*radgen.Tensor{randTensor(r, 2, 3, 8), randTensor(r, 2, 3, 24)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
			return g.Sum(g.Sigmoid(cn.Forward(g, in[0], in[1])))
		})

	// mesh: attention with a key mask (one padded key per study), memory
	// attention and the multi-view router; M²'s feed-forward block.
	mask := radgen.FromFloat32([]float32{0, 0, 0, 1, 0, 0, 0, 0}, 2, 1, 4)
	mha := mesh.NewMultiHeadAttention(8, 2, 0.1, r)
	compareModule(t, "mesh.MultiHeadAttention (dropout)", dev, mha, []*radgen.Tensor{randTensor(r, 2, 3, 8), randTensor(r, 2, 4, 8)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
			return g.Sum(g.Tanh(mha.Forward(g, in[0], in[1], in[1], mask.To(in[0].Device()))))
		})
	ma := mesh.NewMemoryAttention(8, 4, 4, 2, 5, r)
	compareModule(t, "mesh memory attention", dev, ma, []*radgen.Tensor{randTensor(r, 2, 4, 8)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
			m4 := radgen.FromFloat32([]float32{0, 0, 0, 1, 0, 0, 0, 0}, 2, 1, 1, 4)
			return g.Sum(g.Tanh(ma.Forward(g, in[0], in[0], in[0], m4.To(in[0].Device()))))
		})
	ff := m2.NewPositionWiseFeedForward(8, 16, 0.1, r)
	compareModule(t, "m2.PositionWiseFeedForward (dropout)", dev, ff, []*radgen.Tensor{randTensor(r, 2, 3, 8)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor { return g.Sum(g.Tanh(ff.Forward(g, in[0]))) })
	for _, routing := range []mesh.Routing{mesh.RoutingFMA, mesh.RoutingAMA} {
		mv := mesh.NewMultiView(routing, 0, 2, 8, r)
		compareModule(t, "mesh.MultiView "+string(routing), dev, mv, []*radgen.Tensor{randTensor(r, 2, 3, 8), randTensor(r, 2, 3, 8)},
			func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
				return g.Sum(g.Tanh(mv.Forward(g, in)))
			})
	}
}

// TestExtractorOnDevice runs a ResNet-18 extractor (the visual extractor's
// code path: convolutions, batch norm, pooling) forward and backward on the
// test device against the CPU, in evaluation mode (running statistics;
// vision's training mode copies the new running statistics on the host).
func TestExtractorOnDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("a ResNet-18 forward and backward pass on two devices")
	}
	dev := moduleDevice(t)
	r := rand.New(rand.NewPCG(31, 32))
	defer func(tol float64) { moduleTol = tol }(moduleTol)
	moduleTol = 2e-6 // 19 layers of reductions in another order (6e-7 measured)
	ex, err := vision.NewExtractor(vision.ResNet18, r)
	if err != nil {
		t.Fatal(err)
	}
	compareModule(t, "vision.Extractor ResNet-18", dev, ex, []*radgen.Tensor{randTensor(r, 2, 3, 64, 64)},
		func(g *radgen.Graph, in []*radgen.Tensor) *radgen.Tensor {
			patches, avg := ex.Forward(g, in[0])
			return g.Add(g.Sum(g.Tanh(patches)), g.Sum(g.Sigmoid(avg)))
		}, radgen.GraphOption(func(*radgen.Graph) {}))
}
