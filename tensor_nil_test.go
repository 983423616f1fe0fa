package radgen

import "testing"

// A nil tensor's shape is nil, so errors about a missing tensor can print
// it.
func TestNilTensorShape(t *testing.T) {
	var x *Tensor
	if s := x.Shape(); s != nil {
		t.Fatalf("nil tensor shape %v", s)
	}
	if s := Zeros(2, 3).Shape(); len(s) != 2 || s[0] != 2 || s[1] != 3 {
		t.Fatalf("shape %v", s)
	}
}
