package m2_test

// The helpers of the tests of the whole model (package m2_test; the tests
// of M²'s blocks, in package m2, have theirs in helpers_test.go).

import (
	"fmt"
	"math"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testdevice"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
)

// checkM2 validates an M² configuration in its own ids alone, over two
// views of regions (2·7·7), against the facade's default budget.
func checkM2(c m2.Config) error {
	if err := c.ValidateShape(); err != nil {
		return err
	}
	b, k := memtrans.DefaultBudget(), c.Cost(98)
	if k.Params > float64(b.MaxParams) || k.Activations > float64(b.MaxActivations) {
		return fmt.Errorf("%w: %w: M² of about %.3g parameters and %.3g activation values", arch.ErrConfig, arch.ErrBudget, k.Params, k.Activations)
	}
	return nil
}

// stepDevices are the devices the module decoding runs on in these tests:
// the CPU and the device of RADGEN_DEVICE (the reference engine when that
// is the CPU).
func stepDevices(t *testing.T) []radgen.Device {
	t.Helper()
	dev, err := testdevice.Compared(t)
	if err != nil {
		t.Skip(err)
	}
	return []radgen.Device{radgen.CPU, dev}
}

func openSafetensors(t testing.TB, path string) *safetensors.File {
	t.Helper()
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fileTensor reads a float tensor of a golden file.
func fileTensor(t testing.TB, f *safetensors.File, name string) *radgen.Tensor {
	t.Helper()
	v, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return radgen.FromFloat32(v, shape...)
}

// fileInts reads an integer tensor of a golden file as ints, with its shape.
func fileInts(t testing.TB, f *safetensors.File, name string) ([]int, []int) {
	t.Helper()
	v, shape, err := f.Int64(name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out, shape
}

// maxAbsDiff returns the largest |got − want| over the elements (+Inf for a
// NaN); got and want may live on any device.
func maxAbsDiff(t testing.TB, name string, got, want *radgen.Tensor) float64 {
	t.Helper()
	if len(got.Shape()) != len(want.Shape()) || got.Len() != want.Len() {
		t.Fatalf("%s: shape %v, want %v", name, got.Shape(), want.Shape())
	}
	var worst float64
	a, b := got.Float64s(), want.Float64s()
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	return worst
}
