package f32

import (
	"testing"

	"github.com/radgen/radgen/internal/cpu"
	"github.com/radgen/radgen/internal/testutil"
)

// TestKernelPath names the kernel path in the test log, fails when
// RADGEN_CPU asks for one this machine cannot run, and checks that the GEMM
// runs on the kernels of that path: a set that failed its self-check (see
// selfCheck) would make the run fall back silently.
func TestKernelPath(t *testing.T) {
	testutil.KernelPath(t)
	want := map[string]string{cpu.PathAVX512: "avx512", cpu.PathAVX2: "avx2", cpu.PathPureGo: "go"}[cpu.Path()]
	if got := pickKernels().name; got != want {
		t.Fatalf("kernel path %s, but the GEMM runs the %s kernels", cpu.Path(), got)
	}
	t.Logf("GEMM kernels: %s", pickKernels().name)
}
