package radgen

import (
	"fmt"
	"runtime"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/kernels"
)

// The device backend. Every public op of a Graph dispatches once, on entry,
// on its operands' device: the CPU runs the fused host kernels of the op's
// own file (internal/kernels, internal/f32), any other device runs the
// functions of this file, which express the op's forward and backward
// passes with the primitives of accel.Engine (accel.Trainer and the
// decoding methods). The reference engine runs those primitives with the
// CPU kernels, so that the device path is tested on any machine against
// the CPU path.
//
// Devices hold float32 only. Every function here keeps its operands alive
// (keep) until the engine calls that use their buffers have returned, since
// a device buffer is freed when its tensor becomes unreachable.

// deviceOf returns the device of the non-nil operands of op; it panics when
// they differ.
func deviceOf(op string, ts ...*Tensor) Device {
	var d Device
	first := true
	for _, t := range ts {
		if t == nil {
			continue
		}
		if first {
			d, first = t.device, false
		} else if t.device != d {
			panic(fmt.Sprintf("radgen: %s: operands on %v and %v", op, d, t.device))
		}
	}
	return d
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

// devAxpy adds alpha·src to dst (same number of elements).
func devAxpy(op string, dst, src *Tensor, alpha float32) {
	if n := dst.Len(); n > 0 {
		dst.eng().must(op, dst.eng().e.Axpy(dst.ptr(0), src.ptr(0), alpha, n))
	}
	keep(dst, src)
}

func requireFloat32(op string, ts ...*Tensor) {
	for _, t := range ts {
		if t != nil && t.Is64() {
			panic(fmt.Sprintf("radgen: %s: float64 tensor on %v", op, t.device))
		}
	}
}

// contiguous returns the row-major strides of shape.
func contiguous(shape []int) []int {
	st := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= shape[i]
	}
	return st
}

// broadcastStrides returns the strides, in out's dimensions, of an operand
// of shape broadcast (NumPy rules) to out: 0 along broadcast dimensions.
func broadcastStrides(shape, out []int) []int {
	st := make([]int, len(out))
	acc := 1
	for i := len(out) - 1; i >= 0; i-- {
		j := i - (len(out) - len(shape))
		if j >= 0 && shape[j] != 1 {
			st[i] = acc
			acc *= shape[j]
		}
	}
	return st
}

