package testdevice

import (
	"runtime/debug"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testutil"
)

// Selected returns the device of RADGEN_DEVICE, the CPU when it is unset,
// for tests that run on whatever device a run names (the parity tests
// against the golden files). testutil.DeviceName logs the choice; a
// malformed name or a device that cannot be used fails the test, so that a
// run meant for a device never passes on the CPU.
func Selected(t testing.TB) radgen.Device {
	t.Helper()
	dev, err := radgen.ParseDevice(testutil.DeviceName(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Check(); err != nil {
		t.Fatalf("device %v: %v", dev, err)
	}
	return dev
}

// Move moves every parameter and buffer of m to dev (nothing when it is
// there already), failing the test when it cannot.
func Move(t testing.TB, m radgen.Module, dev radgen.Device) {
	t.Helper()
	if err := radgen.ToDevice(m, dev); err != nil {
		t.Fatalf("moving the model to %v: %v", dev, err)
	}
}

// Host returns x's values on the CPU: x itself when it is there, otherwise
// a copy, for comparing a device's results with CPU values. A nil x gives
// nil.
func Host(x *radgen.Tensor) *radgen.Tensor {
	if x == nil {
		return nil
	}
	return x.To(radgen.CPU)
}

// FailOnPanic, deferred by a test, turns a panic of the test's goroutine
// into a failure of that test with the panic's value and stack: an op that
// does not run on a device yet then fails the test that reached it instead
// of ending the package's test binary, and with it the tests after it.
func FailOnPanic(t testing.TB) {
	if r := recover(); r != nil {
		t.Helper()
		t.Fatalf("panic: %v\n%s", r, debug.Stack())
	}
}

// Benched returns the device of RADGEN_DEVICE (the CPU when it is unset)
// for a benchmark: a malformed name fails it, a device that cannot be used
// here skips it with the reason.
func Benched(b *testing.B) radgen.Device {
	b.Helper()
	dev, err := radgen.ParseDevice(testutil.DeviceName(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := dev.Check(); err != nil {
		b.Skipf("no %v to benchmark on here (%v): run it on a machine with that GPU, built with -tags cuda", dev, err)
	}
	return dev
}
