package radgen

import (
	"fmt"
	"runtime"

	"github.com/radgen/radgen/internal/accel"
)

// To returns t on dev: t itself when it is already there, otherwise a copy
// that requires gradients when t does (its gradient is not copied). Devices
// hold float32 only: To panics for a float64 tensor and a device other than
// the CPU, and when dev cannot be used ([Device.Check] says why).
func (t *Tensor) To(dev Device) *Tensor {
	if t.device == dev {
		return t
	}
	var out *Tensor
	if dev == CPU {
		out = FromFloat32(t.hostCopy(), t.shape...)
	} else {
		if t.Is64() {
			panic(fmt.Sprintf("radgen: To(%v) of a float64 tensor: devices hold float32 only (float64 is for gradient checks on the CPU)", dev))
		}
		e := mustEngine("To", dev)
		out = onDevice(e, nil, t.shape)
		var src []float32
		if t.device == CPU {
			src = values[float32](t)
		} else {
			src = t.hostCopy()
		}
		if len(src) > 0 {
			e.must("To", e.e.CopyIn(out.buf.ptr, src))
		}
		runtime.KeepAlive(out)
	}
	out.requiresGrad = t.requiresGrad
	return out
}

// hostCopy returns t's float32 values in a new slice (t on any device).
func (t *Tensor) hostCopy() []float32 {
	if t.device == CPU {
		return append([]float32(nil), values[float32](t)...)
	}
	out := make([]float32, t.Len())
	if len(out) > 0 {
		t.buf.e.must("copy to the CPU", t.buf.e.e.CopyOut(out, t.buf.ptr))
	}
	runtime.KeepAlive(t)
	return out
}

// writeHost sets t's float32 values from src (t on any device).
func (t *Tensor) writeHost(src []float32) {
	if t.device == CPU {
		copy(t.Data(), src)
		return
	}
	if len(src) > 0 {
		t.buf.e.must("copy from the CPU", t.buf.e.e.CopyIn(t.buf.ptr, src))
	}
	runtime.KeepAlive(t)
}

// ToDevice moves every parameter and buffer of m to dev in place: the
// module keeps its tensors, whose storage now lives on dev (gradients are
// dropped). Devices hold float32 only, so a float64 tensor (Promote64) can
// move only to the CPU. It returns an error, and moves nothing, when dev
// cannot be used or a tensor is float64.
func ToDevice(m Module, dev Device) error {
	if err := dev.Check(); err != nil {
		return err
	}
	var err error
	if dev != CPU {
		m.VisitParams(func(name string, t *Tensor) {
			if err == nil && t.Is64() {
				err = fmt.Errorf("radgen: moving %q to %v: float64 tensors stay on the CPU", name, dev)
			}
		})
		if err != nil {
			return err
		}
	}
	m.VisitParams(func(_ string, t *Tensor) {
		if t.device == dev {
			return
		}
		c := t.To(dev)
		t.dense, t.host, t.buf, t.device, t.grad = c.dense, c.host, c.buf, c.device, nil
		t.changed()
	})
	return nil
}

// must panics with op's name when an engine call failed: on a device, a
// failed kernel is as fatal as an out-of-range index on the CPU.
func (e *engine) must(op string, err error) {
	if err != nil {
		panic(fmt.Sprintf("radgen: %s on %v: %v", op, e.dev, err))
	}
}

func keep(ts ...*Tensor) { runtime.KeepAlive(ts) }

// ptr returns the device address of element off of t.
func (t *Tensor) ptr(off int) accel.Ptr { return t.buf.ptr.Add(off) }

func (t *Tensor) eng() *engine { return t.buf.e }

// devNew returns an uninitialised tensor on t's device.
func devNew(t *Tensor, shape []int) *Tensor { return onDevice(t.eng(), nil, shape) }

// devFull returns a tensor on t's device filled with v.
func devFull(t *Tensor, shape []int, v float32) *Tensor {
	out := devNew(t, shape)
	if n := out.Len(); n > 0 {
		out.eng().must("Fill", out.eng().e.Fill(out.ptr(0), v, n))
	}
	keep(out)
	return out
}

func devClone(t *Tensor) *Tensor {
	out := devNew(t, t.shape)
	if n := t.Len(); n > 0 {
		t.eng().must("Clone", t.eng().e.CopyDevice(out.ptr(0), t.ptr(0), 4*int64(n)))
	}
	keep(t, out)
	return out
}

// devView returns a tensor of shape sharing t's storage.
func devView(t *Tensor, shape []int) *Tensor { return onDevice(t.eng(), t.buf, shape) }

// devIDs copies ids to a new int32 buffer on t's device.
func devIDs(t *Tensor, ids []int) *Tensor {
	v := make([]int32, len(ids))
	for i, id := range ids {
		v[i] = int32(id)
	}
	b := devNew(t, []int{len(ids)})
	if len(v) > 0 {
		b.eng().must("ids", b.eng().e.CopyInInt32(b.ptr(0), v))
	}
	keep(b)
	return b
}

// Batch norm on a device: the per-channel statistics and coefficients (C
// values) are computed on the host in float64, as on the CPU; everything of
// the input's size runs on the device.
