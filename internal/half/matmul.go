package half

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/radgen/radgen/internal/f32"
)

// Weights is an N×K weight matrix, as PyTorch's Linear stores its weight
// (out × in): either a float32 view (F32, row-major with row stride LD; LD
// == 0 means K), or a binary16 copy made by NewWeights.
//
// A binary16 copy is laid out for the kernels: the rows in groups of four
// ("panels"), each interleaved in blocks of eight columns, zero-padded to
// whole groups and blocks, so that a product reads one sequential stream.
// At returns its values.
type Weights struct {
	N, K, LD int
	F32      []float32
	f16      []uint16 // panels: [⌈N/4⌉][⌈K/8⌉][4][8]
}

// NewWeights returns a binary16 copy of the N×K row-major float32 matrix
// src, each value rounded to nearest even (see Encode): a snapshot, which
// later changes to src do not reach.
func NewWeights(n, k int, src []float32) Weights {
	if n < 0 || k < 0 {
		panic("half: negative size")
	}
	w := Weights{N: n, K: k, LD: k, f16: make([]uint16, roundUp(n, 4)*roundUp(k, 8))}
	w.Update(src)
	return w
}

// Float32 wraps the N×K row-major float32 matrix data (not copied).
func Float32(n, k int, data []float32) Weights {
	return Weights{N: n, K: k, LD: k, F32: data}
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// kp is the padded row length of the panels.
func (w *Weights) kp() int { return roundUp(w.K, 8) }

// Half reports whether the weights are a binary16 copy.
func (w Weights) Half() bool { return w.f16 != nil }

// Bytes returns the size of the stored matrix in bytes.
func (w Weights) Bytes() int {
	if w.f16 != nil {
		return 2 * len(w.f16)
	}
	return 4 * w.N * w.K
}

func (w *Weights) ld() int {
	if w.LD == 0 {
		return w.K
	}
	return w.LD
}

// panelIndex is the position of W[j][p] in the panels.
func (w *Weights) panelIndex(j, p int) int {
	return (j/4)*4*w.kp() + (p/8)*32 + (j%4)*8 + p%8
}

// At returns W[j][p] as stored (widened to float32 for a binary16 copy).
func (w Weights) At(j, p int) float32 {
	if j < 0 || j >= w.N || p < 0 || p >= w.K {
		panic("half: index out of range")
	}
	if w.f16 != nil {
		return ToFloat32(w.f16[w.panelIndex(j, p)])
	}
	return w.F32[j*w.ld()+p]
}

// Update converts the N×K row-major float32 matrix src into the binary16
// copy w, in place. It panics if w is not a binary16 copy or src is short.
func (w Weights) Update(src []float32) {
	w.eachRow(src, func(j int, row []uint16) {
		for p0 := 0; p0 < w.K; p0 += 8 {
			copy(w.f16[w.panelIndex(j, p0):][:8], row[p0:min(p0+8, w.K)])
		}
	})
}

// eachRow converts each row of src and passes it to f.
func (w *Weights) eachRow(src []float32, f func(j int, row []uint16)) {
	if w.f16 == nil {
		panic("half: not a binary16 copy")
	}
	if len(src) < w.N*w.K {
		panic(fmt.Sprintf("half: %d values for a %d×%d matrix", len(src), w.N, w.K))
	}
	row := make([]uint16, w.K)
	for j := 0; j < w.N; j++ {
		Encode(row, src[j*w.K:(j+1)*w.K])
		f(j, row)
	}
}

// Op is one product over M rows of X:
//
//	Y[i][j] = act(Σ_{p<K} X[i][p]·W[j][p] + Bias[j])            (Add false)
//	Y[i][j] = Y[i][j] + act(Σ_{p<K} X[i][p]·W[j][p] + Bias[j])  (Add true)
//
// for i < M and j < W.N, where act is max(0, ·) if ReLU is set and the
// identity otherwise, and Bias may be nil. X is M×K with row stride LDX and
// Y is M×N with row stride LDY (0 means K and N). Y must not overlap X or W.
type Op struct {
	M    int
	X    []float32
	LDX  int
	W    Weights
	Bias []float32
	Y    []float32
	LDY  int
	ReLU bool
	Add  bool
	// After, if positive, is 1 + the index in its batch (what Add
	// returned) of an earlier op whose Y this op reads: its chunks start
	// once that op is done. Zero: the op reads nothing the batch writes.
	After int
}

// check validates the shapes and fills the default strides.
func (op *Op) check() {
	w := op.W
	if op.M < 0 || w.N < 0 || w.K < 0 {
		panic("half: negative size")
	}
	if (w.F32 == nil) == (w.f16 == nil) && w.N > 0 && w.K > 0 {
		panic("half: weights need exactly one of F32 and a binary16 copy")
	}
	if op.LDX == 0 {
		op.LDX = w.K
	}
	if op.LDY == 0 {
		op.LDY = w.N
	}
	need := func(what string, have, rows, cols, ld int) {
		if ld < cols {
			panic("half: bad row stride of " + what)
		}
		if rows > 0 && cols > 0 && have < (rows-1)*ld+cols {
			panic(fmt.Sprintf("half: %s has %d values, want %d×%d with stride %d", what, have, rows, cols, ld))
		}
	}
	if w.f16 != nil {
		if len(w.f16) < roundUp(w.N, 4)*w.kp() {
			panic("half: binary16 copy too short")
		}
	} else {
		need("W", len(w.F32), w.N, w.K, w.ld())
	}
	need("X", len(op.X), op.M, w.K, op.LDX)
	need("Y", len(op.Y), op.M, w.N, op.LDY)
	if op.Bias != nil && len(op.Bias) < w.N {
		panic("half: bias too short")
	}
}

// Tuning constants of the chunked products.
const (
	// chunkBytes is the size of the weight block of one chunk, the unit
	// of claiming: a block of rows of W, read once from memory and, for
	// more than maxRows rows of X, again from L1/L2 for each further
	// group of rows. Claims take several chunks while many are open
	// (f32.ClaimShare), and the chunks of one claim run as one product, so a
	// small chunk costs nothing in the middle of a stage; at its end the
	// goroutines finish within a small chunk of each other.
	chunkBytes = 32 << 10

	// backgroundClaim is the chunks a helper claims at a time in a
	// background batch: few enough that it soon returns to the products
	// its owner waits for.
	backgroundClaim = 4

	// l1Bytes is the size of the weights that the groups of rows of a
	// product of more than maxRows rows go through together (L1 holds
	// 32 KB).
	l1Bytes = 16 << 10

	// maxChunk is the widest chunk in columns of Y (rows of W); it bounds
	// the tile on the stack.
	maxChunk = 256

	// parallelBytes is the weight size below which a batch runs on the
	// calling goroutine only: sharing it out would cost more than it saves.
	parallelBytes = 48 << 10

	// maxRows is the number of rows of X the kernels take at once.
	maxRows = 3
)

// chunkCols returns the width of op's chunks: a multiple of 4 columns whose
// rows of W make about chunkBytes.
func (op *Op) chunkCols() int {
	per := 4 * op.W.K
	if op.W.f16 != nil {
		per = 2 * op.W.K
	}
	c := chunkBytes / max(per, 1) &^ 3
	return min(max(c, 4), maxChunk)
}

// Runner batches Ops and runs them with every matrix read once and the
// output columns shared out among the goroutines. The zero value is ready to
// use. A Runner belongs to one goroutine at a time; after the first batches
// have sized its buffers, Add and Run allocate nothing.
//
// A batch runs either at once (Run) or beside its owner (Start, then Wait
// and Finish): then the pool's helpers compute it while the owner goes on
// with other work, and the owner joins in when it needs the results. An
// op may read what an earlier op of its batch writes (Op.After): its
// chunks, and those of every op after it, are claimed once that op is
// done, so that the ops are computed in the order they were added, as far
// as their dependencies allow, and an op waits for its own dependency
// only.
type Runner struct {
	ops    []Op
	starts []int // starts[i]: first chunk of ops[i]; starts[len(ops)]: chunk count
	widths []int // chunk width of ops[i]
	bytes  int   // weight bytes of the batch
	// left[i] is the number of chunks of ops[i] not yet computed.
	left []atomic.Int32

	// state is gen<<40 | limit<<20 | next: the batch's generation, the
	// end of the chunks that may be claimed (the first chunk of the first
	// op whose dependency is not done) and the next chunk to claim.
	// Helpers claim chunks by compare-and-swap on the whole word, so a
	// helper that arrives after the batch is over (or during a later one
	// it was not offered) claims nothing from it.
	state atomic.Uint64
	done  atomic.Int64 // chunks completed in the current batch
	gen   uint64

	// background is set while a batch runs beside its owner (Start):
	// helpers leave it between chunks whenever a job of f32.Post has
	// chunks left.
	background atomic.Bool
	started    bool // Start ran and Finish has not

	// A caller that has waited waitSpin for the helpers' last chunks
	// sets waiting and blocks on wake; the helper that completes the
	// batch sends on it.
	waiting atomic.Bool
	wake    chan struct{}

	posting *f32.Posting // the batch's place on the helpers' board
}

const (
	stateBits = 20
	stateMask = 1<<stateBits - 1
	genMask   = 1<<(64-2*stateBits) - 1
)

// Add appends op to the batch and returns its index, for a later op's
// After, or -1 for an op with nothing to compute. An op may read what
// another writes only through After. Add panics on inconsistent shapes,
// short slices or an After that is not an earlier op.
func (r *Runner) Add(op Op) int {
	op.check()
	if op.After < 0 || op.After > len(r.ops) {
		panic(fmt.Sprintf("half: op after op %d of a batch of %d", op.After-1, len(r.ops)))
	}
	if op.M == 0 || op.W.N == 0 {
		return -1
	}
	if len(r.starts) == 0 {
		r.starts = append(r.starts, 0)
	}
	w := op.chunkCols()
	chunks := (op.W.N + w - 1) / w
	r.ops = append(r.ops, op)
	r.widths = append(r.widths, w)
	r.starts = append(r.starts, r.starts[len(r.starts)-1]+chunks)
	r.bytes += op.W.Bytes()
	if r.starts[len(r.starts)-1] > stateMask {
		panic("half: too many chunks in one batch")
	}
	return len(r.ops) - 1
}

// chunks returns the chunk count of the batch.
func (r *Runner) chunks() int {
	if len(r.starts) == 0 {
		return 0
	}
	return r.starts[len(r.starts)-1]
}

// Run computes the batch and empties it.
func (r *Runner) Run() {
	if r.started {
		panic("half: Run of a started batch")
	}
	if !r.shared() {
		r.runAlone()
	} else {
		r.post()
		f32.Post(r.posting)
		r.join(r.chunks())
		f32.Withdraw(r.posting)
	}
	r.reset()
}

// Start begins computing the batch beside the calling goroutine, which
// may not read the ops' results until Wait says they are done, nor add
// ops until Finish. A batch too small to share out, or a machine with one
// core, is computed here and now.
func (r *Runner) Start() {
	if r.started {
		panic("half: Start of a started batch")
	}
	r.started = true
	if !r.shared() {
		r.runAlone()
		return
	}
	r.post()
	r.background.Store(true)
	f32.PostBackground(r.posting)
}

// Wait returns once op i (an index Add returned) of a started batch is
// done, computing the chunks before it that are left on the calling
// goroutine.
func (r *Runner) Wait(i int) {
	if !r.started {
		panic("half: Wait of a batch not started")
	}
	if i >= 0 && r.background.Load() {
		r.joinOp(i)
	}
}

// Finish waits for the whole of a started batch and empties it.
func (r *Runner) Finish() {
	if !r.started {
		panic("half: Finish of a batch not started")
	}
	if r.background.Load() {
		r.join(r.chunks())
		f32.WithdrawBackground(r.posting)
		r.background.Store(false)
	}
	r.started = false
	r.reset()
}

// shared reports whether the batch is large enough to share out and there
// are helpers to share it with.
func (r *Runner) shared() bool {
	return r.bytes >= parallelBytes && r.chunks() > 1 && runtime.GOMAXPROCS(0) > 1 && f32.StartHelpers()
}

// runAlone computes the batch's chunks in order on the calling goroutine.
func (r *Runner) runAlone() {
	var tile [maxRows * maxChunk]float32
	r.run(0, r.chunks(), &tile)
}

// post readies the batch's state for claiming: a new generation, the ops
// up to the first with a dependency open.
func (r *Runner) post() {
	if r.wake == nil {
		r.wake = make(chan struct{}, 1)
		r.posting = f32.NewPosting(r)
	}
	if len(r.starts) == 0 {
		r.starts = append(r.starts, 0)
	}
	if cap(r.left) < len(r.ops) {
		r.left = make([]atomic.Int32, len(r.ops), 2*len(r.ops))
	}
	r.left = r.left[:len(r.ops)]
	for i := range r.ops {
		r.left[i].Store(int32(r.starts[i+1] - r.starts[i]))
	}
	r.done.Store(0)
	r.gen = (r.gen + 1) & genMask
	r.state.Store(r.gen<<(2*stateBits) | uint64(r.frontier(0))<<stateBits)
}

// frontier returns the first chunk of the first op from op i on whose
// dependency is not done (the batch's chunk count if there is none): the
// end of the chunks that may be claimed.
func (r *Runner) frontier(i int) int {
	for ; i < len(r.ops); i++ {
		if a := r.ops[i].After; a > 0 && r.left[a-1].Load() > 0 {
			break
		}
	}
	return r.starts[i]
}

// opAt returns the op holding chunk c (len(ops) for the batch's end).
func (r *Runner) opAt(c int) int {
	i := 0
	for i < len(r.ops) && r.starts[i+1] <= c {
		i++
	}
	return i
}

// count counts the chunks [c0, c1), computed, against their ops, and
// reports whether one of the ops is now done.
func (r *Runner) count(c0, c1 int) (completed bool) {
	for i := r.opAt(c0); c0 < c1; i++ {
		end := min(c1, r.starts[i+1])
		if r.left[i].Add(int32(c0-end)) == 0 {
			completed = true
		}
		c0 = end
	}
	return completed
}

// advance moves the end of the claimable chunks on past the ops whose
// dependencies are now done.
func (r *Runner) advance() {
	for {
		s := r.state.Load()
		limit := s >> stateBits & stateMask
		if s>>(2*stateBits) != r.gen || limit >= uint64(r.chunks()) {
			return
		}
		next := uint64(r.frontier(r.opAt(int(limit))))
		if next <= limit || r.state.CompareAndSwap(s, s&^(stateMask<<stateBits)|next<<stateBits) {
			return
		}
	}
}

// reset empties the batch.
func (r *Runner) reset() {
	clear(r.ops) // drop the references to the operands
	r.ops, r.widths, r.starts, r.bytes = r.ops[:0], r.widths[:0], r.starts[:min(len(r.starts), 1)], 0
}

// waitSpin is how long a caller waits for the helpers' last chunks before
// blocking: a chunk takes a few microseconds, so a longer wait means that
// the helper holding it lost its core (to another process), and the caller
// should give its own core up.
const waitSpin = 20 * time.Microsecond

// join computes the batch's chunks on the calling goroutine, the batch's
// owner, as they open, and returns once all of them are done.
func (r *Runner) join(end int) {
	all := func() bool { return r.done.Load() >= int64(end) }
	for {
		r.work(false, end)
		if all() {
			return
		}
		r.wait(int64(end), all)
	}
}

// joinOp is join up to op i: it returns once op i is done.
func (r *Runner) joinOp(i int) {
	end := r.starts[i+1]
	done := func() bool { return r.left[i].Load() == 0 }
	for {
		r.work(false, end)
		if done() {
			return
		}
		r.wait(int64(end), done)
	}
}

// wait returns when done reports true, when a chunk below end has opened
// for the caller to claim, or after blocking once for a helper's signal.
func (r *Runner) wait(end int64, done func() bool) {
	start := time.Now()
	for i := 1; !done(); i++ {
		if r.claimable(end) {
			return
		}
		if i%16 == 0 && time.Since(start) > waitSpin {
			// Block until a helper completing an op signals. A signal
			// left over from an earlier batch or op wakes this wait
			// early, and the caller looks again.
			r.waiting.Store(true)
			if !done() && !r.claimable(end) {
				<-r.wake
			}
			r.waiting.Store(false)
			return
		}
		yield()
	}
}

// claimable reports whether a chunk below end is open to claim.
func (r *Runner) claimable(end int64) bool {
	s := r.state.Load()
	next := s & stateMask
	return next < s>>stateBits&stateMask && next < uint64(end)
}

// Open implements f32.Shared: whether the current batch has chunks left to
// claim.
func (r *Runner) Open() bool { return r.claimable(stateMask) }

// helperHook, if set (by tests), runs before each claim a helper computes.
var helperHook func()

// Work implements f32.Shared: the helpers of internal/f32's pool, which
// serve both packages, claim and compute chunks of the current batch.
func (r *Runner) Work() { r.work(true, stateMask) }

// work claims and computes chunks below end of the current batch until
// none is open; helper says whether a pool helper (rather than the batch's
// owner) runs it. A helper leaves a background batch between chunks when
// a job of f32.Post has chunks left.
func (r *Runner) work(helper bool, end int) {
	var tile [maxRows * maxChunk]float32
	for {
		if helper && r.background.Load() && f32.ForegroundOpen() {
			return
		}
		s := r.state.Load()
		next, limit := s&stateMask, s>>stateBits&stateMask
		open := min(limit, uint64(end))
		if next >= open {
			return
		}
		// Claim a share of the open chunks (guided self-scheduling): few
		// claims while many are open, single chunks where the open ones
		// end, so that the goroutines finish together. A helper in a background
		// batch claims backgroundClaim chunks at a time, to be free for
		// foreground work soon.
		n := min(backgroundClaim, open-next)
		if !helper || !r.background.Load() {
			n = f32.ClaimShare(open - next)
		}
		if !r.state.CompareAndSwap(s, s+n) {
			continue
		}
		// The batch cannot end before these chunks are done: its
		// operands are stable until done counts them.
		if helper && helperHook != nil {
			helperHook()
		}
		r.run(int(next), int(next+n), &tile)
		// The chunks are counted against their ops, the ops that waited
		// for one they completed opened, and the batch's size read, before
		// done counts them: once the batch's last chunk is counted, the
		// owner may empty the batch, so it is still there to read here.
		completed := r.count(int(next), int(next+n))
		if completed {
			r.advance()
		}
		total := r.chunks()
		// An owner waits for an op, for chunks to open or for the whole
		// batch: wake it when an op is done (which opens chunks) or when
		// the batch is, whoever completed its last op.
		if d := r.done.Add(int64(n)); (completed || d == int64(total)) && r.waiting.Load() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// run computes the chunks [c0, c1) of the batch: the chunks of each op
// among them as one range of its columns, in pieces of at most maxChunk.
func (r *Runner) run(c0, c1 int, tile *[maxRows * maxChunk]float32) {
	if c0 >= c1 {
		return
	}
	// The op holding chunk c0: batches have few ops, a linear scan will do.
	i := 0
	for r.starts[i+1] <= c0 {
		i++
	}
	for c := c0; c < c1; i++ {
		op, w := &r.ops[i], r.widths[i]
		end := min(c1, r.starts[i+1])
		j0, j1 := (c-r.starts[i])*w, min((end-r.starts[i])*w, op.W.N)
		for ; j0 < j1; j0 += maxChunk {
			op.columns(j0, min(j0+maxChunk, j1), tile)
		}
		c = end
	}
}

// columns computes the columns [j0, j1) of Y, j1−j0 ≤ maxChunk; j0 is a
// multiple of 4. With more rows than the kernels take at once, it goes
// through the columns in passes of about l1Bytes of weights, each serving
// every group of rows while its weights are in L1: the next weights stream
// in from memory as the later groups compute. float32 weights go through
// f32.Dots, whose kernels add the bias, apply the ReLU and add to Y as
// they store; the binary16 kernels write into tile, and finish does that.
func (op *Op) columns(j0, j1 int, tile *[maxRows * maxChunk]float32) {
	pass := j1 - j0
	if op.M > maxRows {
		per := 4 * op.W.K
		if op.W.f16 != nil {
			per = 2 * op.W.K
		}
		pass = max(l1Bytes/max(per, 1)&^3, 4)
	}
	for js := j0; js < j1; js += pass {
		je := min(js+pass, j1)
		n := je - js
		var b []float32
		if op.Bias != nil {
			b = op.Bias[js:je]
		}
		if op.W.f16 == nil {
			ld := op.W.ld()
			f32.Dots(op.M, n, op.W.K, op.X, op.LDX, op.W.F32[js*ld:], ld, op.Y[js:], op.LDY, f32.Epilogue{Bias: b, ReLU: op.ReLU, Add: op.Add})
			continue
		}
		ldt := roundUp(n, 4)
		for i0 := 0; i0 < op.M; i0 += maxRows {
			rows := min(maxRows, op.M-i0)
			t := tile[:rows*ldt]
			dotsHalf(rows, op.X[i0*op.LDX:], op.LDX, &op.W, js, je, t, ldt)
			for i := 0; i < rows; i++ {
				finish(op.Y[(i0+i)*op.LDY+js:][:n], t[i*ldt:][:n], b, op.ReLU, op.Add)
			}
		}
	}
}

// finish writes act(s[j] + b[j]) into y[j], or adds it when add, where act
// is max(·, 0) if relu is set and the identity otherwise; b may be nil.
// The common cases have loops of their own, free of per-value branches.
func finish(y, s, b []float32, relu, add bool) {
	s = s[:len(y)]
	switch {
	case b == nil && !relu && !add:
		copy(y, s)
	case b != nil && !add:
		b = b[:len(y)]
		if relu {
			for j := range y {
				y[j] = max(s[j]+b[j], 0)
			}
		} else {
			for j := range y {
				y[j] = s[j] + b[j]
			}
		}
	default:
		for j := range y {
			v := s[j]
			if b != nil {
				v += b[j]
			}
			if relu {
				v = max(v, 0)
			}
			if add {
				v += y[j]
			}
			y[j] = v
		}
	}
}

// dotsHalf writes t[i*ldt + j−j0] = Σ_p x[i*ldx+p]·W[j][p] for i < rows
// (≤ maxRows) and j0 ≤ j < j1, and for the padding rows up to the next
// multiple of 4, of a binary16 copy, j0 being a multiple of 4: the
// assembly takes groups of four columns over the first multiple of 8 of
// K, the Go loops the rest.
func dotsHalf(rows int, x []float32, ldx int, w *Weights, j0, j1 int, t []float32, ldt int) {
	k, k8 := w.K, 0
	n4 := roundUp(j1-j0, 4)
	kp := w.kp()
	if useAsm() && k >= 8 {
		k8 = k &^ 7
		dotF16(rows, k8, &x[0], ldx, &w.f16[j0*kp], kp, n4, &t[0], ldt)
	}
	dotGoPanel(rows, x, ldx, w, j0, j0+n4, k8, k, t, ldt, k8 > 0)
}

// dotGoPanel computes, for i < rows and j0 ≤ j < j1 (j0 a multiple of 4,
// j1 ≤ the padded row count), the partial dot products
// s = Σ_{p0≤p<p1} x[i*ldx+p]·W[j][p] of a binary16 copy and stores
// t[i*ldt+j−j0] = s, or adds s to it if add; each weight is widened once
// for all rows.
func dotGoPanel(rows int, x []float32, ldx int, w *Weights, j0, j1, p0, p1 int, t []float32, ldt int, add bool) {
	if j0 >= j1 || p0 >= p1 && add {
		return
	}
	var buf [256]float32
	for j := j0; j < j1; j++ {
		var acc [maxRows]float32
		for q := p0; q < p1; q += len(buf) {
			q1 := min(q+len(buf), p1)
			wr := buf[:q1-q]
			for p := 0; p < len(wr); {
				// The run of the block holding column q+p.
				b := w.f16[w.panelIndex(j, q+p):][:min(8-(q+p)%8, len(wr)-p)]
				for _, h := range b {
					wr[p] = ToFloat32(h)
					p++
				}
			}
			for i := 0; i < rows; i++ {
				acc[i] += f32.Dot4(x[i*ldx+q:i*ldx+q1], wr)
			}
		}
		for i := 0; i < rows; i++ {
			if add {
				t[i*ldt+j-j0] += acc[i]
			} else {
				t[i*ldt+j-j0] = acc[i]
			}
		}
	}
}
