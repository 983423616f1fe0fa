package half

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The helpers: GOMAXPROCS−1 goroutines (as the process starts them) that
// join the batches of any Runner. A batch is posted for the spinning
// helpers and, for the parked ones, sent on a channel without waiting, so a
// Run never blocks on a busy pool: the caller computes whatever chunks no
// helper claims.
//
// A decoding step runs a few dozen batches separated by microseconds of
// serial work, far less than it takes the scheduler to wake a parked
// goroutine on another core, so a helper that has finished a batch spins
// for up to spinFor before parking, yielding its core at every turn to any
// other thread that needs it.
var pool struct {
	once     sync.Once
	helpers  int
	wake     chan *Runner
	posted   atomic.Pointer[Runner]
	spinning atomic.Int32
}

// spinFor is how long an idle helper keeps looking for a posted batch.
const spinFor = 100 * time.Microsecond

// startPool starts the helpers on first use and reports whether there are
// any.
func startPool() bool {
	pool.once.Do(func() {
		pool.helpers = runtime.GOMAXPROCS(0) - 1
		pool.wake = make(chan *Runner, max(pool.helpers, 1))
		for range pool.helpers {
			go helper()
		}
	})
	return pool.helpers > 0
}

// offer makes r's current batch available to the helpers.
func offer(r *Runner) {
	pool.posted.Store(r)
	for n := pool.helpers - int(pool.spinning.Load()); n > 0; n-- {
		select {
		case pool.wake <- r:
		default:
			return
		}
	}
}

func helper() {
	for r := range pool.wake {
		for r != nil {
			r.work(true)
			r = spin()
		}
	}
}

// spin waits up to spinFor for a posted batch with chunks left.
func spin() *Runner {
	pool.spinning.Add(1)
	start := time.Now()
	for i := 1; ; i++ {
		if r := pool.posted.Load(); r != nil && r.open() {
			pool.spinning.Add(-1)
			return r
		}
		if i%64 == 0 && time.Since(start) > spinFor {
			break
		}
		if i%16 == 0 {
			runtime.Gosched()
		} else {
			yield()
		}
	}
	pool.spinning.Add(-1)
	// A batch posted while this helper still counted as spinning was not
	// sent on the channel: look once more before parking.
	if r := pool.posted.Load(); r != nil && r.open() {
		return r
	}
	return nil
}
