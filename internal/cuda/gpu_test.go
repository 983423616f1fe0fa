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

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
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

func TestGPUAddMul(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 12, 37
	a := randVec(rng, rows*cols, 3)
	for _, bc := range []struct {
		name string
		bc   Broadcast
	}{{"same", Same(rows)}, {"row", RowVector}, {"cyclic", Cyclic(4)}, {"group", PerGroup(3, 4)}} {
		b := randVec(rng, bc.bc.Rows*cols, 3)
		pa, pb, pd := upload(t, e, a), upload(t, e, b), alloc(t, e, rows*cols*4)
		wantAdd, wantMul := make([]float64, rows*cols), make([]float64, rows*cols)
		for r := 0; r < rows; r++ {
			br := (r / bc.bc.Div) % bc.bc.Rows
			for c := 0; c < cols; c++ {
				x, y := float64(a[r*cols+c]), float64(b[br*cols+c])
				wantAdd[r*cols+c], wantMul[r*cols+c] = x+y, x*y
			}
		}
		must(t, e.Add(pd, pa, pb, rows, cols, bc.bc))
		near(t, "add/"+bc.name, download(t, e, pd, rows*cols), wantAdd, relTol, absTol)
		must(t, e.Mul(pa, pa, pb, rows, cols, bc.bc)) // in place
		near(t, "mul/"+bc.name, download(t, e, pa, rows*cols), wantMul, relTol, absTol)
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

// softmaxRef is R2Gen's masked softmax in float64.
func softmaxRef(x []float32, rows, cols int, masked func(r, j int) bool) []float64 {
	out := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		v := out[r*cols : (r+1)*cols]
		mx := math.Inf(-1)
		for j := range v {
			v[j] = float64(x[r*cols+j])
			if masked != nil && masked(r, j) {
				v[j] = -1e9
			}
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
	const B, H, Tq, Tk = 2, 3, 5, 7
	rows := B * H * Tq
	x := randVec(rng, rows*Tk, 6)
	px, py := upload(t, e, x), alloc(t, e, rows*Tk*4)
	keyPad := make([]byte, B*Tk)  // (B, 1, Tk): batch 1 has its last 3 keys padded
	full := make([]byte, B*Tq*Tk) // (B, Tq, Tk): pad & subsequent, as R2Gen's tgt mask
	for b := 0; b < B; b++ {
		for j := 0; j < Tk; j++ {
			if b == 0 || j < Tk-3 {
				keyPad[b*Tk+j] = 1
			}
			for q := 0; q < Tq; q++ {
				if keyPad[b*Tk+j] == 1 && j <= q {
					full[(b*Tq+q)*Tk+j] = 1
				}
			}
		}
	}
	full[(1*Tq+0)*Tk+0] = 0 // a fully masked row: uniform, as PyTorch
	pPad, pFull := alloc(t, e, len(keyPad)), alloc(t, e, len(full))
	must(t, e.CopyInBytes(pPad, keyPad))
	must(t, e.CopyInBytes(pFull, full))
	bq := func(r int) (int, int) { return r / (H * Tq), r % Tq }
	cases := []struct {
		name   string
		m      *Mask
		masked func(r, j int) bool
	}{
		{"plain", nil, nil},
		{"keypad", &Mask{Keys: pPad, KeyRows: 1, RowsPerBatch: H * Tq, QLen: Tq},
			func(r, j int) bool { b, _ := bq(r); return keyPad[b*Tk+j] == 0 }},
		{"full", &Mask{Keys: pFull, KeyRows: Tq, RowsPerBatch: H * Tq, QLen: Tq},
			func(r, j int) bool { b, q := bq(r); return full[(b*Tq+q)*Tk+j] == 0 }},
		{"causal+keypad", &Mask{Keys: pPad, KeyRows: 1, RowsPerBatch: H * Tq, QLen: Tq, Causal: true},
			func(r, j int) bool { b, q := bq(r); return keyPad[b*Tk+j] == 0 || j > q }},
		{"causal offset", &Mask{QLen: Tq, Causal: true, QOffset: 2},
			func(r, j int) bool { _, q := bq(r); return j > 2+q }},
	}
	for _, c := range cases {
		must(t, e.Softmax(py, px, rows, Tk, c.m))
		near(t, "softmax/"+c.name, download(t, e, py, rows*Tk), softmaxRef(x, rows, Tk, c.masked), relTol, absTol)
	}
	// Wide rows (vocabulary-sized, every block size), in place.
	for _, cols := range []int{1, 33, 761, 3000, 10001} {
		x := randVec(rng, 3*cols, 10)
		p := upload(t, e, x)
		must(t, e.Softmax(p, p, 3, cols, nil))
		near(t, fmt.Sprintf("softmax/cols=%d", cols), download(t, e, p, 3*cols), softmaxRef(x, 3, cols, nil), relTol, absTol)
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
		sm := softmaxRef(x, rows, cols, nil)
		want := make([]float64, len(sm))
		for i := range sm {
			want[i] = math.Log(sm[i])
		}
		near(t, fmt.Sprintf("logsoftmax/cols=%d", cols), download(t, e, py, rows*cols), want, relTol, absTol)
	}
}

func layerNormRef(x, g, b []float32, rows, cols int, perRow bool, eps float64, kind NormKind) []float64 {
	out := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		row := f64(x[r*cols : (r+1)*cols])
		mean := 0.0
		for _, v := range row {
			mean += v
		}
		mean /= float64(cols)
		ss := 0.0
		for _, v := range row {
			ss += (v - mean) * (v - mean)
		}
		off := 0
		if perRow {
			off = r * cols
		}
		for j, v := range row {
			gj, bj := float64(g[off+j]), float64(b[off+j])
			if kind == NormR2Gen {
				out[r*cols+j] = gj*(v-mean)/(math.Sqrt(ss/float64(cols-1))+eps) + bj
			} else {
				out[r*cols+j] = gj*(v-mean)/math.Sqrt(ss/float64(cols)+eps) + bj
			}
		}
	}
	return out
}

func TestGPULayerNorm(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(5, 5))
	for _, cols := range []int{37, 512, 2500} {
		const rows = 9
		x := randVec(rng, rows*cols, 4)
		for i := range x {
			x[i] += 1.5 // a mean far from 0 tests the two-pass variance
		}
		for _, kind := range []NormKind{NormR2Gen, NormStandard} {
			eps := float32(1e-6)
			if kind == NormStandard {
				eps = 1e-5
			}
			for _, perRow := range []bool{false, true} {
				np := cols
				if perRow {
					np = rows * cols
				}
				g, b := randVec(rng, np, 2), randVec(rng, np, 1)
				px, pg, pb, py := upload(t, e, x), upload(t, e, g), upload(t, e, b), alloc(t, e, rows*cols*4)
				if perRow {
					must(t, e.CondLayerNorm(py, px, pg, pb, rows, cols, eps, kind))
				} else {
					must(t, e.LayerNorm(px, px, pg, pb, rows, cols, eps, kind)) // in place
					py = px
				}
				name := fmt.Sprintf("layernorm/kind=%d/cond=%v/cols=%d", kind, perRow, cols)
				near(t, name, download(t, e, py, rows*cols), layerNormRef(x, g, b, rows, cols, perRow, float64(eps), kind), relTol, absTol)
			}
		}
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

func TestGPURMGate(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(7, 7))
	const B, S, d = 2, 3, 40
	next, mem := randVec(rng, B*S*d, 3), randVec(rng, B*S*d, 1)
	gw, gu := randVec(rng, B*2*d, 3), randVec(rng, B*S*2*d, 3)
	pn, pm, pw, pu := upload(t, e, next), upload(t, e, mem), upload(t, e, gw), upload(t, e, gu)
	must(t, e.RMGate(pn, pn, pm, pw, pu, B, S, d)) // in place over next
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	want := make([]float64, B*S*d)
	for r := 0; r < B*S; r++ {
		b := r / S
		for j := 0; j < d; j++ {
			ig := float64(gw[b*2*d+j]) + float64(gu[r*2*d+j])
			fg := float64(gw[b*2*d+d+j]) + float64(gu[r*2*d+d+j])
			want[r*d+j] = sig(ig)*math.Tanh(float64(next[r*d+j])) + sig(fg)*float64(mem[r*d+j])
		}
	}
	near(t, "rmgate", download(t, e, pn, B*S*d), want, relTol, absTol)
}

func TestGPUHeads(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(8, 8))
	const B, T, H, dk = 2, 5, 4, 8
	const D = H * dk
	qkv := randVec(rng, B*T*3*D, 1) // fused (B, T, 3D)
	pq := upload(t, e, qkv)
	pk := alloc(t, e, B*H*T*dk*4)
	must(t, e.SplitHeads(pk, pq, B, T, H, dk, 3*D, D)) // K
	want := make([]float64, B*H*T*dk)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for tt := 0; tt < T; tt++ {
				for k := 0; k < dk; k++ {
					want[((b*H+h)*T+tt)*dk+k] = float64(qkv[(b*T+tt)*3*D+D+h*dk+k])
				}
			}
		}
	}
	near(t, "split", download(t, e, pk, B*H*T*dk), want, 0, 0)

	pm := alloc(t, e, B*T*D*4)
	must(t, e.MergeHeads(pm, pk, B, T, H, dk, D))
	back := make([]float64, B*T*D)
	for r := 0; r < B*T; r++ {
		for c := 0; c < D; c++ {
			back[r*D+c] = float64(qkv[r*3*D+D+c])
		}
	}
	near(t, "merge", download(t, e, pm, B*T*D), back, 0, 0)

	// Append one step at position 3 of a cache of capacity 6.
	const capacity, pos = 6, 3
	cache := make([]float32, B*H*capacity*dk)
	pc := upload(t, e, cache)
	step := randVec(rng, B*D, 1) // (B, 1, D)
	ps := upload(t, e, step)
	must(t, e.AppendHeads(pc, ps, B, 1, H, dk, D, 0, capacity, pos))
	wantC := make([]float64, len(cache))
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for k := 0; k < dk; k++ {
				wantC[((b*H+h)*capacity+pos)*dk+k] = float64(step[b*D+h*dk+k])
			}
		}
	}
	near(t, "append", download(t, e, pc, len(cache)), wantC, 0, 0)
}

