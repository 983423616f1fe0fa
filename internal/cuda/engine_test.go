//go:build cuda

package cuda

// Tests that need no GPU: they run (and must pass) in CI, where the binary
// starts without libcuda.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

func TestKernelEntryPoints(t *testing.T) {
	entries := map[string]bool{}
	for _, m := range regexp.MustCompile(`\.visible \.entry (\w+)\(`).FindAllStringSubmatch(ptxSource, -1) {
		entries[m[1]] = true
	}
	for k, name := range kernelNames {
		if name == "" {
			t.Errorf("kernel %d has no name", k)
		}
		if !entries[name] {
			t.Errorf("kernel %s is not in kernels/radgen.ptx", name)
		}
		delete(entries, name)
	}
	for name := range entries {
		t.Errorf("entry %s of radgen.ptx has no launcher", name)
	}
}

// TestPTXMatchesSource fails when kernels/radgen.cu was edited without
// running go generate (kernels/gen.sh records the source's hash in the PTX).
func TestPTXMatchesSource(t *testing.T) {
	src, err := os.ReadFile("kernels/radgen.cu")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("kernels/radgen.cu not here (test binary run outside internal/cuda)")
	}
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	first, _, _ := strings.Cut(ptxSource, "\n")
	want := "// radgen.cu sha256 " + hex.EncodeToString(sum[:])
	if first != want {
		t.Fatalf("kernels/radgen.ptx is stale: its first line is %q, want %q; run go generate -tags cuda ./internal/cuda", first, want)
	}
	if !strings.Contains(ptxSource, ".target sm_52") {
		t.Error("PTX is not built for compute_52 (gen.sh's -arch)")
	}
}

// TestNoDeviceIsAnError: on a machine without a GPU the engine reports an
// error and the process goes on (gorgonia.org/cu would have exited).
func TestNoDeviceIsAnError(t *testing.T) {
	err := Available()
	t.Logf("Available: %v (headers checked: %v)", err, HeadersChecked())
	if err == nil {
		t.Skip("a GPU is present")
	}
	if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
		t.Errorf("Available() = %v, want an error matching ErrNoDriver or ErrNoDevice", err)
	}
	e, err2 := NewEngine(0)
	if e != nil || err2 == nil {
		t.Fatalf("NewEngine without a device = %v, %v", e, err2)
	}
	if !errors.Is(err2, ErrNoDriver) && !errors.Is(err2, ErrNoDevice) {
		t.Errorf("NewEngine: %v, want ErrNoDriver or ErrNoDevice", err2)
	}
}

func TestCUDAHeadersChecked(t *testing.T) {
	if os.Getenv("RADGEN_REQUIRE_CUDA_HEADERS") != "" && !HeadersChecked() {
		t.Fatal("RADGEN_REQUIRE_CUDA_HEADERS is set but the shim was compiled without cuda.h/cublas_v2.h (CGO_CFLAGS)")
	}
}

func TestErrorIs(t *testing.T) {
	cases := []struct {
		code int
		want error
	}{
		{cudaErrorOutOfMemory, ErrOutOfMemory},
		{cublasStatusAllocFailed, ErrOutOfMemory},
		{cudaErrorNoDevice, ErrNoDevice},
		{cudaErrorInvalidDevice, ErrNoDevice},
		{cudaErrorInsufficientDriver, ErrNoDriver},
		{20001, ErrNoDriver},
		{20003, ErrNoCUBLAS},
	}
	for _, c := range cases {
		err := error(&Error{Op: "x", Code: c.code})
		if !errors.Is(err, c.want) {
			t.Errorf("code %d does not match %v", c.code, c.want)
		}
	}
	if errors.Is(&Error{Code: 1}, ErrOutOfMemory) {
		t.Error("CUDA_ERROR_INVALID_VALUE matches ErrOutOfMemory")
	}
}

// fakeEngine is an Engine whose allocator hands out fake addresses: enough
// for the tensor plumbing, which never touches the memory.
func fakeEngine() *Engine {
	return &Engine{alloc: newAllocator(newFakeMem(1 << 30)), maxGrid: 1}
}

