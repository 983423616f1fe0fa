package f32

import (
	"runtime"
	"sync/atomic"
)

// PackedB is a k×n matrix op(B) packed once for the products that reuse it,
// such as the weights of a convolution at inference: GemmPacked then reads
// it as it is, where Gemm would pack op(B) again on every call. It holds
// op(B) in the column strips that the micro-kernels read, nr columns wide
// (the last one padded with zeros) and k deep:
//
//	data[s·nr·k + p·nr + j] = op(B)[p][s·nr + j]
//
// so that the strip of any block of rows [p0, p0+kb) is contiguous. nr is
// that of the kernels chosen when it was packed. A PackedB is read-only and
// safe for concurrent use.
type PackedB struct {
	ks   *kernelSet
	k, n int
	data []float32 // (strips, k, nr)
}

// PackB packs op(B), k×n: B is (k, n) with row stride ldb, or (n, k) if
// transB. It panics, with a message prefixed "f32: ", on negative sizes, a
// short stride or a short slice.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	if k < 0 || n < 0 {
		panic("f32: negative matrix size")
	}
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	if ldb < max(1, cols) {
		panic("f32: bad leading dimension of B")
	}
	if rows > 0 && cols > 0 && len(b) < (rows-1)*ldb+cols {
		panic("f32: B is too short")
	}
	return packBWith(pickKernels(), transB, k, n, b, ldb)
}

func packBWith(ks *kernelSet, transB bool, k, n int, b []float32, ldb int) *PackedB {
	strips := (n + ks.nr - 1) / ks.nr
	p := &PackedB{ks: ks, k: k, n: n, data: make([]float32, strips*ks.nr*k)}
	if k > 0 && n > 0 {
		packB(ks, p.data, transB, b, ldb, 0, 0, k, n)
	}
	return p
}

// K returns the rows of op(B), the depth of the products.
func (p *PackedB) K() int { return p.k }

// N returns the columns of op(B).
func (p *PackedB) N() int { return p.n }

// GemmPacked computes, for A (m, k) with row stride lda and the packed
// op(B) (k, n),
//
//	C[i][j] = f(Σ_{p<k} A[i][p]·op(B)[p][j] + beta·C[i][j] + bias[j])
//
// with f the ReLU max(·, 0) if relu and the identity otherwise, and bias
// (n entries) nil for none. This is a layer's product with its epilogue
// fused in: the bias and the ReLU are applied to each tile of C in
// registers, before its single store, rather than in passes over C
// afterwards; with beta = 1 and C holding a residual, the sum takes it too.
// When beta is 0, C is not read. A must not overlap C.
//
// The parallelism and the blocking are Gemm's; what differs is that op(B)
// is never packed, and that a product with few rows (as a convolution on a
// 7×7 grid) shares out its columns: its rows of A are packed once, by all
// goroutines together, and then read by them all. It panics, with a
// message prefixed "f32: ", on bad sizes, strides or slices.
func GemmPacked(m int, a []float32, lda int, b *PackedB, beta float32, c []float32, ldc int, bias []float32, relu bool) {
	if m < 0 {
		panic("f32: negative matrix size")
	}
	checkMatrix("A", a, m, b.k, lda)
	checkMatrix("C", c, m, b.n, ldc)
	if bias != nil && len(bias) < b.n {
		panic("f32: bias is too short")
	}
	gemmPacked(runtime.GOMAXPROCS(0), m, a, lda, b, beta, c, ldc, bias, relu)
}

// Tuning constants of GemmPacked.
const (
	// sharedRowBlocks is the number of blocks of rows per goroutine below
	// which GemmPacked also shares out the columns, with A packed once
	// for all: with fewer, blocks of rows alone would leave goroutines idle
	// at the end.
	sharedRowBlocks = 4

	// packedItems is the number of blocks of C per goroutine that the
	// shared mode aims at.
	packedItems = 4
)

func gemmPacked(procs, m int, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, bias []float32, relu bool) {
	gemmPackedRes(procs, m, a, lda, pb, beta, nil, 0, c, ldc, bias, relu)
}

