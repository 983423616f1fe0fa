package radgen

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/radgen/radgen/internal/accel"
)

// engine is one device's accel.Engine, opened on first use and kept for the
// life of the process: every tensor on the device shares it.
type engine struct {
	dev  Device
	e    accel.Engine
	gorg *gorgEngine
	// prims runs the ops' primitives on e (devPrims).
	prims prims
	live  atomic.Int64 // bytes of tensor storage allocated and not yet freed
}

var engines struct {
	sync.Mutex
	m map[Device]*engine
}

// engineOf returns d's engine, opening it on first use. CPU has none.
func engineOf(d Device) (*engine, error) {
	engines.Lock()
	defer engines.Unlock()
	if e := engines.m[d]; e != nil {
		return e, nil
	}
	var (
		ae  accel.Engine
		err error
	)
	switch d.kind() {
	case kindReference:
		if d.Ordinal() != 0 {
			return nil, fmt.Errorf("radgen: no device %v", d)
		}
		ae = accel.NewHost()
	case kindCUDA:
		ae, err = accel.OpenCUDA(d.Ordinal())
		if err != nil {
			return nil, fmt.Errorf("radgen: device %v: %w", d, err)
		}
	default:
		return nil, fmt.Errorf("radgen: no engine for device %v", d)
	}
	e := &engine{dev: d, e: ae}
	e.gorg = &gorgEngine{e}
	e.prims = devPrims{e}
	if engines.m == nil {
		engines.m = map[Device]*engine{}
	}
	engines.m[d] = e
	return e, nil
}

// mustEngine is engineOf for tensors that already live on d (whose engine
// is therefore open) and for To, where an unusable device is a programmer
// error.
func mustEngine(op string, d Device) *engine {
	e, err := engineOf(d)
	if err != nil {
		panic(fmt.Sprintf("radgen: %s: %v", op, err))
	}
	return e
}

// liveBytes returns the bytes of tensor storage allocated on d and not yet
// freed (the engine's own count where it keeps one, such as the reference
// engine's).
func liveBytes(d Device) int64 {
	e, err := engineOf(d)
	if err != nil {
		return 0
	}
	if lb, ok := e.e.(accel.LiveByter); ok {
		return lb.LiveBytes()
	}
	return e.live.Load()
}

// devMemory is a buffer of an engine as gorgonia's tensor.Memory.
type devMemory struct {
	ptr  accel.Ptr
	size uintptr
}

func (m devMemory) Uintptr() uintptr { return uintptr(m.ptr) }
func (m devMemory) MemSize() uintptr { return m.size }

// gorgEngine exposes an engine to gorgonia.org/tensor, so that a device
// tensor's *tensor.Dense knows where its memory lives. Its memory is not
// accessible from Go.
type gorgEngine struct{ e *engine }

var errNotAccessible = errors.New("radgen: device memory is not accessible from Go; copy the tensor to the CPU first")

// AllocAccessible implements tensor.Engine.
func (g *gorgEngine) AllocAccessible() bool { return false }

// Alloc implements tensor.Engine.
func (g *gorgEngine) Alloc(size int64) (tensor.Memory, error) {
	p, err := g.e.e.AllocPtr(size)
	if err != nil {
		return nil, err
	}
	return devMemory{p, uintptr(size)}, nil
}

// Free implements tensor.Engine.
func (g *gorgEngine) Free(mem tensor.Memory, size int64) error {
	return g.e.e.FreePtr(accel.Ptr(mem.Uintptr()))
}

// Memset implements tensor.Engine for float32 values.
func (g *gorgEngine) Memset(mem tensor.Memory, val any) error {
	v, ok := val.(float32)
	if !ok {
		return fmt.Errorf("radgen: Memset of %T on %v", val, g.e.dev)
	}
	return g.e.e.Fill(accel.Ptr(mem.Uintptr()), v, int(mem.MemSize()/4))
}

// Memclr implements tensor.Engine.
func (g *gorgEngine) Memclr(mem tensor.Memory) {
	_ = g.e.e.Fill(accel.Ptr(mem.Uintptr()), 0, int(mem.MemSize()/4))
}

// Memcpy implements tensor.Engine between two buffers of the engine.
func (g *gorgEngine) Memcpy(dst, src tensor.Memory) error {
	if dst.MemSize() < src.MemSize() {
		return fmt.Errorf("radgen: Memcpy of %d bytes into %d", src.MemSize(), dst.MemSize())
	}
	return g.e.e.CopyDevice(accel.Ptr(dst.Uintptr()), accel.Ptr(src.Uintptr()), int64(src.MemSize()))
}

// Accessible implements tensor.Engine: device memory never is.
func (g *gorgEngine) Accessible(mem tensor.Memory) (tensor.Memory, error) {
	return nil, errNotAccessible
}

// WorksWith implements tensor.Engine: row-major data only.
func (g *gorgEngine) WorksWith(order tensor.DataOrder) bool { return order.IsRowMajor() }

// engineDevice returns the device whose engine e is, if e is one of ours.
func engineDevice(e tensor.Engine) (Device, bool) {
	g, ok := e.(*gorgEngine)
	if !ok {
		return CPU, false
	}
	return g.e.dev, true
}
