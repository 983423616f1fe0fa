package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/internal/kernels"
)

// Add returns a + b with NumPy broadcasting.
func (g *Graph) Add(a, b *Tensor) *Tensor {
	if y, ok := g.fuseAdd(a, b); ok { // a deferred product's epilogue
		return y
	}
	if y := g.absorbAdd(a, b); y != nil { // a deferred convolution's
		return y
	}
	return g.binary("Add", a, b, accel.OpAdd)
}

// Sub returns a − b with NumPy broadcasting.
func (g *Graph) Sub(a, b *Tensor) *Tensor { return g.binary("Sub", a, b, accel.OpSub) }

// Mul returns the elementwise product a ⊙ b with NumPy broadcasting.
func (g *Graph) Mul(a, b *Tensor) *Tensor { return g.binary("Mul", a, b, accel.OpMul) }

func (g *Graph) binary(name string, a, b *Tensor, op accel.BinaryOp) *Tensor {
	p := primsOf(name, a, b)
	var buf [24]int // the broadcast of shapes up to rank 8, on the stack
	bc, err := kernels.NewBroadcastIn(buf[:0], a.shape, b.shape)
	if err != nil {
		panic("radgen: " + name + ": " + err.Error())
	}
	out := g.empty(a, bc.Shape)
	p.binary(op, out.at(0), a.at(0), b.at(0), newLayout(bc.Shape, bc.AStr, bc.BStr), 0)
	keep(a, b, out)
	if !g.needs(a, b) {
		return out
	}
	// The backward pass: dY (or dY ⊙ the other operand, for a product)
	// summed over the dimensions each operand was broadcast along.
	n := out.Len()
	toA, toB := newLayout(bc.Shape, bc.AStr, bc.AStr), newLayout(bc.Shape, bc.BStr, bc.BStr)
	var byA, byB layout // dY's layout against the other operand, for a product
	if op == accel.OpMul {
		byA, byB = newLayout(bc.Shape, nil, bc.BStr), newLayout(bc.Shape, nil, bc.AStr)
	}
	g.push(out, func() {
		dy := out.grad
		if dy == nil {
			return
		}
		// dy goes to out's inputs; out keeps no gradient after this pass,
		// so the first input with none yet takes dy itself (give).
		given := false
		sendTo := func(t *Tensor, to layout, d *Tensor, sign float64) {
			switch {
			case t.Len() == n: // d is dy, or a temporary: either may be given once
				if send(t, d, sign, !(d == dy && given)) && d == dy {
					given = true
				}
			case sign == 1:
				p.reduceSum(gradOf(t).at(0), d.at(0), to, true)
			default:
				s := g.empty(t, t.shape)
				p.reduceSum(s.at(0), d.at(0), to, false)
				send(t, s, sign, true)
				keep(s)
			}
			keep(t.grad, d)
		}
		// product sends dY ⊙ other to t: straight into its gradient where
		// t has out's shape, else through a temporary and a reduction.
		product := func(t, other *Tensor, by, to layout) {
			if t.Len() == n {
				p.addBinary(accel.OpMul, gradOf(t).at(0), dy.at(0), other.at(0), by, 0)
				keep(t.grad)
				return
			}
			d := g.empty(dy, dy.shape)
			p.binary(accel.OpMul, d.at(0), dy.at(0), other.at(0), by, 0)
			sendTo(t, to, d, 1)
		}
		if a.requiresGrad {
			if op == accel.OpMul {
				product(a, b, byA, toA)
			} else {
				sendTo(a, toA, dy, 1)
			}
		}
		if b.requiresGrad {
			switch op {
			case accel.OpMul:
				product(b, a, byB, toB)
			case accel.OpSub:
				sendTo(b, toB, dy, -1)
			default:
				sendTo(b, toB, dy, 1)
			}
		}
		keep(a, b, dy)
	})
	return out
}

// Scale returns s·x.
func (g *Graph) Scale(x *Tensor, s float64) *Tensor {
	p := primsOf("Scale", x)
	out := g.empty(x, x.shape)
	p.scale(out.at(0), x.at(0), s, x.Len())
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				send(x, out.grad, s, true)
			}
		})
	}
	return out
}

// ReLU returns max(x, 0) elementwise.
func (g *Graph) ReLU(x *Tensor) *Tensor {
	if y, ok := g.fuseReLU(x); ok { // a deferred product's epilogue
		return y
	}
	if y := g.absorbReLU(x); y != nil { // a deferred convolution's
		return y
	}
	return g.activation("ReLU", x, accel.ActReLU)
}

// Tanh returns tanh(x) elementwise.
func (g *Graph) Tanh(x *Tensor) *Tensor { return g.activation("Tanh", x, accel.ActTanh) }

// Sigmoid returns 1/(1+exp(−x)) elementwise.
func (g *Graph) Sigmoid(x *Tensor) *Tensor { return g.activation("Sigmoid", x, accel.ActSigmoid) }