// gemmPackedRes is gemmPacked whose C starts as R (res, row stride ldr)
// instead of beta·C when res is not nil (GemmPackedAdd).
func gemmPackedRes(procs, m int, a []float32, lda int, pb *PackedB, beta float32, res []float32, ldr int, c []float32, ldc int, bias []float32, relu bool) {
	n, k := pb.n, pb.k
	if m == 0 || n == 0 {
		return
	}
	if beta == 0 {
		beta = 0 // -0 becomes +0: the kernels test beta's bits
	}
	if res != nil {
		beta = 1 // each tile of R is copied into C before the first product adds to it
	}
	if k == 0 {
		if res != nil {
			copyTile(c, ldc, res, ldr, m, n)
		}
		for i := 0; i < m; i++ {
			cr := c[i*ldc:][:n]
			for j := range cr {
				var v float32
				if beta != 0 {
					v = beta * cr[j]
				}
				cr[j] = epilogue(v, bias, j, relu)
			}
		}
		return
	}
	workers := 1
	if procs > 1 && 2*m*n*k >= parallelFlops {
		workers = procs
	}
	var j packedJob
	j.init(workers, m, a, lda, pb, beta, c, ldc, bias, relu)
	j.res, j.ldr = res, ldr
	if workers == 1 {
		w := workspaces.Get()
		j.run(w)
		workspaces.Put(w)
		return
	}
	if j.shared {
		s := workspaces.Get()
		s.a = grow(s.a, roundUp(m, j.ks.mr)*k)
		j.sharedA = s.a
		defer workspaces.Put(s)
		j.bar = &barrier{n: workers}
		j.bar.cond.L = &j.bar.mu
	}
	parallelRanges(workers, workers, j.work)
}

// packedJob is one GemmPacked product shared by its workers, which take
// blocks of C from a counter (as job does). In the private mode, a block
// is mc rows by all the columns, and each worker packs its rows of A block
// by block of k. In the shared mode (few rows), the workers first pack all
// of A together, panel by panel, into sharedA, then meet at a barrier and
// take blocks of mc rows by a run of strips.
type packedJob struct {
	ks        *kernelSet
	m, n, k   int
	a         []float32
	lda       int
	b         []float32 // PackedB.data
	beta      float32
	c         []float32
	ldc       int
	bias      []float32
	relu      bool
	res       []float32 // R of GemmPackedAdd, copied into C tile by tile; nil for none
	ldr       int
	mc, kc    int
	rowBlocks int
	chunks    int  // runs of strips per block of rows
	shared    bool // A is packed once, into sharedA
	sharedA   []float32
	next      atomic.Int64
	bar       *barrier
}

func (j *packedJob) init(workers, m int, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int, bias []float32, relu bool) {
	ks := pb.ks
	j.ks, j.m, j.n, j.k = ks, m, pb.n, pb.k
	j.a, j.lda, j.b, j.beta, j.c, j.ldc, j.bias, j.relu = a, lda, pb.data, beta, c, ldc, bias, relu
	j.kc = min(ks.kc, j.k)
	// Blocks of rows of about equal size, as many as a multiple of the
	// workers, so that they finish together.
	blocks := (m + ks.mc - 1) / ks.mc
	blocks = roundUp(blocks, workers)
	j.mc = roundUp((m+blocks-1)/blocks, ks.mr)
	j.rowBlocks = (m + j.mc - 1) / j.mc
	j.chunks = 1
	if workers > 1 && j.rowBlocks < sharedRowBlocks*workers {
		j.shared = true
		strips := (j.n + ks.nr - 1) / ks.nr
		j.chunks = max(1, min(strips, (packedItems*workers+j.rowBlocks-1)/j.rowBlocks))
	}
}

// work is one worker's part (its arguments, a range of workers, are unused).
func (j *packedJob) work(int, int) {
	w := workspaces.Get()
	j.run(w)
	workspaces.Put(w)
}

