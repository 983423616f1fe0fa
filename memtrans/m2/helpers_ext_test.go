package m2_test

// The helpers of the tests of the whole model (package m2_test; the tests
// of M²'s blocks, in package m2, have theirs in helpers_test.go).

import (
	"fmt"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/goldentest"
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

// The golden files, read as every architecture's tests read them.
var (
	openSafetensors = goldentest.Open
	fileTensor      = goldentest.Tensor
	fileInts        = goldentest.Ints
	maxAbsDiff      = goldentest.MaxAbsDiff
)