func TestDenseOnDevice(t *testing.T) {
	e := fakeEngine()
	d, err := e.NewDense(2, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Shape().Eq(tensor.Shape{2, 3, 4}) || d.Dtype() != tensor.Float32 {
		t.Errorf("shape %v dtype %v", d.Shape(), d.Dtype())
	}
	if d.IsNativelyAccessible() || !d.IsManuallyManaged() {
		t.Errorf("device tensor flags: accessible=%v managed=%v", d.IsNativelyAccessible(), d.IsManuallyManaged())
	}
	if d.Engine() != tensor.Engine(e) {
		t.Error("tensor does not carry the engine")
	}
	if d.MemSize() != 2*3*4*4 {
		t.Errorf("MemSize = %d", d.MemSize())
	}
	p := Ptr(d.Uintptr())
	if e.alloc.size(p) != 256 {
		t.Errorf("tensor memory is not a live allocation of the engine")
	}
	if got, ok := e.devicePtr(d); !ok || got != p {
		t.Errorf("devicePtr(dense) = %#x, %v", got, ok)
	}
	host := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))
	if _, ok := e.devicePtr(host); ok {
		t.Error("a host tensor was taken for device memory")
	}
	if b, ok := hostBytes(host); !ok || len(b) != 8 {
		t.Errorf("hostBytes(host) = %d bytes, %v", len(b), ok)
	}
	if _, ok := hostBytes(d); ok {
		t.Error("hostBytes accepted a device tensor")
	}
	if err := e.FreeDense(d); err != nil {
		t.Fatal(err)
	}
	if err := e.FreeDense(d); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("second FreeDense: %v", err)
	}

	// tensor.New allocates through the engine when no memory is given.
	d2 := tensor.New(tensor.WithEngine(e), tensor.WithShape(8), tensor.Of(tensor.Float32))
	if Ptr(d2.Uintptr()) != p {
		t.Errorf("tensor.New did not reuse the cached block")
	}
	if err := e.Free(d2, int64(d2.MemSize())); err != nil {
		t.Error(err)
	}
	if st := e.MemStats(); st.InUse != 0 || st.Hits != 1 {
		t.Errorf("MemStats = %+v", st)
	}
}

func TestWorksWith(t *testing.T) {
	e := fakeEngine()
	if !e.WorksWith(tensor.DataOrder(0)) {
		t.Error("row-major contiguous refused")
	}
	if e.WorksWith(tensor.ColMajor) || e.WorksWith(tensor.Transposed) || e.WorksWith(tensor.NonContiguous) {
		t.Error("accepted an order the kernels cannot read")
	}
	if e.AllocAccessible() {
		t.Error("AllocAccessible")
	}
}

func TestClosedEngine(t *testing.T) {
	e := fakeEngine()
	e.closed = true
	if _, err := e.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := e.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBadSizesPanic(t *testing.T) {
	e := fakeEngine()
	for name, f := range map[string]func(){
		"gemm lda":       func() { e.Gemm(false, false, 4, 4, 8, 1, 0, 4, 0, 4, 0, 0, 4) },
		"strided stride": func() { e.GemmStrided(false, false, 2, 4, 4, 4, 1, 0, 4, -1, 0, 4, 16, 0, 0, 4, 16) },
		"scale":          func() { e.Scale(0, 0, 2, -1) },
		"softmax":        func() { e.Softmax(0, 0, -1, 4) },
		"gather":         func() { e.Gather(0, 0, 0, 4, -1, 8, 1) },
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "cuda: ") {
					t.Errorf("%s: recovered %v, want a cuda: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// TestCUBLASSymbols opens libcuBLAS when one is installed (no GPU needed) and
// so checks that every entry point the shim resolves exists in it.
func TestCUBLASSymbols(t *testing.T) {
	err := loadCUBLAS()
	if err != nil && errors.Is(err, ErrNoCUBLAS) {
		t.Skipf("no libcublas here: %v", err)
	}
	if err != nil {
		t.Fatalf("libcublas found but unusable: %v", err)
	}
}
