package f32

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The skinny products of a decoding step (a few rows times a weight
// matrix) take tens of microseconds each, a few dozen of them per step,
// separated by microseconds of other work: less than it takes the
// scheduler to wake a parked goroutine on another core. So they are shared
// out among the calling goroutine and GOMAXPROCS−1 helpers that, after a
// product, spin for up to helperSpin looking for the next one (yielding
// their core at every turn to any thread that needs it) before they park.
// The goroutines claim chunks of columns as they come free: a helper that
// starts late, its core taken by another process, leaves its share to the
// others, and the caller never waits for a helper that has claimed nothing.

// helperSpin is how long an idle helper keeps looking for a posted product:
// longer than the gaps between the products of a decoding step (attention,
// normalisation, the beams' bookkeeping between steps), so that a step
// rarely wakes a parked helper.
const helperSpin = 300 * time.Microsecond

// ownerSpin is how long the caller waits for the helpers' last chunks
// before it blocks: a chunk takes a few microseconds, so a longer wait
// means that the helper holding it lost its core.
const ownerSpin = 20 * time.Microsecond

// After the caller has blocked for a helper's chunk (the helper lost its
// core to another process in the middle of a chunk, and the caller lost a
// scheduler time slice waiting for it), products of less than soloBytes of
// B run on the caller alone for helperBackoff: on a machine with more
// runnable threads than cores, a helper that lost its core is likely to
// lose it again, and one core streams a small product nearly as fast as
// two. On a machine with idle cores the caller never blocks.
const (
	helperBackoff = 20 * time.Millisecond
	soloBytes     = 4 << 20
)

var (
	clock0    = time.Now()
	lastBlock atomic.Int64 // time.Since(clock0) when the caller last blocked; 0 if never
)

// helpersLate reports whether a caller blocked for a helper within the
// last helperBackoff.
func helpersLate() bool {
	t := lastBlock.Load()
	return t != 0 && lateAt(time.Duration(t), time.Since(clock0))
}

// lateAt reports whether now falls within helperBackoff of a block at t.
func lateAt(t, now time.Duration) bool { return now-t < helperBackoff }

var helpers struct {
	once     sync.Once
	n        int
	wake     chan *Posting
	posted   atomic.Pointer[Posting]
	spinning atomic.Int32

	// background is a job that the helpers work on while no posted job
	// has chunks left (see PostBackground).
	background atomic.Pointer[Posting]
}

// Shared is work in chunks that the calling goroutine and the helpers
// claim as they come free: a skinny product of this package, or a batch of
// internal/half's products, so that one pool of helpers serves both.
type Shared interface {
	// Open reports whether chunks are left to claim.
	Open() bool
	// Work claims and computes chunks until none is left; the helpers
	// call it.
	Work()
}

// Posting is a Shared job's place on the helpers' board: its owner (a
// runner that lives on from job to job) makes it once, so that posting
// allocates nothing.
type Posting struct{ job Shared }

// NewPosting returns the posting of j.
func NewPosting(j Shared) *Posting { return &Posting{job: j} }

// StartHelpers starts the helpers on first use and reports whether there
// are any.
func StartHelpers() bool { return startHelpers() }

// Post offers p's job to the helpers: the spinning ones see it at once and
// parked ones are woken, without waiting for any. The caller then works on
// the job itself, waits for the chunks the helpers claimed, and Withdraws
// it.
func Post(p *Posting) {
	helpers.posted.Store(p)
	wake(p)
}

// wake offers p on the wake channel once for every helper not spinning,
// without waiting: a parked helper takes it at once, a busy one when it
// next parks (and then finds the job over, or helps).
func wake(p *Posting) {
	for n := helpers.n - int(helpers.spinning.Load()); n > 0; n-- {
		select {
		case helpers.wake <- p:
		default:
			return
		}
	}
}

// Withdraw takes p off the board once its job is done.
func Withdraw(p *Posting) { helpers.posted.CompareAndSwap(p, nil) }

// PostBackground offers p's job to the helpers as background work: they
// claim its chunks while no job of Post has chunks left, and a background
// job's Work returns as soon as one has (see ForegroundOpen), so that the
// products its owner runs meanwhile are shared out as before. Its owner
// goes on with other work, later claims what is left itself, waits for the
// chunks the helpers claimed and calls WithdrawBackground. A later
// PostBackground (of another goroutine's job) takes the place of p, whose
// owner then finishes its job alone.
func PostBackground(p *Posting) {
	helpers.background.Store(p)
	wake(p)
}

// WithdrawBackground takes p off the board once its job is done.
func WithdrawBackground(p *Posting) { helpers.background.CompareAndSwap(p, nil) }

// ForegroundOpen reports whether a job of Post has chunks left to claim:
// a background job's Work checks it between chunks.
func ForegroundOpen() bool { return openIn(&helpers.posted) != nil }

// open returns the job a helper should work on: the posted one if it has
// chunks left, else the background one if it has, else nil.
func open() *Posting {
	if r := openIn(&helpers.posted); r != nil {
		return r
	}
	return openIn(&helpers.background)
}

// openIn returns the job on the board's slot if it has chunks left, else
// nil.
func openIn(slot *atomic.Pointer[Posting]) *Posting {
	if r := slot.Load(); r != nil && r.job.Open() {
		return r
	}
	return nil
}

// startHelpers starts the helpers on first use and reports whether there
// are any.
func startHelpers() bool {
	helpers.once.Do(func() {
		helpers.n = runtime.GOMAXPROCS(0) - 1
		helpers.wake = make(chan *Posting, max(helpers.n, 1))
		for range helpers.n {
			go helperLoop()
		}
	})
	return helpers.n > 0
}

func helperLoop() {
	for p := range helpers.wake {
		for p != nil {
			p.job.Work()
			p = helperWait()
		}
	}
}

// helperWait waits up to helperSpin for a posted job with chunks left.
func helperWait() *Posting {
	helpers.spinning.Add(1)
	start := time.Now()
	for i := 1; ; i++ {
		if r := open(); r != nil {
			helpers.spinning.Add(-1)
			return r
		}
		if i%64 == 0 && time.Since(start) > helperSpin {
			break
		}
		if i%16 == 0 {
			runtime.Gosched()
		} else {
			yield()
		}
	}
	helpers.spinning.Add(-1)
	// A job posted while this helper still counted as spinning was not
	// sent on the channel: look once more before parking.
	return open()
}

// skinnyRunner is a skinny product shared out in chunks of column blocks.
// Runners are pooled and live on: a helper holding a runner from an
// earlier product can only claim chunks of the runner's current one, whose
// operands are set before its state is published.
type skinnyRunner struct {
	s       skinny
	dot     bool
	chunk   int // column blocks per chunk
	posting *Posting

	// state is gen<<40 | chunks<<20 | next: the product's generation, its
	// chunk count and the next chunk to claim, claimed by compare-and-swap
	// on the whole word.
	state   atomic.Uint64
	done    atomic.Int64 // chunks completed
	gen     uint64
	waiting atomic.Bool
	wake    chan struct{}
}

// ClaimShare returns how many of left open chunks one claim takes: a share
// for each of the goroutines that work on a job, the caller and the
// helpers (guided self-scheduling, Polychronopoulos and Kuck 1987). With
// two goroutines a claim takes half, and the next half of the rest, down
// to single chunks at the end, so that the goroutines finish together with
// few claims. Few claims matter twice: a claim is a compare-and-swap on a
// word both cores write, and its count another, each moving a cache line
// between the cores; and every claim starts a stream of weight rows that
// nothing has prefetched, where one claim's rows follow on from another
// claim of the same goroutine only by chance. The skinny products here and
// internal/half's batches claim this way. It needs the helpers started.
func ClaimShare(left uint64) uint64 { return max(1, left/uint64(helpers.n+1)) }

const (
	stateBits = 20
	stateMask = 1<<stateBits - 1
	genMask   = 1<<(64-2*stateBits) - 1
)

var skinnyRunners = sync.Pool{New: func() any {
	r := &skinnyRunner{wake: make(chan struct{}, 1)}
	r.posting = NewPosting(r)
	return r
}}

// share computes s's column blocks in chunks of chunk blocks on the calling
// goroutine and the helpers.
func (s *skinny) share(dot bool, chunk int) {
	chunks := (s.blocks + chunk - 1) / chunk
	if chunks > stateMask {
		chunk = (s.blocks + stateMask - 1) / stateMask
		chunks = (s.blocks + chunk - 1) / chunk
	}
	r := skinnyRunners.Get().(*skinnyRunner)
	r.s, r.dot, r.chunk = *s, dot, chunk
	r.done.Store(0)
	r.gen = (r.gen + 1) & genMask
	r.state.Store(r.gen<<(2*stateBits) | uint64(chunks)<<stateBits)
	Post(r.posting)
	r.Work()
	r.wait(int64(chunks))
	Withdraw(r.posting)
	r.s = skinny{} // drop the references to the operands
	skinnyRunners.Put(r)
}

// Open implements Shared: whether the current product has chunks left to
// claim.
func (r *skinnyRunner) Open() bool {
	s := r.state.Load()
	return s&stateMask < s>>stateBits&stateMask
}

// Work implements Shared: it claims and computes chunks of the current
// product until none is left.
func (r *skinnyRunner) Work() {
	for {
		st := r.state.Load()
		next, total := st&stateMask, st>>stateBits&stateMask
		if next >= total {
			return
		}
		n := ClaimShare(total - next)
		if !r.state.CompareAndSwap(st, st+n) {
			continue
		}
		// The product cannot end before these chunks are done: its
		// operands are stable until done counts them.
		lo := int(next) * r.chunk
		r.s.run(r.dot, lo, min(lo+int(n)*r.chunk, r.s.blocks))
		if r.done.Add(int64(n)) == int64(total) && r.waiting.Load() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// wait returns when all total chunks are done.
func (r *skinnyRunner) wait(total int64) {
	if r.done.Load() == total {
		return
	}
	start := time.Now()
	for i := 1; r.done.Load() < total; i++ {
		if i%16 == 0 && time.Since(start) > ownerSpin {
			// Block until the helper completing the product signals. A
			// signal left over from an earlier product wakes this wait
			// early, and the loop looks again.
			r.waiting.Store(true)
			for r.done.Load() < total {
				<-r.wake
			}
			r.waiting.Store(false)
			lastBlock.Store(int64(max(time.Since(clock0), 1)))
			return
		}
		yield()
	}
}
