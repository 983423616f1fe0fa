package freelist

import "sync"

// Stack is a bounded free list that gives back the object put last: the
// one likeliest to be still in the cache, where a List (first in, first
// out) cycles through all it holds. For buffers that are large and touched
// whole on every use (a convolution's window matrix, a forward's arena).
// Like a List, a garbage collection does not empty it; Get and Put never
// block on anything but the other calls' brief lock.
type Stack[T any] struct {
	mu    sync.Mutex
	items []*T
}

// NewStack returns an empty stack that holds up to n objects.
func NewStack[T any](n int) *Stack[T] { return &Stack[T]{items: make([]*T, 0, n)} }

// Get returns the object put last, or nil if the stack is empty.
func (s *Stack[T]) Get() *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.items)
	if n == 0 {
		return nil
	}
	x := s.items[n-1]
	s.items[n-1] = nil
	s.items = s.items[:n-1]
	return x
}

// Put keeps x and reports true, or reports false when the stack is full.
func (s *Stack[T]) Put(x *T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == cap(s.items) {
		return false
	}
	s.items = append(s.items, x)
	return true
}
