// Package freelist keeps idle objects for reuse: buffers that warm code
// (a decoding step, a product) must find again without allocating.
//
// A List is a bounded channel. Unlike a sync.Pool, a garbage collection
// does not empty it, so what it holds survives the collections that other
// work (an encoder, a test harness) triggers; the bound keeps it from
// holding more than the callers ever use at once. Get and Put never block.
package freelist

// List holds up to its capacity of idle *T. The zero value holds nothing;
// make one with New.
type List[T any] chan *T

// New returns a list that holds up to n idle objects.
func New[T any](n int) List[T] { return make(List[T], n) }

// Get returns an idle object, or nil if none is idle.
func (l List[T]) Get() *T {
	select {
	case x := <-l:
		return x
	default:
		return nil
	}
}

// Put keeps x for a later Get and reports whether it did: when the list is
// full it drops x, to the garbage collector.
func (l List[T]) Put(x *T) bool {
	select {
	case l <- x:
		return true
	default:
		return false
	}
}
