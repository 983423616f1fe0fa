package vision

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
)

// TestTrainModeOnDevice runs a small ResNet's trunk in training mode (batch
// statistics folded into the running ones) twice on the test device (the
// reference engine when that is the CPU) and on the CPU: outputs, running
// statistics and weight gradients agree to 1e-5 relative to each tensor's
// largest magnitude. The batch (4 films of 64×64) leaves layer4 16 values per
// channel for its statistics; with fewer, batch norm's division by a
// small-sample deviation amplifies the engines' different summation orders
// beyond that bound.
func TestTrainModeOnDevice(t *testing.T) {
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	cfg := ResNetConfig{Block: BasicBlock, Layers: [4]int{1, 1, 1, 1}}
	cpu, err := NewResNet(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	onDev, err := NewResNet(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.ToDevice(onDev, dev); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	x := radgen.Zeros(4, 3, 64, 64)
	for i := range x.Data() {
		x.Data()[i] = float32(r.NormFloat64())
	}
	worst := 0.0
	compare := func(what string, got, want *radgen.Tensor) {
		t.Helper()
		g, w := got.To(radgen.CPU).Data(), want.Data()
		scale := 1e-30
		for _, v := range w {
			scale = max(scale, math.Abs(float64(v)))
		}
		for i := range w {
			d := math.Abs(float64(g[i])-float64(w[i])) / scale
			worst = max(worst, d)
			if d > 1e-5 {
				t.Errorf("%s[%d] = %v on %v, %v on the CPU", what, i, g[i], dev, w[i])
				return
			}
		}
	}
	for pass := range 2 {
		gc, gd := radgen.NewGraph(radgen.Train(9)), radgen.NewGraph(radgen.Train(9))
		yc, yd := cpu.Trunk(gc, x), onDev.Trunk(gd, x.To(dev))
		compare("output", yd, yc)
		if pass == 1 {
			if err := gc.Backward(gc.Sum(yc)); err != nil {
				t.Fatal(err)
			}
			if err := gd.Backward(gd.Sum(yd)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := radgen.StateDict(cpu, "")
	n := 0
	onDev.VisitParams(func(name string, p *radgen.Tensor) {
		n++
		if p.Device() != dev {
			t.Errorf("%s on %v", name, p.Device())
			return
		}
		compare(name, p, want[name])
		if gw := want[name].Grad(); gw != nil {
			if p.Grad() == nil {
				t.Errorf("%s has no gradient on %v", name, dev)
				return
			}
			compare(name+" gradient", p.Grad(), gw)
		}
	})
	t.Logf("%v against the CPU in training mode: %d tensors, largest difference %.2g of the tensor's scale", dev, n, worst)
}
