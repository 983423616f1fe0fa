//go:build cuda

package cuda

// GPU tests: every kernel and GEMM against a float64 CPU reference. They
// skip when Available() reports no device, so the same test binary runs in
// CI (skipping) and on a GPU machine (see README.md).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"gorgonia.org/tensor"
)

// Tolerances: element-wise results must satisfy |got − want| ≤ relTol·|want|
// + absTol against the float64 reference (absTol only matters near zero).
// GEMMs are judged against the standard error scale Σ_k |a_ik·b_kj|.
const (
	relTol  = 1e-5
	absTol  = 1e-6
	tf32Tol = 3e-3
)

var (
	sharedOnce sync.Once
	sharedEng  *Engine
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedEng != nil {
		if err := sharedEng.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared engine:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// gpu returns an engine on device 0 shared by the tests, or skips.
func gpu(t testing.TB) *Engine {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	sharedOnce.Do(func() { sharedEng, sharedErr = NewEngine(0) })
	if sharedErr != nil {
		t.Fatalf("NewEngine(0): %v", sharedErr)
	}
	return sharedEng
}

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return v
}

// upload copies host data to a new device buffer freed at the end of the test.
func upload(t testing.TB, e *Engine, data []float32) Ptr {
	t.Helper()
	p := alloc(t, e, len(data)*4)
	if err := e.CopyIn(p, data); err != nil {
		t.Fatal(err)
	}
	return p
}

func alloc(t testing.TB, e *Engine, bytes int) Ptr {
	t.Helper()
	p, err := e.AllocPtr(int64(bytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.FreePtr(p) })
	return p
}

func download(t testing.TB, e *Engine, p Ptr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := e.CopyOut(out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// near checks got against want element-wise and logs the worst error.
func near(t testing.TB, name string, got []float32, want []float64, rel, abs float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		lim := rel*math.Abs(want[i]) + abs
		if math.IsNaN(float64(got[i])) != math.IsNaN(want[i]) || d > lim {
			t.Errorf("%s[%d] = %g, want %g (|diff| %.3g > %.3g)", name, i, got[i], want[i], d, lim)
			return
		}
		if r := d / (math.Abs(want[i]) + abs/rel); r > worst {
			worst, at = r, i
		}
	}
	t.Logf("%s: max relative error %.3g (at %d)", name, worst, at)
}

func TestGPUInfo(t *testing.T) {
	e := gpu(t)
	t.Logf("%+v", e.Info())
	free, total, err := e.MemInfo()
	must(t, err)
	t.Logf("memory: %d MiB free of %d MiB; headers checked: %v", free>>20, total>>20, HeadersChecked())
	if e.Info().CUBLASVersion == 0 {
		t.Error("no cuBLAS on the GPU machine: set LD_LIBRARY_PATH or RADGEN_LIBCUBLAS")
	}
}

func TestGPUUnary(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 10007
	x := randVec(rng, n, 8)
	px, py := upload(t, e, x), alloc(t, e, n*4)
	for _, c := range []struct {
		name string
		run  func() error
		ref  func(float64) float64
	}{
		{"relu", func() error { return e.ReLU(py, px, n) }, func(v float64) float64 { return math.Max(v, 0) }},
		{"tanh", func() error { return e.Tanh(py, px, n) }, math.Tanh},
		{"sigmoid", func() error { return e.Sigmoid(py, px, n) }, func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
		{"scale", func() error { return e.Scale(py, px, 22.627417, n) }, func(v float64) float64 { return v * float64(float32(22.627417)) }},
	} {
		must(t, c.run())
		want := make([]float64, n)
		for i, v := range x {
			want[i] = c.ref(float64(v))
		}
		near(t, c.name, download(t, e, py, n), want, relTol, absTol)
	}
}

// softmaxRef is the row-wise softmax in float64.
func softmaxRef(x []float32, rows, cols int) []float64 {
	out := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		v := out[r*cols : (r+1)*cols]
		mx := math.Inf(-1)
		for j := range v {
			v[j] = float64(x[r*cols+j])
			mx = math.Max(mx, v[j])
		}
		s := 0.0
		for j := range v {
			v[j] = math.Exp(v[j] - mx)
			s += v[j]
		}
		for j := range v {
			v[j] /= s
		}
	}
	return out
}

func TestGPUSoftmax(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(3, 3))
	// Rows of every block size, vocabulary-sized ones included; in place
	// and out of place.
	for _, cols := range []int{1, 7, 33, 761, 3000, 10001} {
		x := randVec(rng, 3*cols, 10)
		p, q := upload(t, e, x), alloc(t, e, 3*cols*4)
		must(t, e.Softmax(q, p, 3, cols))
		must(t, e.Softmax(p, p, 3, cols))
		want := softmaxRef(x, 3, cols)
		near(t, fmt.Sprintf("softmax/cols=%d", cols), download(t, e, q, 3*cols), want, relTol, absTol)
		near(t, fmt.Sprintf("softmax/in-place/cols=%d", cols), download(t, e, p, 3*cols), want, relTol, absTol)
	}
}

func TestGPULogSoftmax(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(4, 4))
	for _, cols := range []int{2, 100, 761, 4097} {
		const rows = 6
		x := randVec(rng, rows*cols, 20)
		px, py := upload(t, e, x), alloc(t, e, rows*cols*4)
		must(t, e.LogSoftmax(py, px, rows, cols))
		sm := softmaxRef(x, rows, cols)
		want := make([]float64, len(sm))
		for i := range sm {
			want[i] = math.Log(sm[i])
		}
		near(t, fmt.Sprintf("logsoftmax/cols=%d", cols), download(t, e, py, rows*cols), want, relTol, absTol)
	}
}

