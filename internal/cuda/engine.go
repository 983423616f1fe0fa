//go:build cuda

package cuda

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"gorgonia.org/tensor"
)

// DeviceInfo describes the GPU an Engine runs on.
type DeviceInfo struct {
	Ordinal       int
	Name          string
	TotalMemory   uint64 // bytes
	Major, Minor  int    // compute capability
	SMs           int    // multiprocessors
	DriverVersion int    // 1000*major + 10*minor of the CUDA version the driver supports
	CUBLASVersion int    // cublasGetVersion, 0 without cuBLAS
	// PeakBandwidth is the theoretical DRAM bandwidth in bytes/s (2 × memory
	// clock × bus width), 0 when the driver does not report it.
	PeakBandwidth float64
}

// Option configures NewEngine.
type Option func(*options)

type options struct {
	tf32 bool
}

// WithTF32 lets cuBLAS use TF32 tensor cores in Gemm and GemmStrided (compute
// capability 8.0 and newer): several times faster, about 1e-3 relative error.
// The default is off: GEMMs are computed in full float32.
func WithTF32(on bool) Option { return func(o *options) { o.tf32 = on } }

// Engine is a CUDA device: its primary context, one stream, a cuBLAS handle,
// the radgen kernels and a caching allocator. It implements tensor.Engine,
// so a *tensor.Dense made with tensor.WithEngine(e) (or by NewDense) keeps
// its data in device memory; such a Dense is NativelyInaccessible and
// ManuallyManaged: never call its Data or element accessors (they would read
// a device address), and give its memory back with FreeDense or Free.
//
// All work runs in order on the engine's stream; kernel launches and Gemm
// return before the device has finished (errors of the kernel itself show up
// at the next synchronising call), copies to and from host memory wait.
// Every call makes the engine's context current on the calling OS thread, so
// an Engine may be used from any goroutine, and concurrently: calls from
// different goroutines are queued in whatever order they arrive. Close must
// be called when done; there are no finalizers.
type Engine struct {
	mu      sync.RWMutex
	c       *C.rg_ctx
	closed  bool
	alloc   *allocator
	mod     C.rg_CUmodule
	fn      [numKernels]C.rg_CUfunction
	info    DeviceInfo
	maxGrid int   // cap on grid-stride grids
	blasErr error // why Gemm is unavailable, nil if it is

	// launched, when set (tests of the launchers without a GPU), receives
	// every kernel launch instead of the device.
	launched func(k kernel, grid, block dim3, a *args) error
}

var (
	_ tensor.Engine       = (*Engine)(nil)
	_ tensor.NonStdEngine = (*Engine)(nil)
)

// NewEngine opens CUDA device number device (0 for the first GPU). It fails
// with an error matching ErrNoDriver or ErrNoDevice on a machine without a
// usable GPU; it never exits the process.
func NewEngine(device int, opts ...Option) (*Engine, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if device < 0 || device >= n {
		return nil, &Error{Op: "NewEngine", Code: cudaErrorInvalidDevice, Name: "CUDA_ERROR_INVALID_DEVICE",
			Detail: fmt.Sprintf("device %d of %d", device, n)}
	}
	e := &Engine{}
	e.blasErr = loadCUBLAS()
	if err := status("NewEngine", C.rg_ctx_open(C.int(device), &e.c)); err != nil {
		return nil, err
	}
	e.alloc = newAllocator(driverMem{e})
	if err := e.init(device, o); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) init(device int, o options) error {
	var (
		name                          [256]C.char
		total                         C.size_t
		major, minor, sms, bus, clock C.int
	)
	if err := status("DeviceInfo", C.rg_device_info(e.c, &name[0], C.int(len(name)), &total,
		&major, &minor, &sms, &bus, &clock)); err != nil {
		return err
	}
	e.info = DeviceInfo{
		Ordinal:     device,
		Name:        C.GoString(&name[0]),
		TotalMemory: uint64(total),
		Major:       int(major), Minor: int(minor), SMs: int(sms),
		PeakBandwidth: 2 * float64(clock) * 1e3 * float64(bus) / 8,
	}
	e.info.DriverVersion, _ = DriverVersion()
	e.maxGrid = max(1, e.info.SMs) * 32
	if e.blasErr == nil {
		var v C.int
		if err := status("cublasGetVersion", C.rg_blas_version(e.c, &v)); err != nil {
			return err
		}
		e.info.CUBLASVersion = int(v)
		if o.tf32 {
			const cublasTF32TensorOpMath = 3
			if err := status("WithTF32", C.rg_blas_set_math_mode(e.c, cublasTF32TensorOpMath)); err != nil {
				return err
			}
		}
	}
	return e.loadKernels()
}

