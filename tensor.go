package radgen

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/half"
)

// float is the set of element types a Tensor may hold. Models run in
// float32; float64 exists so that gradient checks by finite differences are
// exact enough to mean something.
type float interface{ ~float32 | ~float64 }

// Tensor is a dense, row-major array on a device, optionally a node of a
// Graph. Its storage is a *tensor.Dense from gorgonia.org/tensor: host
// slices on the CPU, or a buffer of the device's engine (not accessible
// from Go) on any other device; Tensor.To copies between devices.
//
// A Tensor made by an op of a recording Graph remembers how it was made, so
// that Graph.Backward can send gradients to the tensors it came from.
// Parameters are Tensors with RequiresGrad set. A Tensor is not safe for
// concurrent mutation; concurrent reads (a loaded model's weights) are safe.
type Tensor struct {
	// dense is the storage of a tensor on a device or made from a Dense;
	// a CPU tensor made from a slice leaves it nil, and Dense makes one on
	// demand (a Dense costs a dozen allocations, which an op's result
	// would pay at every decoding step).
	dense *tensor.Dense
	// host is the backing slice on the CPU ([]float32 or []float64, or
	// *[]float32 for a slice header an Arena owns, which costs no
	// allocation to store here): the Dense's own Data method boxes it
	// through reflection on every call, which would allocate on every
	// access in a decoding step. A half-precision tensor holds its
	// *half.Weights.
	host         any
	shape        []int
	device       Device
	buf          *devBuf // device storage; nil on the CPU
	requiresGrad bool
	grad         *Tensor
	// pend marks values that a deferred product computes (deferral.go);
	// every access to them computes them, or waits for them, first
	// (ready).
	pend pendMark
	// ws is the step memory its gradient comes from (InStepMemory): the one
	// it was made from, or that of a step that uses it as a parameter.
	ws *StepMemory
	// lazy is the CPU engine's deferred computation of t's values
	// (ops_conv_infer.go), nil for values that are there: every access
	// to them computes it first (ready).
	lazy *deferred
	// version counts in-place writes of t's values (and hand-outs of its
	// mutable slice, Data and Data64), so that what the engine prepared
	// from them (prep) is never served once they changed.
	version atomic.Uint64
	// prep is what the CPU engine prepared from t as a convolution's
	// weight (ops_conv_infer.go): freed with t.
	prep atomic.Pointer[convPrep]
	// carry says which rows of t are rows of a Carried's value, for
	// generation carryGen of the record (carried.go); nil for none.
	carry    *carriedRows
	carryGen uint32
}

// devBuf is a float32 buffer of an engine, freed when the last tensor
// holding it (views from Reshape share it) becomes unreachable, or at once
// by Release.
type devBuf struct {
	e       *engine
	ptr     accel.Ptr
	bytes   int64
	cleanup runtime.Cleanup
	freed   bool
}

type devFree struct {
	e     *engine
	ptr   accel.Ptr
	bytes int64
}

// newDevBuf allocates n floats (uninitialised) on e.
func newDevBuf(e *engine, n int) *devBuf {
	bytes := 4 * int64(max(n, 1))
	p, err := e.e.AllocPtr(bytes)
	if err != nil {
		panic(fmt.Sprintf("radgen: allocating %d bytes on %v: %v", bytes, e.dev, err))
	}
	e.live.Add(bytes)
	b := &devBuf{e: e, ptr: p, bytes: bytes}
	b.cleanup = runtime.AddCleanup(b, func(f devFree) {
		_ = f.e.e.FreePtr(f.ptr) // an engine closed under it has freed it already
		f.e.live.Add(-f.bytes)
	}, devFree{e, p, bytes})
	return b
}

// onDevice returns a float32 tensor of shape on e whose storage is buf
// (new, uninitialised, when buf is nil).
func onDevice(e *engine, buf *devBuf, shape []int) *Tensor {
	n := checkShape(shape)
	if buf == nil {
		buf = newDevBuf(e, n)
	}
	s := append([]int(nil), shape...)
	ds := s
	if len(ds) == 0 {
		ds = []int{1}
	}
	d := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(ds...), tensor.WithEngine(e.gorg),
		tensor.FromMemory(uintptr(buf.ptr), uintptr(4*n)))
	return &Tensor{dense: d, shape: s, device: e.dev, buf: buf}
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

