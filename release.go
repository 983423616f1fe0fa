package radgen

// Release frees, now, the device memory of every parameter and buffer of m
// that lives on a device, instead of when the garbage collector finds it
// unreachable: what a Close method calls. The released tensors become empty
// CPU tensors (shape [0]), so m must not be used afterwards; tensors on the
// CPU are left as they are. Views that share a released buffer (Reshape of
// a parameter) must not be used either.
func Release(m Module) {
	m.VisitParams(func(_ string, t *Tensor) {
		if t == nil || t.device == CPU {
			return
		}
		if b := t.buf; b != nil && !b.freed {
			b.cleanup.Stop()
			b.freed = true
			_ = b.e.e.FreePtr(b.ptr) // an engine closed under it has freed it already
			b.e.live.Add(-b.bytes)
		}
		empty := Zeros(0)
		t.dense, t.host, t.buf, t.device, t.shape, t.grad = empty.dense, empty.host, nil, CPU, []int{0}, nil
	})
}