// Info describes the engine's device.
func (e *Engine) Info() DeviceInfo { return e.info }

// Close waits for queued work, frees every allocation of the engine (cached
// or live: tensors of this engine must not be used afterwards), unloads the
// kernels, destroys the cuBLAS handle and stream and releases the context.
// Calling Close again does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.c == nil {
		e.closed = true
		return nil
	}
	var errs []error
	errs = append(errs, status("Close", C.rg_sync(e.c)))
	if e.alloc != nil {
		errs = append(errs, e.alloc.releaseAll())
	}
	if e.mod != nil {
		errs = append(errs, status("Close", C.rg_module_unload(e.c, e.mod)))
		e.mod = nil
	}
	errs = append(errs, status("Close", C.rg_ctx_close(e.c)))
	e.c = nil
	e.closed = true
	return errors.Join(errs...)
}

// enter takes the engine's read lock for one call; leave releases it.
func (e *Engine) enter() (*C.rg_ctx, error) {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, ErrClosed
	}
	return e.c, nil
}

func (e *Engine) leave() { e.mu.RUnlock() }

// Sync waits until all work queued on the engine has finished and returns
// the first error a kernel raised, if any.
func (e *Engine) Sync() error {
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("Sync", C.rg_sync(c))
}

// MemInfo returns the device's free and total memory as the driver sees it.
func (e *Engine) MemInfo() (free, total uint64, err error) {
	c, err := e.enter()
	if err != nil {
		return 0, 0, err
	}
	defer e.leave()
	var f, t C.size_t
	err = status("MemInfo", C.rg_mem_info(c, &f, &t))
	return uint64(f), uint64(t), err
}

// MemStats returns the caching allocator's counters.
func (e *Engine) MemStats() MemStats { return e.alloc.stats() }

// EmptyCache gives the allocator's cached blocks back to the driver.
func (e *Engine) EmptyCache() error {
	if _, err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.alloc.releaseCached()
}

// driverMem is the allocator backend of a live engine. Its methods run with
// the engine's lock already held by the caller.
type driverMem struct{ e *Engine }

func (d driverMem) malloc(n uintptr) (Ptr, error) {
	var p C.rg_CUdeviceptr
	if err := status("Alloc", C.rg_malloc(d.e.c, C.size_t(n), &p)); err != nil {
		return 0, err
	}
	return Ptr(p), nil
}

func (d driverMem) free(p Ptr) error {
	return status("Free", C.rg_free(d.e.c, C.rg_CUdeviceptr(p)))
}

func (d driverMem) sync() error { return status("Sync", C.rg_sync(d.e.c)) }

// ---- raw memory ----------------------------------------------------------------

// DeviceMemory is a block of device memory from Engine.Alloc; it implements
// tensor.Memory.
type DeviceMemory struct {
	ptr  Ptr
	size uintptr
}

// Uintptr returns the device address.
func (m DeviceMemory) Uintptr() uintptr { return uintptr(m.ptr) }

// MemSize returns the size asked for, in bytes.
func (m DeviceMemory) MemSize() uintptr { return m.size }

// Ptr returns the device address.
func (m DeviceMemory) Ptr() Ptr { return m.ptr }

// hostMemory is Go memory handed out by Accessible.
type hostMemory []byte

func (m hostMemory) Uintptr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(m))) }
func (m hostMemory) MemSize() uintptr { return uintptr(len(m)) }

// Bytes returns the host copy.
func (m hostMemory) Bytes() []byte { return m }

// AllocAccessible reports false: the engine's memory is not Go memory.
func (e *Engine) AllocAccessible() bool { return false }

// NonStdAlloc marks the engine as tensor.NonStdEngine, so tensors it
// allocates are flagged ManuallyManaged.
func (e *Engine) NonStdAlloc() {}

// Alloc returns size bytes of uninitialised device memory (from the cache
// when a freed block of the same size class is there), aligned to 256 bytes.
func (e *Engine) Alloc(size int64) (tensor.Memory, error) {
	p, err := e.AllocPtr(size)
	if err != nil {
		return nil, err
	}
	return DeviceMemory{p, uintptr(size)}, nil
}

// AllocPtr is Alloc returning the bare address.
func (e *Engine) AllocPtr(size int64) (Ptr, error) {
	if size < 0 {
		return 0, fmt.Errorf("cuda: Alloc: negative size %d", size)
	}
	if _, err := e.enter(); err != nil {
		return 0, err
	}
	defer e.leave()
	return e.alloc.alloc(uintptr(size))
}

