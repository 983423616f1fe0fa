package radgen

import (
	"fmt"
	"runtime"
	"sync"
)

// The CPU engine runs the backward pass of a long tape on several
// goroutines: an op's backward pass runs once every op that read its
// result has sent that result's gradient, and the ops that send to one
// tensor's gradient do so in the order of the tape, one at a time, as a
// pass on one goroutine does. So every gradient is the same sum, added in
// the same order, bit for bit, whatever the schedule; only work that does
// not touch the same gradients runs side by side (the relational memory's
// recurrence beside the encoder, the gradients of independent branches).

// minConcurrentTape is the length of tape below which a backward pass runs
// on the calling goroutine: too short for scheduling to pay.
const minConcurrentTape = 256

// backwardWorkers returns how many goroutines g's backward pass from loss
// runs on: 1 unless the tape is long and the loss on the CPU (another
// device's engine orders its own work).
func backwardWorkers(g *Graph, loss *Tensor) int {
	if loss.device != CPU || len(g.tape) < minConcurrentTape {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// schedule is the order of a concurrent backward pass: for every step,
// the steps that wait for it (next[first[i]:first[i+1]]) and the number
// it waits for.
type schedule struct {
	pairs []int32           // from, to: to's backward runs after from's
	first []int32           // CSR offsets into next, by step
	next  []int32           // the steps that wait for each
	wait  []int32           // steps each waits for, not yet done
	last  map[*Tensor]int32 // the last step (in backward order) to touch a tensor's gradient
	ready []int32           // a max-heap of steps that wait for nothing
}

// backwardConcurrent runs the tape's backward passes on workers
// goroutines (the caller's one of them), in an order that gives every
// gradient the values of a pass on one goroutine.
func (g *Graph) backwardConcurrent(workers int) {
	var s *schedule
	if g.ws != nil {
		s = &g.ws.sched
	} else {
		s = new(schedule)
	}
	n := len(g.tape)
	s.plan(g.tape, g.ins)

	var (
		mu      sync.Mutex
		cond    = sync.Cond{L: &mu}
		done    int
		failure any
		failed  bool
	)
	run := func() {
		mu.Lock()
		defer mu.Unlock()
		for {
			for len(s.ready) == 0 && done < n && !failed {
				cond.Wait()
			}
			if done == n || failed {
				cond.Broadcast()
				return
			}
			i := s.pop()
			mu.Unlock()
			ok := func() (ok bool) {
				defer func() {
					if !ok {
						mu.Lock()
						if !failed {
							failed, failure = true, recover()
						}
						mu.Unlock()
					}
				}()
				g.backwardStep(int(i))
				return true
			}()
			mu.Lock()
			if !ok {
				cond.Broadcast()
				return
			}
			done++
			woke := 0
			for _, j := range s.next[s.first[i]:s.first[i+1]] {
				if s.wait[j]--; s.wait[j] == 0 {
					s.push(j)
					woke++
				}
			}
			if woke > 1 || done == n {
				cond.Broadcast()
			} else if woke == 1 && len(s.ready) > 1 {
				cond.Signal()
			}
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
	if failed {
		panic(failure) // on the caller's goroutine, as a pass on one would
	}
	if done != n {
		panic(fmt.Sprintf("radgen: backward ran %d of %d steps", done, n)) // a cycle: cannot happen on a tape
	}
}

// plan orders the tape's n steps: step i's backward runs after that of
// every later step that touched the gradient of i's result or of any of
// i's inputs, the last one before it being enough (they are ordered among
// themselves the same way).
func (s *schedule) plan(tape []step, ins []*Tensor) {
	n := len(tape)
	if s.last == nil {
		s.last = make(map[*Tensor]int32)
	}
	clear(s.last)
	s.pairs = s.pairs[:0]
	touch := func(t *Tensor, i int32) {
		if j, ok := s.last[t]; ok && j != i {
			s.pairs = append(s.pairs, j, i)
		}
		s.last[t] = i
	}
	for i := n - 1; i >= 0; i-- {
		st := &tape[i]
		touch(st.out, int32(i))
		for _, t := range ins[st.lo:st.hi] {
			touch(t, int32(i))
		}
	}
	clear(s.last) // holds no tensor past the pass
	s.first = grow(s.first, n+1)
	s.wait = grow(s.wait, n)
	clear(s.first)
	clear(s.wait)
	for k := 0; k < len(s.pairs); k += 2 {
		s.first[s.pairs[k]+1]++
		s.wait[s.pairs[k+1]]++
	}
	for i := range n {
		s.first[i+1] += s.first[i]
	}
	s.next = grow(s.next, len(s.pairs)/2)
	fill := s.ready[:0] // scratch: the next free slot of each step's list
	fill = append(fill, s.first[:n]...)
	for k := 0; k < len(s.pairs); k += 2 {
		from := s.pairs[k]
		s.next[fill[from]] = s.pairs[k+1]
		fill[from]++
	}
	s.ready = fill[:0]
	for i := n - 1; i >= 0; i-- {
		if s.wait[i] == 0 {
			s.push(int32(i))
		}
	}
}

// grow returns s with length n, reusing its storage where it can.
func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// push adds step i to the ready heap, whose top is its latest step: the
// one a pass on one goroutine would run first.
func (s *schedule) push(i int32) {
	h := append(s.ready, i)
	for c := len(h) - 1; c > 0; {
		p := (c - 1) / 2
		if h[p] >= h[c] {
			break
		}
		h[p], h[c] = h[c], h[p]
		c = p
	}
	s.ready = h
}

// pop removes and returns the latest ready step.
func (s *schedule) pop() int32 {
	h := s.ready
	top := h[0]
	h[0] = h[len(h)-1]
	h = h[:len(h)-1]
	for p := 0; ; {
		c := 2*p + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] > h[c] {
			c++
		}
		if h[p] >= h[c] {
			break
		}
		h[p], h[c] = h[c], h[p]
		p = c
	}
	s.ready = h
	return top
}
