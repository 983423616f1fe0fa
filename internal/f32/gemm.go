package f32

//go:generate go run ./_gen

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/radgen/radgen/internal/freelist"
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where
// op(X) is X or Xᵀ as transA and transB say. op(A) is m×k, op(B) is k×n and
// C is m×n; lda, ldb and ldc are the row strides of A, B and C as stored.
//
// Shapes: A is (m, k) with stride lda, or (k, m) if transA; B is (k, n) with
// stride ldb, or (n, k) if transB; C is (m, n) with stride ldc ≥ n, and only
// its m×n window is written. When beta is 0, C is not read (NaNs in it do not
// propagate). A and B must not overlap C.
//
// The reference loop is
//
//	for i < m, j < n: C[i][j] = alpha·Σ_{p<k} op(A)[i][p]·op(B)[p][j] + beta·C[i][j]
//
// computed with FMA micro-kernels in Go assembly (AVX-512 or AVX2 on amd64
// when the CPU has them, see internal/cpu; plain Go otherwise), on up to
// GOMAXPROCS goroutines for large shapes and on the calling goroutine for
// small ones. Gemm chooses its path by shape (the first two with the
// assembly only):
//
//   - m ≤ 3, B not transposed (decoding with a weight stored k×n): B is read
//     once, front to back, four rows at a time (axpy kernels);
//   - m ≤ 48, B transposed (a weight stored n×k, y = x·Wᵀ): dot
//     products along the rows of B, each row read once;
//   - otherwise BLIS-style blocking: op(A) packed in row panels, op(B) packed
//     in column strips, or read in place when op(B) = B and A fits one
//     block of rows, so that packing does not cost more than the product.
//
// Gemm panics, with a message prefixed "f32: ", on negative sizes, short
// strides or short slices. It allocates only to grow its pooled packing
// buffers and to start goroutines.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemm(pickKernels(), runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// GemmStrided runs batch independent Gemm calls; matrix i of A, B and C
// starts at i·strideA, i·strideB and i·strideC. A stride of 0 shares one
// matrix across the batch (for example a weight matrix).
//
// Shapes: A is (batch, m, k) (or (batch, k, m) if transA) with row stride lda
// and batch stride strideA, and likewise B and C. The matrices of C must not
// overlap unless strideC is 0, in which case the products are applied to the
// one C in batch order. Batches of small products run in parallel over the
// batch, as attention's per-head products do; large ones parallelise inside
// each product.
func GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int) {
	if batch < 0 {
		panic("f32: negative batch")
	}
	if strideA < 0 || strideB < 0 || strideC < 0 {
		panic("f32: negative batch stride")
	}
	if batch == 0 {
		return
	}
	last := batch - 1
	checkGemm(transA, transB, m, n, k,
		a[min(last*strideA, len(a)):], lda, b[min(last*strideB, len(b)):], ldb, c[min(last*strideC, len(c)):], ldc)
	if m == 0 || n == 0 {
		return
	}
	st := strided{ks: pickKernels(), transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc, strideA: strideA, strideB: strideB, strideC: strideC}
	procs := runtime.GOMAXPROCS(0)
	if procs == 1 || batch == 1 || strideC == 0 || 2*m*n*k >= parallelFlops {
		for i := 0; i < batch; i++ {
			st.one(i, procs)
		}
		return
	}
	// Small products: each goroutine runs a contiguous run of the batch,
	// single-threaded.
	t := stridedTasks.Get().(*stridedTask)
	t.st = st
	runRanges(min(procs, batch), batch, t, &t.wg)
	t.st = strided{}
	stridedTasks.Put(t)
}

// stridedTask is a pooled GemmStrided call shared out by batch ranges.
type stridedTask struct {
	st strided
	wg sync.WaitGroup
}

var stridedTasks = sync.Pool{New: func() any { return new(stridedTask) }}

func (t *stridedTask) runRange(lo, hi int) { t.st.run(lo, hi) }

// strided is a GemmStrided call.
type strided struct {
	ks                        *kernelSet
	transA, transB            bool
	m, n, k                   int
	alpha, beta               float32
	a, b, c                   []float32
	lda, ldb, ldc             int
	strideA, strideB, strideC int
}

// one computes product i of the batch on up to procs goroutines.
func (s *strided) one(i, procs int) {
	// A and B may be empty when k is 0.
	a, b := s.a[min(i*s.strideA, len(s.a)):], s.b[min(i*s.strideB, len(s.b)):]
	gemm(s.ks, procs, s.transA, s.transB, s.m, s.n, s.k, s.alpha, a, s.lda, b, s.ldb, s.beta, s.c[i*s.strideC:], s.ldc)
}

// run computes the products [lo, hi) of the batch on the calling goroutine.
func (s *strided) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		s.one(i, 1)
	}
}

