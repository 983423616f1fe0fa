// Package testdevice gives the device tests the device they compare with
// the CPU.
package testdevice

import (
	"fmt"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testutil"
)

// Compared returns the device of RADGEN_DEVICE, or the reference engine when
// that is the CPU (a test comparing a device with the CPU needs one). A
// malformed RADGEN_DEVICE fails the test; a device that cannot be used here
// (CUDA without a GPU or without the cuda tag) is returned with the error
// its Check gave, for the caller to skip or fail.
func Compared(t testing.TB) (radgen.Device, error) {
	t.Helper()
	dev, err := radgen.ParseDevice(testutil.DeviceName(t))
	if err != nil {
		t.Fatal(err)
	}
	if dev == radgen.CPU {
		dev = radgen.Reference()
	}
	if err := dev.Check(); err != nil {
		return dev, fmt.Errorf("device %v: %w", dev, err)
	}
	t.Logf("comparing %v against the CPU", dev)
	return dev, nil
}