func (j *packedJob) run(w *workspace) {
	ks := j.ks
	w.t = grow(w.t, ks.mr*ks.nr)
	if !j.shared {
		w.a = grow(w.a, j.mc*j.kc)
		for it := j.take(j.rowBlocks); it >= 0; it = j.take(j.rowBlocks) {
			ic := it * j.mc
			mb := min(j.mc, j.m-ic)
			for pc := 0; pc < j.k; pc += j.kc {
				kb := min(j.kc, j.k-pc)
				j.pack(w.a, ic, pc, mb, kb)
				j.tiles(w, w.a, kb, pc, kb, ic, mb, 0, j.n)
			}
		}
		return
	}
	// Phase 1: the panels of A, each over all of k.
	mr := ks.mr
	panels := (j.m + mr - 1) / mr
	for q := j.take(panels); q >= 0; q = j.take(panels) {
		j.pack(j.sharedA[q*mr*j.k:], q*mr, 0, min(mr, j.m-q*mr), j.k)
	}
	j.bar.wait(j.resetNext)
	// Phase 2: blocks of rows by runs of strips.
	items := j.rowBlocks * j.chunks
	for it := j.take(items); it >= 0; it = j.take(items) {
		ic := it / j.chunks * j.mc
		mb := min(j.mc, j.m-ic)
		j0, j1 := j.chunk(it % j.chunks)
		for pc := 0; pc < j.k; pc += j.kc {
			kb := min(j.kc, j.k-pc)
			// Panel q of the block starts at sharedA[(ic+q·mr)·k], and its
			// rows [pc, pc+kb) at r·pc further (r its rows).
			j.tiles(w, j.sharedA[ic*j.k:], j.k, pc, kb, ic, mb, j0, j1)
		}
	}
}

// pack packs the mb×kb block of A at (ic, pc) into dst as packA does, but
// for a last panel of fewer than seqRows rows, which it pads with zero rows
// to seqRows (see kernelSet.seqRows).
func (j *packedJob) pack(dst []float32, ic, pc, mb, kb int) {
	ks := j.ks
	full := mb - mb%ks.mr
	r := mb - full
	if r == 0 || r >= ks.seqRows {
		packA(ks, dst, false, j.a, j.lda, ic, pc, mb, kb, 1)
		return
	}
	if full > 0 {
		packA(ks, dst, false, j.a, j.lda, ic, pc, full, kb, 1)
	}
	rp := ks.seqRows
	d := dst[full*kb:][:rp*kb]
	clear(d)
	for i := 0; i < r; i++ {
		src := j.a[(ic+full+i)*j.lda+pc:][:kb]
		for p, v := range src {
			d[p*rp+i] = v
		}
	}
}

func (j *packedJob) take(count int) int {
	if i := int(j.next.Add(1) - 1); i < count {
		return i
	}
	return -1
}

func (j *packedJob) resetNext() { j.next.Store(0) }

// chunk returns the columns [j0, j1) of run q of the strips.
func (j *packedJob) chunk(q int) (j0, j1 int) {
	nr := j.ks.nr
	strips := (j.n + nr - 1) / nr
	per := (strips + j.chunks - 1) / j.chunks * nr
	return min(q*per, j.n), min((q+1)*per, j.n)
}

// tiles runs the micro-kernels over the rows [ic, ic+mb) and the columns
// [j0, j1) of C for the k block at pc (depth kb). The block's panels of A
// are in ap, panel q at ap[q·mr·depth + r·pc'] with pc' = pc if A is packed
// over all of k (depth k) and 0 if only this block is (depth kb), r the
// panel's rows.
func (j *packedJob) tiles(w *workspace, ap []float32, depth, pc, kb, ic, mb, j0, j1 int) {
	ks := j.ks
	mr, nr := ks.mr, ks.nr
	bet := j.beta
	if pc > 0 {
		bet = 1
	}
	last := pc+kb == j.k
	off := 0
	if depth == j.k {
		off = pc
	}
	if pc == 0 && j.res != nil { // C starts as R, copied row by row over the block
		copyTile(j.c[ic*j.ldc+j0:], j.ldc, j.res[ic*j.ldr+j0:], j.ldr, mb, j1-j0)
	}
	for jr := j0; jr < j1; jr += nr {
		cols := min(nr, j1-jr)
		bp := j.b[jr*j.k+pc*nr:]
		var bias []float32
		relu := false
		if last {
			relu = j.relu
			if j.bias != nil {
				bias = j.bias[jr : jr+cols]
			}
		}
		for ir := 0; ir < mb; ir += mr {
			r := min(mr, mb-ir)
			rp := max(r, ks.seqRows) // the panel's rows as packed
			a := ap[ir*depth+rp*off:]
			cp := j.c[(ic+ir)*j.ldc+jr:]
			if cols == nr && rp == r {
				ks.kern[r-1](kb, a, bp, nr, cp, j.ldc, bet, 0, bias, relu)
			} else {
				ks.kern[rp-1](kb, a, bp, nr, w.t, nr, 0, 0, nil, false)
				mergeTile(cp, j.ldc, w.t, nr, r, cols, bet, bias, relu)
			}
		}
	}
}