func (g *Graph) activation(name string, x *Tensor, act accel.Activation) *Tensor {
	p := primsOf(name, x)
	n := x.Len()
	out := g.empty(x, x.shape)
	p.activation(act, out.at(0), x.at(0), n)
	keep(x, out)
	if x.carry != nil {
		carryAct(out, x, act)
	}
	if g.needs(x) {
		g.push(out, func() { // the derivative in terms of the output
			if out.grad != nil {
				p.activationBackward(act, gradOf(x).at(0), out.grad.at(0), out.at(0), n)
				keep(x.grad, out.grad, out)
			}
		})
	}
	return out
}

// Softmax normalises the last dimension of x: exp(xᵢ)/Σⱼexp(xⱼ).
func (g *Graph) Softmax(x *Tensor) *Tensor { return g.rowwise("Softmax", x, false) }

// LogSoftmax returns x − log Σ exp(x) over the last dimension.
func (g *Graph) LogSoftmax(x *Tensor) *Tensor { return g.rowwise("LogSoftmax", x, true) }

func (g *Graph) rowwise(name string, x *Tensor, log bool) *Tensor {
	p := primsOf(name, x)
	cols := x.Dim(-1)
	rows := x.Len() / max(cols, 1)
	out := g.empty(x, x.shape)
	p.softmax(out.at(0), x.at(0), rows, cols, log)
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				p.softmaxBackward(gradOf(x).at(0), out.grad.at(0), out.at(0), rows, cols, log)
				keep(x.grad, out.grad, out)
			}
		})
	}
	return out
}

// MaskedFill returns x with value wherever mask (broadcast to x's shape) is
// zero; R2Gen masks attention scores this way with value −1e9 before the
// softmax, so a fully masked row becomes uniform rather than NaN. On the
// CPU the mask may hold the other element type.
func (g *Graph) MaskedFill(x, mask *Tensor, value float64) *Tensor {
	if x.device == CPU && mask.device == CPU && mask.Is64() != x.Is64() {
		if x.Is64() {
			mask = mask.To64()
		} else {
			mask = mask.To32()
		}
	}
	p := primsOf("MaskedFill", x, mask)
	var buf [24]int
	bc, err := kernels.NewBroadcastIn(buf[:0], x.shape, mask.shape)
	if err != nil || !slices.Equal(bc.Shape, x.shape) {
		panic(fmt.Sprintf("radgen: MaskedFill: mask %v does not broadcast to %v", mask.shape, x.shape))
	}
	l := newLayout(x.shape, nil, bc.BStr)
	out := g.empty(x, x.shape)
	p.binary(accel.OpMaskFill, out.at(0), x.at(0), mask.at(0), l, value)
	keep(x, mask, out)
	if g.needs(x) {
		g.push(out, func() { // dX += dY where the mask keeps x
			if out.grad == nil {
				return
			}
			p.addBinary(accel.OpMaskFill, gradOf(x).at(0), out.grad.at(0), mask.at(0), l, 0)
			keep(mask, out.grad, x.grad)
		})
	}
	return out
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1−p) when the graph is training; otherwise it returns x itself. The
// mask comes from the graph's generator, 32 random bits per element, drawn
// on the host whatever x's device, so that every engine drops the same
// elements.
func (g *Graph) Dropout(x *Tensor, p float64) *Tensor {
	if !g.train || p <= 0 {
		return x
	}
	if p >= 1 {
		return g.Scale(x, 0)
	}
	pr := primsOf("Dropout", x)
	var mask *Tensor
	switch {
	case x.Is64():
		mask = FromFloat64(dropoutMask(g, make([]float64, x.Len()), p), x.shape...)
	case x.device == CPU: // from the graph's step memory where it has one
		mask = g.empty(x, x.shape)
		dropoutMask(g, hostValues[float32](mask), p)
	default:
		mask = FromFloat32(dropoutMask(g, make([]float32, x.Len()), p), x.shape...).To(x.device)
	}
	l := newLayout(x.shape, nil, nil)
	out := g.empty(x, x.shape)
	pr.binary(accel.OpMul, out.at(0), x.at(0), mask.at(0), l, 0)
	keep(x, mask, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			pr.addBinary(accel.OpMul, gradOf(x).at(0), out.grad.at(0), mask.at(0), l, 0)
			keep(mask, out.grad, x.grad)
		})
	}
	return out
}

// dropoutMask fills m with 1/(1−p) where an element is kept and 0
// where it is dropped: element i is dropped when its 32 bits of the
// generator's stream (two elements per draw, the low half first) are below
// p·2³².
func dropoutMask[T float](g *Graph, m []T, p float64) []T {
	thresh := uint32(p * (1 << 32))
	s := T(1 / (1 - p))
	n := len(m)
	for i := 0; i < n; i += 2 {
		r := g.rng.Uint64()
		m[i] = 0
		if uint32(r) >= thresh {
			m[i] = s
		}
		if i+1 < n {
			m[i+1] = 0
			if uint32(r>>32) >= thresh {
				m[i+1] = s
			}
		}
	}
	return m
}