// Tuning constants of the driver. The block sizes of each kernel set live in
// its kernelSet.
const (
	// parallelFlops is the product size 2·m·n·k below which Gemm stays on the
	// calling goroutine: waking goroutines and meeting at barriers cost
	// more than they save under a couple of megaflops (20 µs).
	parallelFlops = 1 << 21

	// skinnyRows is the largest m for which the blocked product reads
	// op(B) = B in place whatever its row stride. (With op(B) = Bᵀ, up to
	// skinnyDotRows rows take the dot-product path, where B, a weight
	// matrix when decoding, is streamed once from memory along its rows
	// instead of being packed; with op(B) = B, up to three rows take the
	// axpy kernels.)
	skinnyRows = 16

	// skinnyDotRows is the largest m for which a product with op(B) = Bᵀ
	// takes the dot-product path (a beam of three for sixteen studies):
	// the groups of rows read each chunk of B from cache, where the
	// blocked product would pack all of B at every call.
	skinnyDotRows = 48

	// directKC is the depth of the k blocks when the kernels read B in place
	// for few rows: shallow blocks keep the rows of B that are being read
	// few enough for the prefetchers to follow as sequential streams.
	directKC = 64

	// directMaxLDB is the largest row stride of B (in floats, 4 KB) that
	// the blocked product reads in place for more than skinnyRows rows.
	directMaxLDB = 1024

	// directPrefetch is how far ahead along its row of B a kernel reading B
	// in place prefetches, in bytes: two strips of 16 floats.
	directPrefetch = 128
)

// microKernel computes one r×nr tile of C from a packed A panel and rows of B
// (r and nr fixed by the kernel):
//
//	for i < r, j < nr: acc[i][j] = Σ_{p<k} a[p*r+i] · b[p*bs+j]
//	v = acc[i][j]                    if beta == 0 (c is not read)
//	v = beta·c[i*ldc+j] + acc[i][j]   otherwise
//	v += bias[j]                      if bias != nil (len(bias) ≥ nr)
//	v = max(v, 0)                     if relu (a NaN stays NaN)
//	c[i*ldc+j] = v
//
// k ≥ 1. bs is nr for a packed B panel, or ldb when the kernel reads B in
// place.
//
// pf is a prefetch distance in bytes: at each step p the kernel may prefetch
// the line at b[p*bs] + pf (the next strips of B when it is read in place).
//
// bias and relu are the epilogue of a fused layer (see GemmPacked); the
// plain products pass nil and false.
type microKernel func(k int, a, b []float32, bs int, c []float32, ldc int, beta float32, pf int, bias []float32, relu bool)

// dotKernel computes r×n dot products along k (r fixed by the kernel),
// taking the rows of b four (AVX2) or eight (AVX-512) at a time, and
// stores them through the epilogue that bias and flags describe (see
// Epilogue; flags holds dotReLU and dotAdd):
//
//	for i < r, j < n: dst[i*ldd+j] = epilogue(Σ_{p<k} a[i*lda+p] · b[j*ldb+p])
//
// k is a positive multiple of the set's dotK and n of 4; bias is nil or
// holds n values. It serves op(B) = Bᵀ in the skinny path, where B's rows
// are contiguous along k. Each kernel of a set sums a row's products in
// the same order whatever its number of rows, so that a row's results do
// not depend on the rows computed with it.
type dotKernel func(k int, a []float32, lda int, b []float32, ldb int, n int, dst []float32, ldd int, bias []float32, flags int)

// The flags of a dotKernel's epilogue.
const (
	dotReLU = 1 << iota
	dotAdd
)

// Epilogue is what Dots makes of each dot product s of column j before it
// stores it in C: v = s + Bias[j] when Bias is set, then max(v, 0) when
// ReLU is, then v + C's value before when Add is. The kernels apply it as
// they store their sums, so a layer's bias, activation and residual sum
// cost no pass of their own over the results.
type Epilogue struct {
	Bias      []float32
	ReLU, Add bool
}

// flags returns ep's ReLU and Add as a dotKernel's flags.
func (ep Epilogue) flags() int {
	f := 0
	if ep.ReLU {
		f |= dotReLU
	}
	if ep.Add {
		f |= dotAdd
	}
	return f
}

// apply returns s through ep for column j, whose value in C was old.
func (ep Epilogue) apply(s float32, j int, old float32) float32 {
	if ep.Bias != nil {
		s += ep.Bias[j]
	}
	if ep.ReLU {
		s = max(s, 0)
	}
	if ep.Add {
		s += old
	}
	return s
}

// axpyKernel updates r rows of C with four rows of B (r fixed by the
// kernel):
//
//	for i < r, j < n: c[i*ldc+j] += Σ_{q<4} a[i*4+q] · b[q*ldb+j]
//
// n is a positive multiple of 8. It serves products of at most len(axpy)
// rows with op(B) = B, reading B front to back once.
type axpyKernel func(n int, a, b []float32, ldb int, c []float32, ldc int)

// kernelSet is one implementation of the micro-kernels with its block sizes.
type kernelSet struct {
	name   string
	mr, nr int           // largest tile
	kern   []microKernel // kern[r-1] computes r×nr tiles, 1 ≤ r ≤ mr
	dot    []dotKernel   // dot[r-1] computes r rows of dot products; nil if none
	dotK   int           // the dot kernels take k in multiples of dotK
	axpy   []axpyKernel  // axpy[r-1] updates r rows of C; nil if none
	// Packing kernels, nil where the Go loops serve: packRows6 transposes six
	// rows of A into a panel of ldd rows (see packRows6AVX2), packCols copies
	// an nr-wide strip of B.
	packRows6 func(k int, a []float32, lda int, dst []float32, ldd int, alpha float32)
	packCols  func(k int, b []float32, ldb int, dst []float32)
	// packColsT packs an nr-wide strip of op(B) = Bᵀ, k a multiple of 8.
	packColsT func(k int, b []float32, ldb int, dst []float32)
	// Cache blocking (BLIS's names): a kc×nr panel of B stays in L1 while
	// the mc×kc block of A streams from L2; the kc×nc block of B sits in L3.
	mc, kc, nc int
	// seqRows is the fewest rows whose kernel sums along k in order, one
	// accumulator per element: kernels of fewer rows alternate two sets of
	// accumulators (to hide the FMA latency) and round differently.
	// GemmPacked runs a panel of fewer rows on the seqRows kernel, so that
	// a row's result does not depend on its place among the rows.
	seqRows int
}

