package radgen

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// Float is the set of element types a Tensor may hold. Models run in
// float32; float64 exists so that gradient checks by finite differences are
// exact enough to mean something.
type Float interface{ ~float32 | ~float64 }

// Tensor is a dense, row-major array on a device, optionally a node of a
// Graph. Its storage is a *tensor.Dense from gorgonia.org/tensor.
//
// A Tensor made by an op of a recording Graph remembers how it was made, so
// that Graph.Backward can send gradients to the tensors it came from.
// Parameters are Tensors with RequiresGrad set. A Tensor is not safe for
// concurrent mutation; concurrent reads (a loaded model's weights) are safe.
type Tensor struct {
	dense *tensor.Dense
	// host caches the dense's backing slice ([]float32 or []float64): the
	// Dense's own Data method boxes it through reflection on every call,
	// which would allocate on every access in a decoding step.
	host         any
	shape        []int
	device       Device
	requiresGrad bool
	grad         *Tensor
}

// Zeros returns a float32 tensor of the given shape filled with zeros.
func Zeros(shape ...int) *Tensor { return newTensor(tensor.Float32, shape) }

// Zeros64 returns a float64 tensor of the given shape filled with zeros.
func Zeros64(shape ...int) *Tensor { return newTensor(tensor.Float64, shape) }

// FromFloat32 wraps data (not copied) as a tensor of the given shape. It
// panics if len(data) does not equal the product of shape.
func FromFloat32(data []float32, shape ...int) *Tensor { return fromSlice(data, tensor.Float32, shape) }

// FromFloat64 wraps data (not copied) as a float64 tensor of the given shape.
func FromFloat64(data []float64, shape ...int) *Tensor { return fromSlice(data, tensor.Float64, shape) }

// FromDense wraps an existing *tensor.Dense of dtype Float32 or Float64.
func FromDense(d *tensor.Dense) (*Tensor, error) {
	switch d.Dtype() {
	case tensor.Float32, tensor.Float64:
	default:
		return nil, fmt.Errorf("radgen: unsupported dtype %v", d.Dtype())
	}
	if !d.IsNativelyAccessible() {
		return nil, fmt.Errorf("radgen: dense tensor is not in host memory")
	}
	shape := append([]int(nil), d.Shape()...)
	if !d.IsMaterializable() && d.DataOrder().IsRowMajor() {
		return &Tensor{dense: d, host: d.Data(), shape: shape, device: CPU}, nil
	}
	m := d.Materialize().(*tensor.Dense)
	return &Tensor{dense: m, host: m.Data(), shape: shape, device: CPU}, nil
}

func newTensor(dt tensor.Dtype, shape []int) *Tensor {
	n := checkShape(shape)
	if dt == tensor.Float64 {
		return fromSlice(make([]float64, n), dt, shape)
	}
	return fromSlice(make([]float32, n), dt, shape)
}

func fromSlice[T Float](data []T, dt tensor.Dtype, shape []int) *Tensor {
	n := checkShape(shape)
	if len(data) != n {
		panic(fmt.Sprintf("radgen: %d values for shape %v", len(data), shape))
	}
	s := append([]int(nil), shape...)
	// tensor.Dense wants at least one dimension; a scalar is stored as [1].
	ds := s
	if len(ds) == 0 {
		ds = []int{1}
	}
	d := tensor.New(tensor.WithShape(ds...), tensor.WithBacking(data), tensor.Of(dt))
	return &Tensor{dense: d, host: data, shape: s, device: CPU}
}

func checkShape(shape []int) int {
	n := 1
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("radgen: negative dimension in shape %v", shape))
		}
		if s != 0 && n > math.MaxInt32*64/s {
			panic(fmt.Sprintf("radgen: shape %v too large", shape))
		}
		n *= s
	}
	return n
}

// like returns a zero tensor with t's dtype and the given shape.
func like(t *Tensor, shape []int) *Tensor { return newTensor(t.dense.Dtype(), shape) }

// Dense returns the underlying storage. Its shape is t's shape, except that
// a scalar is stored as shape [1].
func (t *Tensor) Dense() *tensor.Dense { return t.dense }

// Shape returns the dimensions of t. The caller must not modify it.
func (t *Tensor) Shape() []int { return t.shape }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Len returns the number of elements.
func (t *Tensor) Len() int { return t.dense.DataSize() }

// Device returns where t's storage lives.
func (t *Tensor) Device() Device { return t.device }

// Is64 reports whether t holds float64 values.
func (t *Tensor) Is64() bool { return t.dense.Dtype() == tensor.Float64 }

// Data returns the float32 values of t (shared, not copied). It panics if t
// holds float64 or lives off the host.
func (t *Tensor) Data() []float32 { return values[float32](t) }

// Data64 returns the float64 values of t (shared, not copied).
func (t *Tensor) Data64() []float64 { return values[float64](t) }

// At returns the element at the given index as a float64.
func (t *Tensor) At(idx ...int) float64 {
	if len(idx) != len(t.shape) {
		panic(fmt.Sprintf("radgen: index %v for shape %v", idx, t.shape))
	}
	off := 0
	for i, x := range idx {
		if x < 0 || x >= t.shape[i] {
			panic(fmt.Sprintf("radgen: index %v out of range for shape %v", idx, t.shape))
		}
		off = off*t.shape[i] + x
	}
	if t.Is64() {
		return t.Data64()[off]
	}
	return float64(t.Data()[off])
}

// Float64s returns a float64 copy of t's values, whatever its dtype.
func (t *Tensor) Float64s() []float64 {
	if t.Is64() {
		return append([]float64(nil), t.Data64()...)
	}
	src := t.Data()
	out := make([]float64, len(src))
	for i, v := range src {
		out[i] = float64(v)
	}
	return out
}

// RequiresGrad reports whether gradients flow to t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks t as a leaf whose gradient Backward accumulates.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor { t.requiresGrad = on; return t }

// Grad returns the gradient accumulated by Graph.Backward, or nil.
func (t *Tensor) Grad() *Tensor { return t.grad }

// ZeroGrad drops t's accumulated gradient.
func (t *Tensor) ZeroGrad() { t.grad = nil }

// Clone returns a deep copy of t's values that does not require gradients.
func (t *Tensor) Clone() *Tensor {
	c := like(t, t.shape)
	if t.Is64() {
		copy(c.Data64(), t.Data64())
	} else {
		copy(c.Data(), t.Data())
	}
	return c
}

// To64 returns a float64 copy of t.
func (t *Tensor) To64() *Tensor { return FromFloat64(t.Float64s(), t.shape...) }

// To32 returns a float32 copy of t.
func (t *Tensor) To32() *Tensor {
	if !t.Is64() {
		return t.Clone()
	}
	src := t.Data64()
	out := make([]float32, len(src))
	for i, v := range src {
		out[i] = float32(v)
	}
	return FromFloat32(out, t.shape...)
}

// String describes t's shape and dtype.
func (t *Tensor) String() string {
	return fmt.Sprintf("Tensor%v(%v, %v)", t.shape, t.dense.Dtype(), t.device)
}

func values[T Float](t *Tensor) []T {
	if t.device != CPU {
		panic("radgen: host access to a tensor on " + t.device.String())
	}
	v, ok := t.host.([]T)
	if !ok {
		var z T
		panic(fmt.Sprintf("radgen: tensor of %v accessed as %T", t.dense.Dtype(), z))
	}
	return v
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}
