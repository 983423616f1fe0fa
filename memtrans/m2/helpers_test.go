package m2

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testdevice"
)

// The helpers of the tests of M²'s blocks (package m2; the tests of the
// whole model are in package m2_test).

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

// randomizeVectors draws every one-dimensional parameter of m (biases,
// norm gains and offsets) from U(−0.3, 0.3), so that no term is trivially
// neutral.
func randomizeVectors(m radgen.Module, rng *rand.Rand) {
	for _, p := range radgen.Params(m) {
		if p.Tensor.Rank() == 1 {
			radgen.Uniform(p.Tensor, rng, 0.3)
		}
	}
}

func m2Randomize(m radgen.Module, rng *rand.Rand, s float64) {
	m.VisitParams(func(_ string, t *radgen.Tensor) { radgen.Uniform(t, rng, s) })
}
