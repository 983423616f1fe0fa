package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/kernels"
)

func sameDevice(op string, ts ...*Tensor) {
	deviceOf(op, ts...)
	for _, t := range ts[1:] {
		if t.Is64() != ts[0].Is64() {
			panic(fmt.Sprintf("radgen: %s of %v and %v", op, ts[0], t))
		}
	}
}

// Add returns a + b with NumPy broadcasting.
func (g *Graph) Add(a, b *Tensor) *Tensor {
	if deviceOf("Add", a, b) != CPU {
		return devBinary(g, "Add", a, b, accel.OpAdd)
	}
	if a.Is64() {
		return binary[float64](g, "Add", a, b, opAdd)
	}
	return binary[float32](g, "Add", a, b, opAdd)
}

// Sub returns a − b with NumPy broadcasting.
func (g *Graph) Sub(a, b *Tensor) *Tensor {
	if deviceOf("Sub", a, b) != CPU {
		return devBinary(g, "Sub", a, b, accel.OpSub)
	}
	if a.Is64() {
		return binary[float64](g, "Sub", a, b, opSub)
	}
	return binary[float32](g, "Sub", a, b, opSub)
}

// Mul returns the elementwise product a ⊙ b with NumPy broadcasting.
func (g *Graph) Mul(a, b *Tensor) *Tensor {
	if deviceOf("Mul", a, b) != CPU {
		return devBinary(g, "Mul", a, b, accel.OpMul)
	}
	if a.Is64() {
		return binary[float64](g, "Mul", a, b, opMul)
	}
	return binary[float32](g, "Mul", a, b, opMul)
}

const (
	opAdd = iota
	opSub
	opMul
)

func binary[T Float](g *Graph, name string, a, b *Tensor, op int) *Tensor {
	sameDevice(name, a, b)
	var buf [24]int // the broadcast of shapes up to rank 8, on the stack
	bc, err := kernels.NewBroadcastIn(buf[:0], a.shape, b.shape)
	if err != nil {
		panic("radgen: " + name + ": " + err.Error())
	}
	out := g.empty(a, bc.Shape)
	av, bv, ov := values[T](a), values[T](b), values[T](out)
	bc.Each(func(o, ia, ib, n, sa, sb int) {
		dst := ov[o : o+n]
		switch {
		case sa == 1 && sb == 1:
			x, y := av[ia:ia+n], bv[ib:ib+n]
			switch op {
			case opAdd:
				for i := range dst {
					dst[i] = x[i] + y[i]
				}
			case opSub:
				for i := range dst {
					dst[i] = x[i] - y[i]
				}
			case opMul:
				for i := range dst {
					dst[i] = x[i] * y[i]
				}
			}
		default:
			for i := range dst {
				x, y := av[ia+i*sa], bv[ib+i*sb]
				switch op {
				case opAdd:
					dst[i] = x + y
				case opSub:
					dst[i] = x - y
				case opMul:
					dst[i] = x * y
				}
			}
		}
	})
	if g.needs(a, b) {
		bc := bc.Clone() // the backward pass outlives buf
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dy := values[T](out.grad)
			var da, db []T
			if a.requiresGrad {
				da = values[T](gradOf(a))
			}
			if b.requiresGrad {
				db = values[T](gradOf(b))
			}
			bc.Each(func(o, ia, ib, n, sa, sb int) {
				if op != opMul && sa == 1 && (sb == 1 || sb == 0) {
					// Same-shape runs and bias rows: the common cases.
					g := dy[o : o+n]
					if da != nil {
						a := da[ia : ia+n]
						for i, v := range g {
							a[i] += v
						}
					}
					if db != nil {
						sign := T(1)
						if op == opSub {
							sign = -1
						}
						if sb == 1 {
							b := db[ib : ib+n]
							for i, v := range g {
								b[i] += sign * v
							}
						} else {
							var acc T
							for _, v := range g {
								acc += v
							}
							db[ib] += sign * acc
						}
					}
					return
				}
				for i := 0; i < n; i++ {
					d := dy[o+i]
					switch op {
					case opAdd:
						if da != nil {
							da[ia+i*sa] += d
						}
						if db != nil {
							db[ib+i*sb] += d
						}
					case opSub:
						if da != nil {
							da[ia+i*sa] += d
						}
						if db != nil {
							db[ib+i*sb] -= d
						}
					case opMul:
						if da != nil {
							da[ia+i*sa] += d * bv[ib+i*sb]
						}
						if db != nil {
							db[ib+i*sb] += d * av[ia+i*sa]
						}
					}
				}
			})
		})
	}
	return out
}