// workspace holds one goroutine's packing buffers.
type workspace struct {
	a, b, t []float32
}

// workspaces keeps idle workspaces for reuse: in a sync.Pool, which is
// fast, with a reserve of up to two per core in a free list that a garbage
// collection does not empty (it empties the pool), so that a warm decoding
// step's products do not allocate their buffers again after a collection.
// The reserve is filled first; once full, a Put to it fails without a lock.
var workspaces = wsPool{reserve: freelist.New[workspace](2 * runtime.GOMAXPROCS(0))}

// wsPool is a free list of workspaces.
type wsPool struct {
	pool    sync.Pool
	reserve freelist.List[workspace]
}

// Get returns an idle workspace, or a new one.
func (p *wsPool) Get() *workspace {
	if w, ok := p.pool.Get().(*workspace); ok {
		return w
	}
	if w := p.reserve.Get(); w != nil {
		return w
	}
	return new(workspace)
}

// Put keeps w for reuse.
func (p *wsPool) Put(w *workspace) {
	if !p.reserve.Put(w) {
		p.pool.Put(w)
	}
}

// grow returns s with length n, reallocated with room to spare when it is
// too short: a buffer that serves a product growing step by step (the
// attention over a decoding's positions) is then reallocated a logarithmic
// number of times, not at every step.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

func checkGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic("f32: negative matrix size")
	}
	check := checkMatrix
	if transA {
		check("A", a, k, m, lda)
	} else {
		check("A", a, m, k, lda)
	}
	if transB {
		check("B", b, n, k, ldb)
	} else {
		check("B", b, k, n, ldb)
	}
	check("C", c, m, n, ldc)
}

// checkMatrix panics unless x holds a rows×cols matrix with row stride ld.
func checkMatrix(what string, x []float32, rows, cols, ld int) {
	if ld < max(1, cols) {
		panic("f32: bad leading dimension of " + what)
	}
	if rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
		panic("f32: " + what + " is too short")
	}
}

