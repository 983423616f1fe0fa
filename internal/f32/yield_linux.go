package f32

import "syscall"

// yield gives the processor to any other runnable thread of the machine
// (sched_yield): a spinning goroutine must not hold a core that the thread
// it waits for needs, as it would when the machine has fewer free cores
// than GOMAXPROCS.
func yield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