func TestGPUTranspose(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(9, 9))
	const batch, rows, cols = 3, 45, 70
	x := randVec(rng, batch*rows*cols, 1)
	px, py := upload(t, e, x), alloc(t, e, batch*rows*cols*4)
	must(t, e.Transpose(py, px, batch, rows, cols))
	want := make([]float64, len(x))
	for b := 0; b < batch; b++ {
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				want[b*rows*cols+c*rows+r] = float64(x[b*rows*cols+r*cols+c])
			}
		}
	}
	near(t, "transpose", download(t, e, py, len(x)), want, 0, 0)
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

func TestGPULinear(t *testing.T) {
	e := gpu(t)
	rng := rand.New(rand.NewPCG(13, 13))
	const rows, in, out = 7, 48, 24
	x, w, bias := randVec(rng, rows*in, 1), randVec(rng, out*in, 1), randVec(rng, out, 1)
	px, pw, pb, py := upload(t, e, x), upload(t, e, w), upload(t, e, bias), alloc(t, e, rows*out*4)
	must(t, e.Linear(py, px, pw, pb, rows, in, out))
	want, scale := gemmRef(false, true, rows, out, in, 1, x, in, w, in, 0, make([]float32, rows*out), out)
	for i := range want {
		want[i] += float64(bias[i%out])
		scale[i] += math.Abs(float64(bias[i%out]))
	}
	assertGemm(t, "linear", download(t, e, py, rows*out), out, rows, out, want, scale, relTol)
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
	if err := e.Softmax(0, 0, 1, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Softmax after Close: %v", err)
	}
	must(t, e.Close())
	if _, err := NewEngine(99); !errors.Is(err, ErrNoDevice) {
		t.Errorf("NewEngine(99): %v, want ErrNoDevice", err)
	}
}

// TestGPUDecodeProxy runs the benchmark's decoder step once and checks that
// the log-probabilities are finite and normalised.
func TestGPUDecodeProxy(t *testing.T) {
	e := gpu(t)
	p := newStepProxy(t, e, 2, 3)
	defer p.free()
	must(t, p.generate(4))
	lp := download(t, e, p.logp, p.n*pxVocab)
	for r := 0; r < p.n; r++ {
		s := 0.0
		for _, v := range lp[r*pxVocab : (r+1)*pxVocab] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("row %d: non-finite log-probability %g", r, v)
			}
			s += math.Exp(float64(v))
		}
		if math.Abs(s-1) > 1e-4 {
			t.Errorf("row %d: probabilities sum to %g", r, s)
		}
	}
}
