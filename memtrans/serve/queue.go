package serve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/radgen/radgen/memtrans"
)

// genKey is what must agree for studies to share a Generate call.
type genKey struct {
	beam, maxLen int
	attention    bool
}

func (k genKey) options() []memtrans.GenerateOption {
	var o []memtrans.GenerateOption
	if k.beam > 0 {
		o = append(o, memtrans.WithBeamSize(k.beam))
	}
	if k.maxLen > 0 {
		o = append(o, memtrans.WithMaxLength(k.maxLen))
	}
	if k.attention {
		o = append(o, memtrans.WithAttention())
	}
	return o
}

// job is one admitted study waiting for its report.
type job struct {
	ctx   context.Context
	study memtrans.Study
	key   genKey
	done  chan result // buffered: the worker never waits for the handler
}

type result struct {
	report   memtrans.Report
	err      error
	batch    int       // studies in the Generate call
	started  time.Time // when the Generate call began
	finished time.Time
}

// worker takes jobs from the queue until the handler is closed, and
// generates their reports, batched when batching is on.
func (h *Handler) worker() {
	defer h.wg.Done()
	for {
		var first *job
		select {
		case first = <-h.queue:
		case <-h.stop:
			return
		}
		jobs := h.gather(first)
		// Group by options, keeping the order of arrival.
		for len(jobs) > 0 {
			key := jobs[0].key
			var same, rest []*job
			for _, j := range jobs {
				if j.key == key {
					same = append(same, j)
				} else {
					rest = append(rest, j)
				}
			}
			h.run(same)
			jobs = rest
		}
	}
}

// gather collects up to maxBatch jobs: first, those already waiting, and,
// while admitted requests are still reading and decoding their uploads,
// those that arrive within the batch wait.
func (h *Handler) gather(first *job) []*job {
	jobs := []*job{first}
	if !h.o.batch {
		return jobs
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for len(jobs) < h.o.maxBatch {
		select {
		case j := <-h.queue:
			jobs = append(jobs, j)
			continue
		default:
		}
		if h.decoding.Load() == 0 || h.o.batchWait == 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(h.o.batchWait)
		}
		select {
		case j := <-h.queue:
			jobs = append(jobs, j)
			continue
		case <-timer.C:
		case <-h.stop:
		}
		break
	}
	return jobs
}

// run generates the reports of jobs that share their options in one call.
// Jobs whose request has already ended are skipped; the call's context ends
// when every remaining request's has.
func (h *Handler) run(jobs []*job) {
	live := jobs[:0]
	for _, j := range jobs {
		if j.ctx.Err() == nil {
			live = append(live, j)
		} else {
			j.done <- result{err: j.ctx.Err()}
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := live[0].ctx
	if len(live) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		var remaining atomic.Int64
		remaining.Store(int64(len(live)))
		for _, j := range live {
			stop := context.AfterFunc(j.ctx, func() {
				if remaining.Add(-1) == 0 {
					cancel()
				}
			})
			defer stop()
		}
	}
	studies := make([]memtrans.Study, len(live))
	for i, j := range live {
		studies[i] = j.study
	}
	start := time.Now()
	reps, err := h.generate(ctx, studies, live[0].key)
	end := time.Now()
	h.m.batch(len(live), end.Sub(start))
	h.lastBatch.Store(int64(end.Sub(start)))
	if err != nil && len(live) > 1 && errors.Is(err, memtrans.ErrStudy) {
		// One study spoiled the batch: give each its own answer.
		for _, j := range live {
			h.run([]*job{j})
		}
		return
	}
	for i, j := range live {
		r := result{err: err, batch: len(live), started: start, finished: end}
		if err == nil {
			r.report = reps[i]
		}
		j.done <- r
	}
}

// generate calls Model.Generate, turning a panic into an error so that one
// bad request cannot take the service down.
func (h *Handler) generate(ctx context.Context, studies []memtrans.Study, key genKey) (reps []memtrans.Report, err error) {
	h.m.inFlight.Add(int64(len(studies)))
	defer h.m.inFlight.Add(-int64(len(studies)))
	defer func() {
		if p := recover(); p != nil {
			h.o.logger.Error("generation panicked", "panic", fmt.Sprint(p), "studies", len(studies))
			err = fmt.Errorf("serve: generation panicked: %v", p)
		}
	}()
	opts := append(key.options(), memtrans.WithBatchSize(len(studies)))
	reps, err = h.gen(ctx, studies, opts...)
	if err == nil && len(reps) != len(studies) {
		err = fmt.Errorf("serve: %d reports for %d studies", len(reps), len(studies))
	}
	return reps, err
}

// drain answers the jobs left in the queue after Close.
func (h *Handler) drain() {
	for {
		select {
		case j := <-h.queue:
			j.done <- result{err: memtrans.ErrClosed}
		default:
			return
		}
	}
}