// FromDense wraps an existing *tensor.Dense of dtype Float32 or Float64 in
// host memory. A Float32 dense in the memory of a device's engine (the
// Dense of a device Tensor) is copied into a new tensor on that device; any
// other memory that Go cannot access is refused.
func FromDense(d *tensor.Dense) (*Tensor, error) {
	switch d.Dtype() {
	case tensor.Float32, tensor.Float64:
	default:
		return nil, fmt.Errorf("radgen: unsupported dtype %v", d.Dtype())
	}
	if !d.IsNativelyAccessible() {
		dev, ok := engineDevice(d.Engine())
		if !ok {
			return nil, fmt.Errorf("radgen: dense tensor is in the memory of an engine radgen does not know")
		}
		if d.Dtype() != tensor.Float32 {
			return nil, fmt.Errorf("radgen: %v tensor on %v: devices hold float32 only", d.Dtype(), dev)
		}
		if !d.DataOrder().IsRowMajor() {
			return nil, fmt.Errorf("radgen: dense tensor on %v is not row-major", dev)
		}
		e := mustEngine("FromDense", dev)
		shape := append([]int(nil), d.Shape()...)
		n := numel(shape)
		if int64(d.MemSize()) < 4*int64(n) {
			return nil, fmt.Errorf("radgen: dense tensor of shape %v holds %d bytes", shape, d.MemSize())
		}
		t := onDevice(e, nil, shape)
		if n > 0 {
			if err := e.e.CopyDevice(t.buf.ptr, accel.Ptr(d.Uintptr()), 4*int64(n)); err != nil {
				return nil, fmt.Errorf("radgen: copying a dense tensor on %v: %w", dev, err)
			}
		}
		runtime.KeepAlive(d)
		return t, nil
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

func fromSlice[T float](data []T, dt tensor.Dtype, shape []int) *Tensor {
	n := checkShape(shape)
	if len(data) != n {
		panic(fmt.Sprintf("radgen: %d values for shape %v", len(data), slices.Clone(shape)))
	}
	return &Tensor{host: data, shape: append([]int(nil), shape...), device: CPU}
}

func checkShape(shape []int) int {
	n := 1
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("radgen: negative dimension in shape %v", slices.Clone(shape))) // a copy: shape stays on its caller's stack
		}
		if s != 0 && n > math.MaxInt32*64/s {
			panic(fmt.Sprintf("radgen: shape %v too large", slices.Clone(shape)))
		}
		n *= s
	}
	return n
}

// like returns a zero tensor with t's dtype and the given shape.
func like(t *Tensor, shape []int) *Tensor { return newTensor(t.dtype(), shape) }

// dtype returns the element type of t.
func (t *Tensor) dtype() tensor.Dtype {
	switch t.host.(type) {
	case []float32, *[]float32:
		return tensor.Float32
	case []float64:
		return tensor.Float64
	case *half.Weights:
		return tensor.Uint16 // binary16 bits (ToHalf)
	}
	return t.dense.Dtype()
}

// Dense returns the underlying storage. Its shape is t's shape, except that
// a scalar is stored as shape [1]. On the CPU it shares t's values; a
// tensor made from a slice gets a new Dense over them at each call.
func (t *Tensor) Dense() *tensor.Dense {
	if t.IsHalf() {
		panic("radgen: Dense of a half-precision tensor (To32 widens it)")
	}
	if t.dense != nil {
		return t.dense
	}
	// tensor.Dense wants at least one dimension; a scalar is stored as [1].
	ds := append([]int(nil), t.shape...)
	if len(ds) == 0 {
		ds = []int{1}
	}
	t.ready()
	backing := t.host
	if p, ok := backing.(*[]float32); ok {
		backing = *p
	}
	return tensor.New(tensor.WithShape(ds...), tensor.WithBacking(backing), tensor.Of(t.dtype()))
}

// Shape returns the dimensions of t, or nil for a nil t (so that an error
// about a missing tensor can print its shape). The caller must not modify
// it.
func (t *Tensor) Shape() []int {
	if t == nil {
		return nil
	}
	return t.shape
}

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
func (t *Tensor) Len() int { return numel(t.shape) }

// Device returns where t's storage lives.
func (t *Tensor) Device() Device { return t.device }

