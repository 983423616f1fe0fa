package optim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
)

// testDevice returns the device of RADGEN_DEVICE, the reference engine when
// that is the CPU (these tests compare a device against the CPU).
func testDevice(t *testing.T) radgen.Device {
	t.Helper()
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	return dev
}

// TestAdamOnDeviceMatchesCPU runs Adam (plain, AMSGrad, AdamW), with
// clipping by value and by norm, on the test device and on the CPU from the
// same values and gradients: parameters, moments and norms agree bit for bit.
func TestAdamOnDeviceMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	sizes := []int{2*chunk + 17, 3, 1000}
	for _, tc := range []struct {
		name           string
		ams, decoupled bool
		clipValue      float64
		clipNorm       float64
	}{
		{"adam", false, false, 0, 0},
		{"amsgrad+clip value", true, false, 0.1, 0},
		{"adamw+clip norm", false, true, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var cpu, onDev []radgen.Named
			for i, n := range sizes {
				v := make([]float32, n)
				for j := range v {
					v[j] = float32(r.NormFloat64())
				}
				p := param(fmt.Sprintf("p%d", i), v, nil)
				cpu = append(cpu, p)
				onDev = append(onDev, radgen.Named{Name: p.Name, Tensor: p.Tensor.To(dev)})
			}
			opts := []AdamOption{WithAMSGrad(tc.ams), WithDecoupledWeightDecay(tc.decoupled)}
			ac := newAdam(t, []Group{{Params: cpu[:1], LR: 1e-3, WeightDecay: 1e-2}, {Params: cpu[1:], LR: 5e-4, WeightDecay: 0}}, opts...)
			ad := newAdam(t, []Group{{Params: onDev[:1], LR: 1e-3, WeightDecay: 1e-2}, {Params: onDev[1:], LR: 5e-4, WeightDecay: 0}}, opts...)
			for step := range 4 {
				for i := range cpu {
					if step == 2 && i == 1 {
						continue // a parameter without a gradient is skipped
					}
					g := make([]float32, cpu[i].Tensor.Len())
					for j := range g {
						g[j] = float32(0.3 * r.NormFloat64())
					}
					setGrad(cpu[i], g...)
					onDev[i].Tensor.SetGrad(radgen.FromFloat32(g, len(g)).To(dev))
				}
				if tc.clipValue > 0 {
					ClipGradValue(cpu, tc.clipValue)
					ClipGradValue(onDev, tc.clipValue)
				}
				if tc.clipNorm > 0 {
					nc, err1 := ClipGradNorm(cpu, tc.clipNorm, 2)
					nd, err2 := ClipGradNorm(onDev, tc.clipNorm, 2)
					if err1 != nil || err2 != nil || nc != nd {
						t.Fatalf("step %d: norm %v (%v) on the CPU, %v (%v) on %v", step, nc, err1, nd, err2, dev)
					}
				}
				ac.Step()
				ad.Step()
				ac.ZeroGrad()
				ad.ZeroGrad()
			}
			for i := range cpu {
				if got, want := onDev[i].Tensor.To(radgen.CPU).Data(), cpu[i].Tensor.Data(); !slices.Equal(got, want) {
					t.Errorf("parameter %d differs between %v and the CPU", i, dev)
				}
			}
			sc, sd := ac.State(), ad.State()
			for gi := range sc.Groups {
				for pi, pc := range sc.Groups[gi].Params {
					pd := sd.Groups[gi].Params[pi]
					if pc.Step != pd.Step || !slices.Equal(pc.ExpAvg, pd.ExpAvg) || !slices.Equal(pc.ExpAvgSq, pd.ExpAvgSq) || !slices.Equal(pc.MaxExpAvgSq, pd.MaxExpAvgSq) {
						t.Errorf("state of %s differs between %v and the CPU", pc.Name, dev)
					}
				}
			}
			// A state saved on the CPU continues on the device.
			if err := ad.SetState(sc); err != nil {
				t.Fatal(err)
			}
			for i := range cpu {
				g := make([]float32, cpu[i].Tensor.Len())
				for j := range g {
					g[j] = float32(0.3 * r.NormFloat64())
				}
				setGrad(cpu[i], g...)
				onDev[i].Tensor.SetGrad(radgen.FromFloat32(g, len(g)).To(dev))
			}
			ac.Step()
			ad.Step()
			for i := range cpu {
				if got, want := onDev[i].Tensor.To(radgen.CPU).Data(), cpu[i].Tensor.Data(); !slices.Equal(got, want) {
					t.Errorf("after SetState, parameter %d differs between %v and the CPU", i, dev)
				}
			}
		})
	}
}