// Free returns memory from Alloc (or the memory of a tensor of this engine)
// to the cache. size is not needed and ignored: the engine knows each
// block's size. Freeing a view into a block, or a block twice, returns
// ErrNotAllocated.
func (e *Engine) Free(mem tensor.Memory, size int64) error {
	return e.FreePtr(Ptr(mem.Uintptr()))
}

// FreePtr is Free by address.
func (e *Engine) FreePtr(p Ptr) error {
	if _, err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.alloc.free(p)
}

// devicePtr returns the device address of mem if it is device memory of
// this engine (DeviceMemory, or a *tensor.Dense made with this engine).
func (e *Engine) devicePtr(mem tensor.Memory) (Ptr, bool) {
	switch m := mem.(type) {
	case DeviceMemory:
		return m.ptr, true
	case *tensor.Dense:
		if !m.IsNativelyAccessible() && m.Engine() == tensor.Engine(e) {
			return Ptr(m.Uintptr()), true
		}
	}
	return 0, false
}

// hostBytes returns the bytes of mem if it is Go memory: a hostMemory from
// Accessible, or a natively accessible *tensor.Dense.
func hostBytes(mem tensor.Memory) ([]byte, bool) {
	switch m := mem.(type) {
	case hostMemory:
		return m, true
	case *tensor.Dense:
		if !m.IsNativelyAccessible() || m.IsScalar() {
			return nil, false
		}
		switch s := m.Data().(type) {
		case []float32:
			return sliceBytes(s), true
		case []float64:
			return sliceBytes(s), true
		case []int32:
			return sliceBytes(s), true
		case []int64:
			return sliceBytes(s), true
		case []int:
			return sliceBytes(s), true
		case []uint8:
			return s, true
		}
	}
	return nil, false
}

func sliceBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// Memset fills device memory with val: a float32 (float64 and untyped
// constants are converted), int32, uint32 or int (fill 4-byte words; the
// size must be a multiple of 4), or a byte.
func (e *Engine) Memset(mem tensor.Memory, val interface{}) error {
	p, ok := e.devicePtr(mem)
	if !ok {
		return fmt.Errorf("cuda: Memset: %T is not device memory of this engine", mem)
	}
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	size := mem.MemSize()
	var word uint32
	switch v := val.(type) {
	case uint8:
		return status("Memset", C.rg_memset_d8(c, C.rg_CUdeviceptr(p), C.uchar(v), C.size_t(size)))
	case float32:
		word = math.Float32bits(v)
	case float64:
		word = math.Float32bits(float32(v))
	case int32:
		word = uint32(v)
	case uint32:
		word = v
	case int:
		word = uint32(int32(v))
	default:
		return fmt.Errorf("cuda: Memset: unsupported value type %T", val)
	}
	if size%4 != 0 {
		return fmt.Errorf("cuda: Memset: %d bytes is not a whole number of 4-byte words", size)
	}
	return status("Memset", C.rg_memset_d32(c, C.rg_CUdeviceptr(p), C.uint(word), C.size_t(size/4)))
}

// Memclr zeroes device memory. It has no error result (tensor.Engine);
// an error shows up at the next Sync.
func (e *Engine) Memclr(mem tensor.Memory) {
	_ = e.Memset(mem, uint8(0))
}

// Memcpy copies src.MemSize() bytes into dst. Each side is device memory of
// this engine (DeviceMemory, or a *tensor.Dense of the engine) or host
// memory (a host *tensor.Dense, or what Accessible returned).
func (e *Engine) Memcpy(dst, src tensor.Memory) error {
	n := src.MemSize()
	if dst.MemSize() < n {
		return fmt.Errorf("cuda: Memcpy: %d bytes into %d", n, dst.MemSize())
	}
	dp, dDev := e.devicePtr(dst)
	sp, sDev := e.devicePtr(src)
	switch {
	case dDev && sDev:
		return e.CopyDevice(dp, sp, int64(n))
	case dDev:
		if b, ok := hostBytes(src); ok {
			return e.copyIn(dp, b[:n])
		}
	case sDev:
		if b, ok := hostBytes(dst); ok {
			return e.copyOut(b[:n], sp)
		}
	}
	return fmt.Errorf("cuda: Memcpy: cannot copy %T to %T", src, dst)
}