// gemm is Gemm after the checks, with the kernel set and the number of
// goroutines it may use.
func gemm(ks *kernelSet, procs int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleMatrix(beta, m, n, c, ldc)
		return
	}
	if beta == 0 {
		beta = 0 // -0 becomes +0: the kernels test beta's bits
	}
	if m <= skinnyDotRows && transB && ks.dot != nil {
		skinnyDot(ks, procs, transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if m <= len(ks.axpy) && !transB && n >= 8 {
		skinnyAxpy(ks, procs, transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// For a single block of rows, each packed strip of B would serve one
	// pass of the rows only: read B in place instead, unless the rows of B
	// are so far apart that a strip's k rows cross more pages than the TLB
	// holds and the kernel stalls on every step (packing wins then, from
	// a few dozen rows of A).
	direct := !transB && (m <= skinnyRows || m <= ks.mc && ldb <= directMaxLDB)
	workers := 1
	if procs > 1 && 2*m*n*k >= parallelFlops {
		workers = procs
	}
	if workers == 1 {
		// On the stack: a product on one goroutine allocates nothing.
		var j job
		j.init(ks, 1, direct, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		j.work(0, 1)
		j.done()
		return
	}
	j := new(job)
	j.init(ks, workers, direct, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	j.bar = &barrier{n: workers}
	j.bar.cond.L = &j.bar.mu
	parallelRanges(workers, workers, j.work)
	j.done()
}

// offA is the offset in A of row i of op(A).
func offA(transA bool, i, lda int) int {
	if transA {
		return i
	}
	return i * lda
}

// elemA returns op(A)[i][p].
func elemA(a []float32, transA bool, lda, i, p int) float32 {
	return a[offA(transA, i, lda)+offA(!transA, p, lda)]
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// job is one blocked product (BLIS's loops around the micro-kernel) shared
// by its workers, which take blocks of C from a counter rather than equal
// parts fixed up front: when the cores are shared with other work, the
// workers that run take over the blocks of those that do not.
//
// With op(B) packed, the workers first pack each kc×nc block of op(B)
// together into one buffer, then compute the blocks of C (mc rows by a run
// of strips, each worker packing its own block of A), with a barrier after
// each phase. With B read in place (direct), a block of C is one worker's
// over all of k, and nothing is shared.
type job struct {
	ks                     *kernelSet
	workers                int
	direct, transA, transB bool
	m, n, k                int
	alpha, beta            float32
	a, b, c                []float32
	lda, ldb, ldc          int
	kc, mc, nc             int
	chunks                 int        // runs of strips per block of rows
	shared                 *workspace // its b holds the packed block of op(B)
	next                   atomic.Int64
	bar                    *barrier // nil for one worker
}

func (j *job) init(ks *kernelSet, workers int, direct, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	j.ks, j.workers, j.direct, j.transA, j.transB = ks, workers, direct, transA, transB
	j.m, j.n, j.k, j.alpha, j.beta = m, n, k, alpha, beta
	j.a, j.b, j.c, j.lda, j.ldb, j.ldc = a, b, c, lda, ldb, ldc
	j.kc = min(ks.kc, k)
	if direct && m <= skinnyRows {
		j.kc = min(directKC, k)
	}
	j.mc = min(ks.mc, roundUp(m, ks.mr))
	j.nc = min(ks.nc, roundUp(n, ks.nr))
	if direct {
		j.nc = roundUp(n, ks.nr) // nothing is packed: one block of columns
	}
	// About four blocks of C per worker, where the rows alone do not give
	// as many.
	rowBlocks := (m + j.mc - 1) / j.mc
	strips := j.nc / ks.nr
	j.chunks = max(1, min(strips, (4*workers+rowBlocks-1)/rowBlocks))
	if workers == 1 {
		j.chunks = 1
	}
	if !direct {
		j.shared = workspaces.Get()
		j.shared.b = grow(j.shared.b, j.kc*j.nc)
	}
}

// work is one worker's part (its arguments, a range of workers, are unused).
func (j *job) work(int, int) {
	w := workspaces.Get()
	j.run(w)
	workspaces.Put(w)
}

// done returns the shared buffer to the pool.
func (j *job) done() {
	if j.shared != nil {
		workspaces.Put(j.shared)
	}
}

func (j *job) run(w *workspace) {
	ks := j.ks
	w.a = grow(w.a, j.mc*j.kc)
	w.t = grow(w.t, ks.mr*ks.nr)
	if j.direct {
		w.b = grow(w.b, j.kc*ks.nr)
		j.runDirect(w)
		return
	}
	j.runPacked(w)
}

// take returns the next item of the current phase, or -1 once there are
// count of them taken.
func (j *job) take(count int) int {
	if i := int(j.next.Add(1) - 1); i < count {
		return i
	}
	return -1
}

func (j *job) resetNext() { j.next.Store(0) }

// chunk returns the columns [j0, j1) of run q of the nb-column block.
func (j *job) chunk(q, nb int) (j0, j1 int) {
	nr := j.ks.nr
	width := (nb + nr - 1) / nr
	per := (width + j.chunks - 1) / j.chunks * nr
	return min(q*per, nb), min((q+1)*per, nb)
}

func (j *job) runDirect(w *workspace) {
	rowBlocks := (j.m + j.mc - 1) / j.mc
	for {
		it := j.take(rowBlocks * j.chunks)
		if it < 0 {
			return
		}
		ic := it / j.chunks * j.mc
		mb := min(j.mc, j.m-ic)
		j0, j1 := j.chunk(it%j.chunks, j.n)
		for pc := 0; pc < j.k; pc += j.kc {
			kb := min(j.kc, j.k-pc)
			packA(j.ks, w.a, j.transA, j.a, j.lda, ic, pc, mb, kb, j.alpha)
			j.tiles(w, nil, 0, pc, kb, ic, mb, j0, j1)
		}
	}
}

func (j *job) runPacked(w *workspace) {
	nr := j.ks.nr
	packed := j.shared.b
	rowBlocks := (j.m + j.mc - 1) / j.mc
	for jc := 0; jc < j.n; jc += j.nc {
		nb := min(j.nc, j.n-jc)
		strips := (nb + nr - 1) / nr
		for pc := 0; pc < j.k; pc += j.kc {
			kb := min(j.kc, j.k-pc)
			for s := j.take(strips); s >= 0; s = j.take(strips) {
				packB(j.ks, packed[s*nr*kb:], j.transB, j.b, j.ldb, pc, jc+s*nr, kb, min(nr, nb-s*nr))
			}
			j.bar.wait(j.resetNext)
			lastIC := -1
			for it := j.take(rowBlocks * j.chunks); it >= 0; it = j.take(rowBlocks * j.chunks) {
				ic := it / j.chunks * j.mc
				mb := min(j.mc, j.m-ic)
				if ic != lastIC {
					packA(j.ks, w.a, j.transA, j.a, j.lda, ic, pc, mb, kb, j.alpha)
					lastIC = ic
				}
				j0, j1 := j.chunk(it%j.chunks, nb)
				j.tiles(w, packed, jc, pc, kb, ic, mb, j0, j1)
			}
			j.bar.wait(j.resetNext)
		}
	}
}

// tiles runs the micro-kernels over the rows [ic, ic+mb) and the columns
// [jc+j0, jc+j1) of C for the k block at pc (depth kb), with that block of
// A packed in w.a. The strips of op(B) come from packed (strip s of the
// column block at packed[s·nr·kb:]) or, direct, from B itself, but for a
// last narrow strip, which is packed into w.b.
func (j *job) tiles(w *workspace, packed []float32, jc, pc, kb, ic, mb, j0, j1 int) {
	ks := j.ks
	mr, nr := ks.mr, ks.nr
	bet, pf := j.beta, 0
	if pc > 0 {
		bet = 1
	}
	if j.direct {
		pf = directPrefetch
	}
	for jr := j0; jr < j1; jr += nr {
		cols := min(nr, j1-jr)
		var bp []float32
		bs := nr
		switch {
		case !j.direct:
			bp = packed[jr*kb:]
		case cols == nr:
			bp, bs = j.b[pc*j.ldb+jc+jr:], j.ldb
		default:
			packB(ks, w.b, false, j.b, j.ldb, pc, jc+jr, kb, cols)
			bp = w.b
		}
		for ir := 0; ir < mb; ir += mr {
			r := min(mr, mb-ir)
			ap := w.a[ir*kb:]
			cp := j.c[(ic+ir)*j.ldc+jc+jr:]
			if cols == nr {
				ks.kern[r-1](kb, ap, bp, bs, cp, j.ldc, bet, pf, nil, false)
			} else {
				ks.kern[r-1](kb, ap, bp, nr, w.t, nr, 0, 0, nil, false)
				mergeTile(cp, j.ldc, w.t, nr, r, cols, bet, nil, false)
			}
		}
	}
}

// barrier blocks its n goroutines until all have arrived; the last one to
// arrive runs a function before releasing the others. cond.L must be &mu. A
// nil barrier stands for one goroutine.
type barrier struct {
	n, count, gen int
	mu            sync.Mutex
	cond          sync.Cond
}

func (b *barrier) wait(last func()) {
	if b == nil {
		last()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count++
	if b.count == b.n {
		last()
		b.count = 0
		b.gen++
		b.cond.Broadcast()
		return
	}
	for g := b.gen; g == b.gen; {
		b.cond.Wait()
	}
}

// packA copies the mb×kb block of alpha·op(A) at (ic, pc) into dst as panels
// of mr rows (the last one may be narrower): panel q holds
// dst[q·mr·kb + p·r + i] = alpha·op(A)[ic+q·mr+i][pc+p], r its row count.
func packA(ks *kernelSet, dst []float32, transA bool, a []float32, lda, ic, pc, mb, kb int, alpha float32) {
	mr := ks.mr
	for i0 := 0; i0 < mb; i0 += mr {
		r := min(mr, mb-i0)
		d := dst[i0*kb : i0*kb+r*kb]
		if transA {
			for p := 0; p < kb; p++ {
				src := a[(pc+p)*lda+ic+i0:][:r]
				dp := d[p*r:][:r]
				for i, v := range src {
					dp[i] = alpha * v
				}
			}
			continue
		}
		k0 := 0
		if r == mr && ks.packRows6 != nil && kb >= 8 {
			// Six rows at a time, eight columns per step.
			k0 = kb &^ 7
			for g := 0; g < r; g += 6 {
				ks.packRows6(k0, a[(ic+i0+g)*lda+pc:], lda, d[g:], r, alpha)
			}
		}
		for i := 0; i < r; i++ {
			src := a[(ic+i0+i)*lda+pc+k0:][:kb-k0]
			dp := d[k0*r:]
			for p, v := range src {
				dp[p*r+i] = alpha * v
			}
		}
	}
}

// packB copies the kb×nb block of op(B) at (pc, jc) into dst as panels of nr
// columns, the last one padded with zeros: panel q holds
// dst[q·nr·kb + p·nr + j] = op(B)[pc+p][jc+q·nr+j].
func packB(ks *kernelSet, dst []float32, transB bool, b []float32, ldb, pc, jc, kb, nb int) {
	nr := ks.nr
	for j0 := 0; j0 < nb; j0 += nr {
		w := min(nr, nb-j0)
		d := dst[j0*kb : j0*kb+nr*kb]
		if transB {
			if w < nr {
				clear(d)
			}
			k0 := 0
			if w == nr && ks.packColsT != nil && kb >= 8 {
				k0 = kb &^ 7
				ks.packColsT(k0, b[(jc+j0)*ldb+pc:], ldb, d)
			}
			for j := 0; j < w; j++ {
				src := b[(jc+j0+j)*ldb+pc+k0:][:kb-k0]
				dp := d[k0*nr:]
				for p, v := range src {
					dp[p*nr+j] = v
				}
			}
			continue
		}
		src := b[pc*ldb+jc+j0:]
		if w == nr && ks.packCols != nil {
			ks.packCols(kb, src, ldb, d)
			continue
		}
		for p := 0; p < kb; p++ {
			dp := d[p*nr : p*nr+nr]
			copy(dp, src[p*ldb:][:w])
			clear(dp[w:])
		}
	}
}

// mergeTile writes the rows×cols corner of the tile t (row stride ldt) into
// C: c = t if beta is 0, else c = beta·c + t, then the epilogue of
// microKernel (bias, if not nil, holds cols entries).
func mergeTile(c []float32, ldc int, t []float32, ldt, rows, cols int, beta float32, bias []float32, relu bool) {
	for i := 0; i < rows; i++ {
		cr := c[i*ldc:][:cols]
		tr := t[i*ldt:][:cols]
		if beta == 0 && bias == nil && !relu {
			copy(cr, tr)
			continue
		}
		for j, v := range tr {
			if beta != 0 {
				v += beta * cr[j]
			}
			cr[j] = epilogue(v, bias, j, relu)
		}
	}
}

// epilogue returns v + bias[j] (if bias is not nil), then max(v, 0) if
// relu, keeping NaN as the kernels do.
func epilogue(v float32, bias []float32, j int, relu bool) float32 {
	if bias != nil {
		v += bias[j]
	}
	if relu && v < 0 {
		v = 0
	}
	return v
}

// skinny is a product of few rows, shared out by columns among the
// goroutines of skinnyAxpy or skinnyDot.
type skinny struct {
	ks            *kernelSet
	m, n, k       int
	beta          float32
	a, b, c       []float32
	lda, ldb, ldc int
	blocks        int // column blocks: of 8 (axpy) or 4 (dot) columns
}

// start computes the column blocks [0, s.blocks) with s.dot or s.axpy, on
// several goroutines when B is large enough that one core would not read
// it as fast as several (skinnyParallelBytes) or the product is large,
// unless a helper has lately kept the caller waiting (see helpersLate).
// The goroutines claim chunks of blocks as they come free, so that one
// that starts late (its core taken by another process) leaves its share to
// the others.
func (s *skinny) start(procs int, dot bool) {
	bytes := 4 * s.n * s.k
	if procs == 1 || s.blocks == 1 || bytes < skinnyParallelBytes && 2*s.m*s.n*s.k < parallelFlops || !startHelpers() || bytes < soloBytes && helpersLate() {
		s.run(dot, 0, s.blocks)
		return
	}
	// Chunks of about skinnyChunkBytes of B for the dot kernels, which
	// read whole rows of B; the axpy kernels read a strip of every row, so
	// their chunks stay wide: four per goroutine.
	chunk := max(1, skinnyChunkBytes/(16*s.k))
	if !dot {
		workers := min(procs, s.blocks)
		chunk = (s.blocks + 4*workers - 1) / (4 * workers)
	}
	s.share(dot, chunk)
}

// Sharing of the skinny products.
const (
	// skinnyParallelBytes is the size of B from which a skinny product
	// is shared out whatever its flops: its cost is reading B, and
	// several cores read faster than one.
	skinnyParallelBytes = 64 << 10

	// skinnyChunkBytes is the size of the rows of B in one chunk of the
	// dot path.
	skinnyChunkBytes = 32 << 10
)

func (s *skinny) run(dot bool, lo, hi int) {
	if dot {
		s.dot(lo, hi)
	} else {
		s.axpy(lo, hi)
	}
}

// skinnyAxpy computes a product of one to three rows with op(B) = B (a
// decoding step times a weight matrix stored k×n): C is scaled by beta, then
// the axpy kernels add four rows of B at a time, so that B is read once,
// front to back, in sequential streams, while C's rows stay in cache. The
// goroutines share the columns.
func skinnyAxpy(ks *kernelSet, procs int, transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleMatrix(beta, m, n, c, ldc)
	// coef holds alpha·op(A) in groups of four columns, the layout the
	// kernels take: group g is coef[g·4m + 4i + l] = alpha·op(A)[i][4g+l],
	// zero past k.
	w0 := workspaces.Get()
	groups := (k + 3) / 4
	coef := grow(w0.a, groups*4*m)
	w0.a = coef
	clear(coef)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			coef[p/4*4*m+4*i+p%4] = alpha * elemA(a, transA, lda, i, p)
		}
	}
	sk := skinny{ks: ks, m: m, n: n, k: k, a: coef, b: b, c: c, ldb: ldb, ldc: ldc, blocks: n / 8}
	sk.start(procs, false)
	workspaces.Put(w0)
}

// axpy computes the columns [8·lo, 8·hi) of C, and those past the last
// block of 8 if hi is the last block.
func (s *skinny) axpy(lo, hi int) {
	m, k, b, c, ldb, ldc := s.m, s.k, s.b, s.c, s.ldb, s.ldc
	kern := s.ks.axpy[m-1]
	j0, w := 8*lo, 8*(hi-lo)
	if hi == s.blocks {
		w = s.n - j0
	}
	w8 := w &^ 7
	var one []float32 // coefficients for one row of B, for k's last rows
	if k%4 != 0 {
		ws := workspaces.Get()
		defer workspaces.Put(ws)
		ws.t = grow(ws.t, 4*m)
		one = ws.t
	}
	for g := 0; 4*g < k; g++ {
		p := 4 * g
		cg := s.a[g*4*m:][:4*m]
		if p+4 <= k {
			kern(w8, cg, b[p*ldb+j0:], ldb, c[j0:], ldc)
		} else {
			// The last rows of B: a stride of 0 reads row p+l for all four
			// coefficients, of which only the first is nonzero.
			for l := 0; p+l < k; l++ {
				clear(one)
				for i := 0; i < m; i++ {
					one[4*i] = cg[4*i+l]
				}
				kern(w8, one, b[(p+l)*ldb+j0:], 0, c[j0:], ldc)
			}
		}
		for i := 0; i < m; i++ {
			cr := c[i*ldc+j0+w8 : i*ldc+j0+w]
			for l := 0; l < 4 && p+l < k; l++ {
				br := b[(p+l)*ldb+j0+w8:][:len(cr)]
				for j, v := range br {
					cr[j] += cg[4*i+l] * v
				}
			}
		}
	}
}

// skinnyDot computes a product of few rows with op(B) = Bᵀ (B stored n×k, a
// weight matrix as in y = x·Wᵀ): dot kernels take four or eight rows of B
// at a time for every group of up to three rows of A, so each row of B is
// read once from memory.
func skinnyDot(ks *kernelSet, procs int, transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	w0 := workspaces.Get()
	if transA || alpha != 1 {
		// Copy alpha·op(A) as an m×k row-major matrix.
		w0.a = grow(w0.a, m*k)
		for i := 0; i < m; i++ {
			d := w0.a[i*k:][:k]
			for p := range d {
				d[p] = alpha * elemA(a, transA, lda, i, p)
			}
		}
		a, lda = w0.a, k
	}
	sk := skinny{ks: ks, m: m, n: n, k: k, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc, blocks: (n + 3) / 4}
	sk.start(procs, true)
	workspaces.Put(w0)
}

// Dots computes C = ep(A·Bᵀ): c[i·ldc+j] = ep(Σ_{p<k} a[i·lda+p]·b[j·ldb+p])
// for i < m and j < n (see Epilogue), on the calling goroutine, with the
// kernels the skinny products of few rows use (B, a weight matrix stored
// n×k, read once): for callers that share the columns of several products
// out among goroutines themselves, such as internal/half's batches. It
// calls the assembly directly rather than through a function value, so C
// does not escape: a caller's result buffer on its stack stays there. On
// the portable kernel set the sums run in Go, four partial sums per
// product.
func Dots(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, ep Epilogue) {
	checkGemm(false, true, m, n, k, a, lda, b, ldb, c, ldc)
	if ep.Bias != nil && len(ep.Bias) < n {
		panic("f32: bias too short")
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 { // every sum is 0
		for i := range m {
			cr := c[i*ldc:][:n]
			for j, v := range cr {
				cr[j] = ep.apply(0, j, v)
			}
		}
		return
	}
	ks := pickKernels()
	for i0 := 0; i0 < m; i0 += dotRows {
		dotsInto(ks, min(dotRows, m-i0), n, k, a[i0*lda:], lda, b, ldb, c[i0*ldc:], ldc, ep)
	}
}

// dotsInto computes c[i·ldc+j] = ep(Σ_{p<k} a[i·lda+p]·b[j·ldb+p]) for
// i < r ≤ dotRows and j < n. The kernels take the columns in whole groups
// of four and store them through ep themselves when they take all of k;
// otherwise their sums go through a tile on the stack, and Go adds the
// rest of k and applies ep. Each column past the groups of four is the
// first of a group that reads its row four times (a stride of 0), so that
// every column of a product sums in the kernels' order, wherever it lies.
// Without kernels (or with k below their step) Go sums each product in
// four partial sums.
func dotsInto(ks *kernelSet, r, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, ep Epilogue) {
	k8 := 0
	if ks.dot != nil && k >= ks.dotK {
		k8 = k &^ (ks.dotK - 1)
	}
	n4 := 0
	if k8 > 0 {
		n4 = n &^ 3
	}
	switch {
	case n4 > 0 && k8 == k:
		dotNoEscape(ks, r, k, a, lda, b, ldb, n4, c, ldc, ep.Bias, ep.flags())
	case n4 > 0:
		var tile [dotRows * dotChunk]float32
		for j0 := 0; j0 < n4; j0 += dotChunk {
			w := min(dotChunk, n4-j0)
			dotNoEscape(ks, r, k8, a, lda, b[j0*ldb:], ldb, w, tile[:], dotChunk, nil, 0)
			for i := range r {
				ar, cr, tr := a[i*lda:][:k], c[i*ldc+j0:][:w], tile[i*dotChunk:][:w]
				for j, s := range tr {
					br := b[(j0+j)*ldb:][:k]
					for p := k8; p < k; p++ {
						s += ar[p] * br[p]
					}
					cr[j] = ep.apply(s, j0+j, cr[j])
				}
			}
		}
	}
	for j := n4; j < n; j++ {
		br := b[j*ldb:][:k]
		var one [dotRows * 4]float32
		if k8 > 0 {
			dotNoEscape(ks, r, k8, a, lda, br, 0, 4, one[:], 4, nil, 0)
		}
		for i := range r {
			ar := a[i*lda:][:k]
			s := one[4*i]
			if k8 == 0 {
				s = Dot4(ar, br)
			} else {
				for p := k8; p < k; p++ {
					s += ar[p] * br[p]
				}
			}
			c[i*ldc+j] = ep.apply(s, j, c[i*ldc+j])
		}
	}
}

// Dot4 returns Σ x[p]·y[p] over p < len(x) in four partial sums, of the
// p ≡ 0, 1, 2, 3 (mod 4), added pairwise: the portable loop of Dots, and
// of internal/half's binary16 products.
func Dot4(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	p := 0
	for ; p+4 <= len(x); p += 4 {
		s0 += x[p] * y[p]
		s1 += x[p+1] * y[p+1]
		s2 += x[p+2] * y[p+2]
		s3 += x[p+3] * y[p+3]
	}
	for ; p < len(x); p++ {
		s0 += x[p] * y[p]
	}
	return (s0 + s1) + (s2 + s3)
}

// Chunks of the dot path: one kernel call computes up to dotChunk columns
// of a group of rows. With more rows than one kernel takes, the chunk's rows
// of B (at most dotReuseBytes) are read from memory for the first group
// and from cache for the others.
const (
	dotRows       = 3 // the most rows one dot kernel takes, in every kernel set
	dotChunk      = 64
	dotReuseBytes = 24 << 10
)

// dot computes the columns [4·lo, min(4·hi, n)) of C: C = β·C + A·Bᵀ,
// with β = 0 or 1 through the kernels' epilogue (a bias copied into C
// first, as Linear does, is added there) and any other β by scaling the
// chunk of C first.
func (s *skinny) dot(lo, hi int) {
	const nb = 4
	m, k, a, b, c, lda, ldb, ldc := s.m, s.k, s.a, s.b, s.c, s.lda, s.ldb, s.ldc
	width := dotChunk
	if m > dotRows {
		width = min(max(dotReuseBytes/(4*k)&^3, nb), dotChunk)
	}
	ep := Epilogue{Add: s.beta != 0}
	j1 := min(nb*hi, s.n)
	for jc := nb * lo; jc < j1; jc += width {
		cols := min(width, j1-jc)
		if s.beta != 0 && s.beta != 1 {
			scaleMatrix(s.beta, m, cols, c[jc:], ldc)
		}
		for i0 := 0; i0 < m; i0 += dotRows {
			dotsInto(s.ks, min(dotRows, m-i0), cols, k, a[i0*lda:], lda, b[jc*ldb:], ldb, c[i0*ldc+jc:], ldc, ep)
		}
	}
}

// ranger is work over [0, n) whose ranges run independently of each other.
type ranger interface{ runRange(lo, hi int) }

// rangeJob is one range handed to a pooled worker.
type rangeJob struct {
	r      ranger
	lo, hi int
	wg     *sync.WaitGroup
}

var (
	rangeJobs    = make(chan rangeJob)
	startWorkers sync.Once
)

// runRanges splits [0, n) into workers contiguous ranges and runs r on them:
// each range goes to an idle pooled worker when there is one and runs on
// the calling goroutine otherwise, so nested or concurrent calls never wait
// for a busy pool, and the hand-off allocates nothing (decoding steps stay
// allocation-free). The last range always runs on the caller.
func runRanges(workers, n int, r ranger, wg *sync.WaitGroup) {
	startWorkers.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for j := range rangeJobs {
					j.r.runRange(j.lo, j.hi)
					j.wg.Done()
				}
			}()
		}
	})
	for w := range workers - 1 {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Add(1)
		select {
		case rangeJobs <- rangeJob{r, lo, hi, wg}:
		default:
			r.runRange(lo, hi)
			wg.Done()
		}
	}
	r.runRange((workers-1)*n/workers, n)
	wg.Wait()
}

// parallelRanges splits [0, n) into workers contiguous ranges and runs f on
// each, the last on the calling goroutine.
func parallelRanges(workers, n int, f func(lo, hi int)) {
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers - 1 {
		wg.Go(func() { f(w*n/workers, (w+1)*n/workers) })
	}
	f((workers-1)*n/workers, n)
	wg.Wait()
}

// selfCheck reports whether ks reproduces goKernels exactly on small
// products that exercise every row count of its micro-kernels, edge strips,
// packed and in-place B, the dot kernels, the packing kernels and the fused
// epilogue of GemmPacked (bias, beta and ReLU). The
// entries are small integers, so every summation order gives the same
// result.
func selfCheck(ks *kernelSet) bool {
	type shape struct {
		transA, transB bool
		m, n, k        int
	}
	var shapes []shape
	for r := 1; r <= max(ks.mr, len(ks.dot)); r++ {
		shapes = append(shapes, shape{false, false, r, ks.nr + 3, 13}, shape{false, true, r, 7, 21}, shape{false, true, r, 13, 40})
	}
	shapes = append(shapes,
		shape{false, false, ks.mc + 1, 2*ks.nr + 5, 19},
		shape{true, true, ks.mc + ks.mr, ks.nr - 1, 9},
		shape{false, true, ks.mc + 1, ks.nr + 3, 17},
		shape{false, false, ks.mc + ks.mr, ks.nr, 2})
	for _, s := range shapes {
		ra, ca, rb, cb := s.m, s.k, s.k, s.n
		if s.transA {
			ra, ca = ca, ra
		}
		if s.transB {
			rb, cb = cb, rb
		}
		lda, ldb, ldc := ca+1, cb+2, s.n+3
		a, b, c := make([]float32, ra*lda), make([]float32, rb*ldb), make([]float32, s.m*ldc)
		smallInts(a, 7, 5, 2)
		smallInts(b, 3, 7, 3)
		smallInts(c, 1, 9, 4)
		c0 := append([]float32(nil), c...)
		want := append([]float32(nil), c...)
		gemm(&goKernels, 1, s.transA, s.transB, s.m, s.n, s.k, 2, a, lda, b, ldb, 0.5, want, ldc)
		gemm(ks, 1, s.transA, s.transB, s.m, s.n, s.k, 2, a, lda, b, ldb, 0.5, c, ldc)
		for i := range c {
			if c[i] != want[i] {
				return false
			}
		}
		if s.transA {
			continue
		}
		// The fused product, with its epilogue.
		bias := make([]float32, s.n)
		for j := range bias {
			bias[j] = float32(j%5 - 3)
		}
		copy(c, c0)
		copy(want, c0)
		gemmPacked(1, s.m, a, lda, packBWith(&goKernels, s.transB, s.k, s.n, b, ldb), 0.5, want, ldc, bias, true)
		gemmPacked(1, s.m, a, lda, packBWith(ks, s.transB, s.k, s.n, b, ldb), 0.5, c, ldc, bias, true)
		for i := range c {
			if c[i] != want[i] {
				return false
			}
		}
	}
	return ks.dot == nil || dotEpiloguesCheck(ks)
}

// dotEpiloguesCheck reports whether ks's dot kernels store through the
// epilogues of Dots (bias, ReLU, added to C) what Go's loops store, on
// small integers (exact in any order), for every row count.
func dotEpiloguesCheck(ks *kernelSet) bool {
	const n, k = 13, 48
	a, b, bias := make([]float32, dotRows*k), make([]float32, n*k), make([]float32, n)
	smallInts(a, 5, 7, 3)
	smallInts(b, 3, 5, 2)
	smallInts(bias, 1, 7, 3)
	c, want := make([]float32, dotRows*n), make([]float32, dotRows*n)
	for r := 1; r <= dotRows; r++ {
		for _, ep := range []Epilogue{{Bias: bias, ReLU: true}, {Add: true}, {Bias: bias, ReLU: true, Add: true}} {
			smallInts(c, 1, 9, 4)
			copy(want, c)
			dotsInto(&goKernels, r, n, k, a, k, b, k, want, n, ep)
			dotsInto(ks, r, n, k, a, k, b, k, c, n, ep)
			if !slices.Equal(c, want) {
				return false
			}
		}
	}
	return true
}

// smallInts fills x with x[i] = i·mul mod m − off: small integers, whose
// products sum exactly in any order.
func smallInts(x []float32, mul, m, off int) {
	for i := range x {
		x[i] = float32(i*mul%m - off)
	}
}

func scaleMatrix(beta float32, m, n int, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