// Scale returns s·x.
func (g *Graph) Scale(x *Tensor, s float64) *Tensor {
	if x.device != CPU {
		return devScale(g, x, s)
	}
	if x.Is64() {
		return scale[float64](g, x, s)
	}
	return scale[float32](g, x, s)
}

func scale[T Float](g *Graph, x *Tensor, s float64) *Tensor {
	out := g.empty(x, x.shape)
	kernels.Scale(values[T](out), values[T](x), T(s))
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				kernels.AddScaled(values[T](gradOf(x)), values[T](out.grad), T(s))
			}
		})
	}
	return out
}

type unaryKernels[T Float] struct {
	fwd func(dst, x []T)
	bwd func(dx, dy, y []T) // in terms of the output y
}

func unary[T Float](g *Graph, x *Tensor, k unaryKernels[T]) *Tensor {
	out := g.empty(x, x.shape)
	y := values[T](out)
	k.fwd(y, values[T](x))
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				k.bwd(values[T](gradOf(x)), values[T](out.grad), y)
			}
		})
	}
	return out
}

// ReLU returns max(x, 0) elementwise.
func (g *Graph) ReLU(x *Tensor) *Tensor {
	if x.device != CPU {
		return devUnary(g, "ReLU", x, accel.ActReLU)
	}
	if x.Is64() {
		return unary(g, x, unaryKernels[float64]{kernels.ReLU[float64], kernels.ReLUBackward[float64]})
	}
	return unary(g, x, unaryKernels[float32]{kernels.ReLU[float32], kernels.ReLUBackward[float32]})
}

// Tanh returns tanh(x) elementwise.
func (g *Graph) Tanh(x *Tensor) *Tensor {
	if x.device != CPU {
		return devUnary(g, "Tanh", x, accel.ActTanh)
	}
	if x.Is64() {
		return unary(g, x, unaryKernels[float64]{kernels.Tanh[float64], kernels.TanhBackward[float64]})
	}
	return unary(g, x, unaryKernels[float32]{kernels.Tanh[float32], kernels.TanhBackward[float32]})
}

// Sigmoid returns 1/(1+exp(−x)) elementwise.
func (g *Graph) Sigmoid(x *Tensor) *Tensor {
	if x.device != CPU {
		return devUnary(g, "Sigmoid", x, accel.ActSigmoid)
	}
	if x.Is64() {
		return unary(g, x, unaryKernels[float64]{kernels.Sigmoid[float64], kernels.SigmoidBackward[float64]})
	}
	return unary(g, x, unaryKernels[float32]{kernels.Sigmoid[float32], kernels.SigmoidBackward[float32]})
}

// Softmax normalises the last dimension of x: exp(xᵢ)/Σⱼexp(xⱼ).
func (g *Graph) Softmax(x *Tensor) *Tensor {
	if x.device != CPU {
		return devRowwise(g, "Softmax", x, false)
	}
	if x.Is64() {
		return rowwise[float64](g, x, kernels.Softmax[float64], kernels.SoftmaxBackward[float64])
	}
	return rowwise[float32](g, x, kernels.Softmax[float32], kernels.SoftmaxBackward[float32])
}