// Accessible returns a host copy of device memory (host memory is returned
// as it is). The copy is a snapshot: writing it does not change the device.
func (e *Engine) Accessible(mem tensor.Memory) (tensor.Memory, error) {
	p, ok := e.devicePtr(mem)
	if !ok {
		return mem, nil
	}
	h := make(hostMemory, mem.MemSize())
	if err := e.copyOut(h, p); err != nil {
		return nil, err
	}
	return h, nil
}

// WorksWith reports whether the kernels handle the data order: row-major,
// contiguous, not transposed.
func (e *Engine) WorksWith(order tensor.DataOrder) bool {
	return order.IsRowMajor() && order.IsContiguous() && !order.IsTransposed()
}

// ---- copies ---------------------------------------------------------------------

func (e *Engine) copyIn(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("CopyIn", C.rg_htod(c, C.rg_CUdeviceptr(dst), unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src))))
}

func (e *Engine) copyOut(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("CopyOut", C.rg_dtoh(c, unsafe.Pointer(unsafe.SliceData(dst)), C.rg_CUdeviceptr(src), C.size_t(len(dst))))
}

// CopyIn copies len(src) float32s from the host to dst and waits.
func (e *Engine) CopyIn(dst Ptr, src []float32) error { return e.copyIn(dst, sliceBytes(src)) }

// CopyInInt32 copies int32s (token ids, beam indices) to dst and waits.
func (e *Engine) CopyInInt32(dst Ptr, src []int32) error { return e.copyIn(dst, sliceBytes(src)) }

// CopyOut copies len(dst) float32s from src to the host, after all queued
// work, and waits.
func (e *Engine) CopyOut(dst []float32, src Ptr) error { return e.copyOut(sliceBytes(dst), src) }

// CopyOutInt32 copies len(dst) int32s from src to the host and waits.
func (e *Engine) CopyOutInt32(dst []int32, src Ptr) error { return e.copyOut(sliceBytes(dst), src) }

// CopyDevice queues a copy of n bytes from src to dst on the device.
func (e *Engine) CopyDevice(dst, src Ptr, n int64) error {
	if n <= 0 {
		return nil
	}
	c, err := e.enter()
	if err != nil {
		return err
	}
	defer e.leave()
	return status("CopyDevice", C.rg_dtod(c, C.rg_CUdeviceptr(dst), C.rg_CUdeviceptr(src), C.size_t(n)))
}

// ---- tensors ---------------------------------------------------------------------

// NewDense returns an uninitialised float32 tensor of the given shape in
// device memory. Free it with FreeDense.
func (e *Engine) NewDense(shape ...int) (*tensor.Dense, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("cuda: NewDense: negative dimension in %v", shape)
		}
		n *= d
	}
	size := int64(n) * 4
	p, err := e.AllocPtr(size)
	if err != nil {
		return nil, err
	}
	return e.WrapDense(p, shape...), nil
}

// WrapDense makes a float32 *tensor.Dense of the given shape over device
// memory at p, without allocating: the caller keeps ownership of p.
func (e *Engine) WrapDense(p Ptr, shape ...int) *tensor.Dense {
	n := 1
	for _, d := range shape {
		n *= d
	}
	// FromMemory comes last: the Dense then has its data and never asks the
	// engine to allocate (tensor's makeArray would panic on an error).
	return tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape...),
		tensor.WithEngine(e), tensor.FromMemory(uintptr(p), uintptr(n)*4))
}

// FromHost copies data to a new device tensor of the given shape
// (len(data) must equal the shape's size).
func (e *Engine) FromHost(data []float32, shape ...int) (*tensor.Dense, error) {
	t, err := e.NewDense(shape...)
	if err != nil {
		return nil, err
	}
	if t.Len() != len(data) {
		e.FreeDense(t)
		return nil, fmt.Errorf("cuda: FromHost: %d values for shape %v", len(data), shape)
	}
	if err := e.CopyIn(Ptr(t.Uintptr()), data); err != nil {
		e.FreeDense(t)
		return nil, err
	}
	return t, nil
}

// ToHost copies a device tensor's float32 data into dst (len(dst) must be
// at least t.Len()) and returns dst[:t.Len()].
func (e *Engine) ToHost(dst []float32, t *tensor.Dense) ([]float32, error) {
	if len(dst) < t.Len() {
		return nil, fmt.Errorf("cuda: ToHost: %d values into %d", t.Len(), len(dst))
	}
	dst = dst[:t.Len()]
	return dst, e.CopyOut(dst, Ptr(t.Uintptr()))
}

// FreeDense returns a device tensor's memory to the engine's cache. The
// tensor must not be used afterwards.
func (e *Engine) FreeDense(t *tensor.Dense) error { return e.FreePtr(Ptr(t.Uintptr())) }