func TestGPUGather(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(6, 6))
	const vocab, dim = 50, 33
	table := randVec(rng, vocab*dim, 1)
	ids := []int32{0, 49, 7, -1, 50, 7, 3}
	n := len(ids)
	pt, pd := upload(t, e, table), alloc(t, e, n*dim*4)
	pi := alloc(t, e, n*4)
	must(t, e.CopyInInt32(pi, ids))
	scale := float32(math.Sqrt(512))
	must(t, e.Gather(pd, pt, pi, n, vocab, dim, scale))
	want := make([]float64, n*dim)
	for i, id := range ids {
		if id < 0 || id >= vocab {
			continue
		}
		for j := 0; j < dim; j++ {
			want[i*dim+j] = float64(table[int(id)*dim+j]) * float64(scale)
		}
	}
	near(t, "gather", download(t, e, pd, n*dim), want, relTol, absTol)
}

// gemmRef computes C = alpha·op(A)·op(B) + beta·C in float64 and the error
// scale |alpha|·Σ|a||b| + |beta·c| of every element.
func gemmRef(tA, tB bool, m, n, k int, alpha float64, a []float32, lda int, b []float32, ldb int, beta float64, c []float32, ldc int) (want, scale []float64) {
	want, scale = make([]float64, m*n), make([]float64, m*n)
	at := func(i, p int) float64 {
		if tA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if tB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s, sa := 0.0, 0.0
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
				sa += math.Abs(at(i, p) * bt(p, j))
			}
			cij := float64(c[i*ldc+j])
			want[i*n+j] = alpha*s + beta*cij
			scale[i*n+j] = math.Abs(alpha)*sa + math.Abs(beta*cij)
		}
	}
	return want, scale
}

func assertGemm(t *testing.T, name string, got []float32, ldc, m, n int, want, scale []float64, tol float64) {
	t.Helper()
	worst := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			d := math.Abs(float64(got[i*ldc+j]) - want[i*n+j])
			if d > tol*scale[i*n+j]+1e-30 {
				t.Fatalf("%s: C[%d,%d] = %g, want %g (|diff| %.3g, scale %.3g)", name, i, j, got[i*ldc+j], want[i*n+j], d, scale[i*n+j])
			}
			worst = math.Max(worst, d/(scale[i*n+j]+1e-30))
		}
	}
	t.Logf("%s: max error / Σ|a·b| = %.3g", name, worst)
}

func TestGPUGemm(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(10, 10))
	const m, n, k, pad = 33, 17, 65, 3
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			lda, ldb, ldc := k+pad, n+pad, n+pad
			ra, rb := m, k
			if tA {
				lda, ra = m+pad, k
			}
			if tB {
				ldb, rb = k+pad, n
			}
			a, b, c := randVec(rng, ra*lda, 1), randVec(rng, rb*ldb, 1), randVec(rng, m*ldc, 1)
			pa, pb, pc := upload(t, e, a), upload(t, e, b), upload(t, e, c)
			must(t, e.Gemm(tA, tB, m, n, k, 0.7, pa, lda, pb, ldb, 0.3, pc, ldc))
			want, scale := gemmRef(tA, tB, m, n, k, float64(float32(0.7)), a, lda, b, ldb, float64(float32(0.3)), c, ldc)
			assertGemm(t, fmt.Sprintf("gemm/tA=%v/tB=%v", tA, tB), download(t, e, pc, m*ldc), ldc, m, n, want, scale, relTol)
		}
	}
}