// LogSoftmax returns x − log Σ exp(x) over the last dimension.
func (g *Graph) LogSoftmax(x *Tensor) *Tensor {
	if x.device != CPU {
		return devRowwise(g, "LogSoftmax", x, true)
	}
	if x.Is64() {
		return rowwise[float64](g, x, kernels.LogSoftmax[float64], kernels.LogSoftmaxBackward[float64])
	}
	return rowwise[float32](g, x, kernels.LogSoftmax[float32], kernels.LogSoftmaxBackward[float32])
}

func rowwise[T Float](g *Graph, x *Tensor, fwd func(dst, x []T, n int), bwd func(dx, dy, y []T, n int)) *Tensor {
	n := x.Dim(-1)
	out := g.empty(x, x.shape)
	y := values[T](out)
	fwd(y, values[T](x), n)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				bwd(values[T](gradOf(x)), values[T](out.grad), y, n)
			}
		})
	}
	return out
}

// MaskedFill returns x with value wherever mask (broadcast to x's shape) is
// zero; R2Gen masks attention scores this way with value −1e9 before the
// softmax, so a fully masked row becomes uniform rather than NaN.
func (g *Graph) MaskedFill(x, mask *Tensor, value float64) *Tensor {
	if deviceOf("MaskedFill", x, mask) != CPU {
		return devMaskedFill(g, x, mask, value)
	}
	if x.Is64() {
		return maskedFill[float64](g, x, mask, value)
	}
	return maskedFill[float32](g, x, mask, value)
}

func maskedFill[T Float](g *Graph, x, mask *Tensor, value float64) *Tensor {
	bc, err := kernels.NewBroadcast(x.shape, mask.shape)
	if err != nil || !slices.Equal(bc.Shape, x.shape) {
		panic(fmt.Sprintf("radgen: MaskedFill: mask %v does not broadcast to %v", mask.shape, x.shape))
	}
	out := g.like(x, x.shape)
	xv, ov := values[T](x), values[T](out)
	mv := mask.Float64s()
	keep := make([]bool, len(ov))
	bc.Each(func(o, ia, ib, n, sa, sb int) {
		for i := 0; i < n; i++ {
			if mv[ib+i*sb] != 0 {
				ov[o+i] = xv[ia+i*sa]
				keep[o+i] = true
			} else {
				ov[o+i] = T(value)
			}
		}
	})
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx, dy := values[T](gradOf(x)), values[T](out.grad)
			for i, k := range keep {
				if k {
					dx[i] += dy[i]
				}
			}
		})
	}
	return out
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1−p) when the graph is training; otherwise it returns x itself. The
// mask comes from the graph's generator, 32 random bits per element.
func (g *Graph) Dropout(x *Tensor, p float64) *Tensor {
	if !g.train || p <= 0 {
		return x
	}
	if p >= 1 {
		return g.Scale(x, 0)
	}
	if x.device != CPU {
		return devDropout(g, x, p)
	}
	if x.Is64() {
		return dropout[float64](g, x, p)
	}
	return dropout[float32](g, x, p)
}

func dropout[T Float](g *Graph, x *Tensor, p float64) *Tensor {
	n := x.Len()
	keep := make([]bool, n)
	thresh := uint32(p * (1 << 32)) // drop when the 32-bit draw is below p·2³²
	for i := 0; i < n; i += 2 {
		r := g.rng.Uint64()
		keep[i] = uint32(r) >= thresh
		if i+1 < n {
			keep[i+1] = uint32(r>>32) >= thresh
		}
	}
	s := T(1 / (1 - p))
	out := g.like(x, x.shape)
	xv, ov := values[T](x), values[T](out)
	for i, k := range keep {
		if k {
			ov[i] = xv[i] * s
		}
	}
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dx, dy := values[T](gradOf(x)), values[T](out.grad)
			for i, k := range keep {
				if k {
					dx[i] += dy[i] * s
				}
			}
		})
	}
	return out
}
