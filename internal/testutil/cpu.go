package testutil

import (
	"testing"

	"github.com/radgen/radgen/internal/cpu"
)

// KernelPath logs the kernel path the test binary runs on (avx512, avx2 or
// purego, and how it was chosen: see internal/cpu and RADGEN_CPU) and fails
// the test when RADGEN_CPU asks for a path this CPU or build cannot run, so
// that a run meant for one path never passes on another. Every package
// whose results go through the kernels calls it from a TestKernelPath.
func KernelPath(t testing.TB) {
	t.Helper()
	t.Logf("kernel path: %s", cpu.Describe())
	if err := cpu.Err(); err != nil {
		t.Fatalf("%v", err)
	}
}
