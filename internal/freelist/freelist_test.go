package freelist

import "testing"

func TestList(t *testing.T) {
	l := New[int](2)
	if l.Get() != nil {
		t.Fatal("an empty list gave an object")
	}
	a, b, c := new(int), new(int), new(int)
	if !l.Put(a) || !l.Put(b) || l.Put(c) {
		t.Fatal("a list of two did not keep two and drop the third")
	}
	if x, y := l.Get(), l.Get(); x != a || y != b || l.Get() != nil {
		t.Fatal("the list did not give back what it kept, once each")
	}
}

// A warm Get and Put allocate nothing.
func TestListAllocs(t *testing.T) {
	l := New[int](1)
	x := new(int)
	if n := testing.AllocsPerRun(100, func() { l.Put(x); l.Get() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestStack(t *testing.T) {
	s := NewStack[int](2)
	if s.Get() != nil {
		t.Fatal("an empty stack gave an object")
	}
	a, b, c := new(int), new(int), new(int)
	if !s.Put(a) || !s.Put(b) || s.Put(c) {
		t.Fatal("a stack of two did not keep two and drop the third")
	}
	if x, y := s.Get(), s.Get(); x != b || y != a || s.Get() != nil {
		t.Fatal("the stack did not give back the last put first, once each")
	}
	if n := testing.AllocsPerRun(100, func() { s.Put(a); s.Get() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