func TestGPUGemmStrided(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(11, 11))
	// Attention scores: batch of (Tq×dk)·(Tk×dk)ᵀ; then a shared weight
	// (strideB = 0) applied to every matrix of a batch.
	const batch, tq, tk, dk = 6, 5, 7, 16
	q, kk := randVec(rng, batch*tq*dk, 1), randVec(rng, batch*tk*dk, 1)
	pq, pk, ps := upload(t, e, q), upload(t, e, kk), alloc(t, e, batch*tq*tk*4)
	alpha := float32(1 / math.Sqrt(dk))
	must(t, e.GemmStrided(false, true, batch, tq, tk, dk, alpha, pq, dk, tq*dk, pk, dk, tk*dk, 0, ps, tk, tq*tk))
	got := download(t, e, ps, batch*tq*tk)
	for i := 0; i < batch; i++ {
		want, scale := gemmRef(false, true, tq, tk, dk, float64(alpha), q[i*tq*dk:], dk, kk[i*tk*dk:], dk, 0, make([]float32, tq*tk), tk)
		assertGemm(t, fmt.Sprintf("strided/%d", i), got[i*tq*tk:], tk, tq, tk, want, scale, relTol)
	}
	w := randVec(rng, dk*tk, 1)
	pw, po := upload(t, e, w), alloc(t, e, batch*tq*tk*4)
	must(t, e.GemmStrided(false, false, batch, tq, tk, dk, 1, pq, dk, tq*dk, pw, tk, 0, 0, po, tk, tq*tk))
	got = download(t, e, po, batch*tq*tk)
	for i := 0; i < batch; i++ {
		want, scale := gemmRef(false, false, tq, tk, dk, 1, q[i*tq*dk:], dk, w, tk, 0, make([]float32, tq*tk), tk)
		assertGemm(t, fmt.Sprintf("shared/%d", i), got[i*tq*tk:], tk, tq, tk, want, scale, relTol)
	}
}

func TestGPUGemmTF32(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	e, err := NewEngine(0, WithTF32(true))
	must(t, err)
	defer e.Close()
	if e.Info().Major < 8 {
		t.Skipf("no TF32 before compute capability 8.0 (%d.%d)", e.Info().Major, e.Info().Minor)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	const m, n, k = 64, 48, 512
	a, b := randVec(rng, m*k, 1), randVec(rng, k*n, 1)
	c := make([]float32, m*n)
	pa, pb, pc := upload(t, e, a), upload(t, e, b), upload(t, e, c)
	must(t, e.Gemm(false, false, m, n, k, 1, pa, k, pb, n, 0, pc, n))
	want, scale := gemmRef(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	assertGemm(t, "gemm/tf32", download(t, e, pc, m*n), n, m, n, want, scale, tf32Tol)
}

// TestGPUTensorEngine drives the engine through gorgonia's tensor API.
func TestGPUTensorEngine(t *testing.T) {
	e := gpu(t)
	d := tensor.New(tensor.WithEngine(e), tensor.WithShape(3, 5), tensor.Of(tensor.Float32))
	defer e.FreeDense(d)
	must(t, e.Memset(d, float32(2.5)))
	h, err := e.Accessible(d)
	must(t, err)
	for i, v := range bytesToF32(h.(hostMemory).Bytes()) {
		if v != 2.5 {
			t.Fatalf("after Memset: [%d] = %g", i, v)
		}
	}
	host := tensor.New(tensor.WithShape(3, 5), tensor.WithBacking(randVec(rand.New(rand.NewPCG(14, 14)), 15, 1)))
	must(t, e.Memcpy(d, host))
	back := tensor.New(tensor.WithShape(3, 5), tensor.Of(tensor.Float32))
	must(t, e.Memcpy(back, d))
	if fmt.Sprint(back.Data()) != fmt.Sprint(host.Data()) {
		t.Fatalf("round trip through the device: %v, want %v", back.Data(), host.Data())
	}
	e.Memclr(d)
	out, err := e.ToHost(make([]float32, 15), d)
	must(t, err)
	for i, v := range out {
		if v != 0 {
			t.Fatalf("after Memclr: [%d] = %g", i, v)
		}
	}
	d2, err := e.NewDense(3, 5)
	must(t, err)
	defer e.FreeDense(d2)
	must(t, e.Memcpy(d2, d)) // device to device
	must(t, e.Sync())
}

func bytesToF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestGPUAllocator(t *testing.T) {
	e := gpu(t)
	p, err := e.AllocPtr(1 << 20)
	must(t, err)
	must(t, e.FreePtr(p))
	q, err := e.AllocPtr(1<<20 - 100)
	must(t, err)
	if q != p {
		t.Errorf("freed block not reused: %#x then %#x", p, q)
	}
	must(t, e.FreePtr(q))
	must(t, e.EmptyCache())
	if st := e.MemStats(); st.Cached != 0 {
		t.Errorf("EmptyCache left %d bytes cached", st.Cached)
	}
	// An impossible allocation fails cleanly.
	if _, err := e.AllocPtr(1 << 50); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("Alloc(1 PiB) = %v, want ErrOutOfMemory", err)
	}
}

func TestGPUClose(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	e, err := NewEngine(0)
	must(t, err)
	_, err = e.AllocPtr(64 << 20) // left live: Close must free it
	must(t, err)
	must(t, e.Close())
	if err := e.Softmax(0, 0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Softmax after Close: %v", err)
	}
	must(t, e.Close())
	if _, err := NewEngine(99); !errors.Is(err, ErrNoDevice) {
		t.Errorf("NewEngine(99): %v, want ErrNoDevice", err)
	}
}