// gemm is GemmStrided over tensors (element offsets 0).
func gemm(op string, transA, transB bool, batch, m, n, k int, alpha float32, a *Tensor, lda, sa int, b *Tensor, ldb, sb int, beta float32, c *Tensor, ldc, sc int) {
	c.eng().must(op, c.eng().e.GemmStrided(transA, transB, batch, m, n, k, alpha, a.ptr(0), lda, sa, b.ptr(0), ldb, sb, beta, c.ptr(0), ldc, sc))
	keep(a, b, c)
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

// devConv2d is Conv2d image by image: im2col, then Y[b] = W·col (+ bias).
// The backward pass recomputes each image's columns for dW and folds
// Wᵀ·dY[b] back with col2im for dX.
func devConv2d(g *Graph, x, w, bias *Tensor, p Conv2dParams) *Tensor {
	requireFloat32("Conv2d", x, w, bias)
	if x.Rank() != 4 || w.Rank() != 4 || w.Dim(1) != x.Dim(1) {
		panic(fmt.Sprintf("radgen: Conv2d of %v with weight %v", x.shape, w.shape))
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != w.Dim(0)) {
		panic(fmt.Sprintf("radgen: Conv2d bias %v for weight %v", bias.shape, w.shape))
	}
	e := x.eng()
	batch, cin, h, wd := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	cout, kh, kw := w.Dim(0), w.Dim(2), w.Dim(3)
	geo := p.geom(h, wd, kh, kw)
	ho, wo := geo.OutH(), geo.OutW()
	if ho == 0 || wo == 0 {
		panic(fmt.Sprintf("radgen: Conv2d window %dx%d %+v does not fit input %v", kh, kw, p, x.shape))
	}
	n, k := ho*wo, cin*kh*kw
	inSize, outSize := cin*h*wd, cout*n
	out := devNew(x, []int{batch, cout, ho, wo})
	col := devNew(x, []int{k, n})
	for b := range batch {
		e.must("Conv2d", e.e.Im2col(col.ptr(0), n, x.ptr(b*inSize), cin, geo))
		e.must("Conv2d", e.e.GemmStrided(false, false, 1, cout, n, k, 1, w.ptr(0), k, 0, col.ptr(0), n, 0, 0, out.ptr(b*outSize), n, 0))
	}
	oshape := []int{batch, cout, n}
	if bias != nil && batch > 0 {
		cs := contiguous(oshape)
		e.must("Conv2d", e.e.Binary(accel.OpAdd, out.ptr(0), out.ptr(0), bias.ptr(0), oshape, cs, []int{0, 1, 0}, 0))
	}
	keep(x, w, bias, out, col)
	if g.needs(x, w, bias) {
		g.push(out, func() {
			if out.grad == nil || !sized(x, batch != 0) {
				return
			}
			dy := out.grad
			if bias != nil && bias.requiresGrad {
				e.must("Conv2d", e.e.ReduceSum(gradOf(bias).ptr(0), dy.ptr(0), oshape, []int{0, 1, 0}, true))
			}
			col := devNew(x, []int{k, n})
			for b := range batch {
				if w.requiresGrad { // dW += dY[b]·col[b]ᵀ
					e.must("Conv2d", e.e.Im2col(col.ptr(0), n, x.ptr(b*inSize), cin, geo))
					e.must("Conv2d", e.e.GemmStrided(false, true, 1, cout, k, n, 1, dy.ptr(b*outSize), n, 0, col.ptr(0), n, 0, 1, gradOf(w).ptr(0), k, 0))
				}
				if x.requiresGrad { // dX[b] += col2im(Wᵀ·dY[b])
					e.must("Conv2d", e.e.GemmStrided(true, false, 1, k, n, cout, 1, w.ptr(0), k, 0, dy.ptr(b*outSize), n, 0, 0, col.ptr(0), n, 0))
					e.must("Conv2d", e.e.Col2im(gradOf(x).ptr(b*inSize), col.ptr(0), n, cin, geo))
				}
			}
			keep(x, w, bias, dy, col, x.grad, w.grad, bias)
			if bias != nil {
				keep(bias.grad)
			}
		})
	}
	return out
}

// Batch norm on a device: the per-channel statistics and coefficients (C
// values) are computed on the host in float64, as on the CPU; everything of
// the input's size runs on the device.

func devMaxPool(g *Graph, x *Tensor, geo kernels.ConvGeom) *Tensor {
	requireFloat32("MaxPool2d", x)
	e := x.eng()
	ho, wo := geo.OutH(), geo.OutW()
	planes := x.Dim(0) * x.Dim(1)
	out := devNew(x, []int{x.Dim(0), x.Dim(1), ho, wo})
	arg := devNew(x, []int{planes * ho * wo})
	if planes > 0 {
		e.must("MaxPool2d", e.e.MaxPool(out.ptr(0), arg.ptr(0), x.ptr(0), planes, geo))
	}
	keep(x, out, arg)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil && sized(x, planes > 0) {
				e.must("MaxPool2d", e.e.MaxPoolBackward(gradOf(x).ptr(0), out.grad.ptr(0), arg.ptr(0), planes, geo.H*geo.W, ho*wo))
				keep(x.grad, out.grad, arg)
			}
		})
	}
	return out
}

// sized reports ok; when it is false (an empty operand) it still gives x a
// (zero-size) gradient, as the CPU ops do, so that every input of a
// recorded op has one after Backward.
func sized(x *Tensor, ok bool) bool {
	if !ok && x.requiresGrad {
		gradOf(x)
	}
	return ok
}