// Is64 reports whether t holds float64 values.
func (t *Tensor) Is64() bool { return t.dtype() == tensor.Float64 }

// Data returns the float32 values of t (shared, not copied). It panics if t
// holds float64 or lives off the CPU (To(CPU) copies it there). Since the
// slice may be written, Data counts as a write of t: what the engine
// prepared from t's values (a convolution's packed weight) is prepared
// again at its next use. A write through a slice kept from an earlier call
// is not seen that way: call Data again after it.
func (t *Tensor) Data() []float32 {
	t.version.Add(1)
	return values[float32](t)
}

// Data64 returns the float64 values of t (shared, not copied). Like Data,
// it counts as a write of t.
func (t *Tensor) Data64() []float64 {
	t.version.Add(1)
	return values[float64](t)
}

// changed records an in-place write of t's values.
func (t *Tensor) changed() { t.version.Add(1) }

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
	if t.device != CPU {
		return t.Float64s()[off]
	}
	if t.Is64() {
		return values[float64](t)[off]
	}
	return float64(values[float32](t)[off])
}

// Float64s returns a float64 copy of t's values, whatever its dtype.
func (t *Tensor) Float64s() []float64 {
	if t.IsHalf() {
		return FromFloat32(t.halfValues(), t.shape...).Float64s()
	}
	if t.Is64() {
		return append([]float64(nil), values[float64](t)...)
	}
	src := t.hostCopy()
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

// Grad returns the gradient accumulated by Graph.Backward, or nil. Backward
// keeps the gradients of the tensors it reaches that no op of the graph
// made (parameters, and inputs marked with SetRequiresGrad); an op's
// result keeps none once its gradient has been sent on (its storage may
// have become an input's gradient), as PyTorch keeps no gradient of a
// non-leaf tensor.
func (t *Tensor) Grad() *Tensor { return t.grad }

// ZeroGrad drops t's accumulated gradient.
func (t *Tensor) ZeroGrad() { t.grad = nil }

// Clone returns a deep copy of t's values, on t's device, that does not
// require gradients.
func (t *Tensor) Clone() *Tensor {
	if t.device != CPU {
		return devClone(t)
	}
	c := like(t, t.shape)
	if t.Is64() {
		copy(hostValues[float64](c), values[float64](t))
	} else {
		copy(hostValues[float32](c), values[float32](t))
	}
	return c
}

// To64 returns a float64 copy of t on the CPU.
func (t *Tensor) To64() *Tensor { return FromFloat64(t.Float64s(), t.shape...) }

// To32 returns a float32 copy of t on the CPU.
func (t *Tensor) To32() *Tensor {
	if t.IsHalf() {
		return FromFloat32(t.halfValues(), t.shape...)
	}
	if !t.Is64() {
		if t.device != CPU {
			return FromFloat32(t.hostCopy(), t.shape...)
		}
		return t.Clone()
	}
	src := values[float64](t)
	out := make([]float32, len(src))
	for i, v := range src {
		out[i] = float32(v)
	}
	return FromFloat32(out, t.shape...)
}

// String describes t's shape and dtype.
func (t *Tensor) String() string {
	if t.IsHalf() {
		return fmt.Sprintf("Tensor%v(float16, %v)", t.shape, t.device)
	}
	return fmt.Sprintf("Tensor%v(%v, %v)", t.shape, t.dtype(), t.device)
}

func values[T float](t *Tensor) []T {
	t.ready()
	return hostValues[T](t)
}

// hostValues is values without the wait for a deferred product: the
// slice that a pending product writes into. A deferred convolution's value
// is computed first.
func hostValues[T float](t *Tensor) []T {
	if t.lazy != nil {
		t.resolveLazy()
	}
	if t.device != CPU {
		panic("radgen: host access to a tensor on " + t.device.String() + " (copy it to the CPU with To(radgen.CPU), or the op does not run on devices yet)")
	}
	v, ok := t.host.([]T)
	if p, isArena := t.host.(*[]T); isArena {
		v, ok = *p, true
	}
	if !ok {
		var z T
		if t.IsHalf() {
			panic(fmt.Sprintf("radgen: half-precision tensor accessed as %T: only Linear reads it as its weight (To32 widens it)", z))
		}
		panic(fmt.Sprintf("radgen: tensor of %v accessed as %T", t.dtype(), z))
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
