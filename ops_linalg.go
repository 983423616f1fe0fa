package radgen

import (
	"fmt"
	"slices"
)

// MatMul returns the batched product a·b (or a·bᵀ when transB): a is
// [..., M, K]; b is [..., K, N] ([..., N, K] when transB) with the same
// leading dimensions as a, or a single matrix shared by the whole batch. The
// result is [..., M, N].
func (g *Graph) MatMul(a, b *Tensor, transB bool) *Tensor {
	p := primsOf("MatMul", a, b)
	if a.Rank() < 2 || b.Rank() < 2 {
		panic(fmt.Sprintf("radgen: MatMul of %v and %v", a.shape, b.shape))
	}
	m, k := a.Dim(-2), a.Dim(-1)
	kb, n := b.Dim(-2), b.Dim(-1)
	if transB {
		kb, n = n, kb
	}
	if k != kb {
		panic(fmt.Sprintf("radgen: MatMul inner dimensions differ: %v and %v (transB %v)", a.shape, b.shape, transB))
	}
	batch := numel(a.shape[:a.Rank()-2])
	shared := b.Rank() == 2
	if !shared && !slices.Equal(a.shape[:a.Rank()-2], b.shape[:b.Rank()-2]) {
		panic(fmt.Sprintf("radgen: MatMul batch dimensions differ: %v and %v", a.shape, b.shape))
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(append(buf[:0], a.shape[:a.Rank()-2]...), m, n)
	out := g.empty(a, oshape)
	ldb := b.Dim(-1)
	if shared { // one product over all the batch's rows: [batch·M, K]·op(B)
		p.gemm(false, transB, 1, batch*m, n, k, 1, a.at(0), k, 0, b.at(0), ldb, 0, 0, out.at(0), n, 0)
	} else {
		p.gemm(false, transB, batch, m, n, k, 1, a.at(0), k, m*k, b.at(0), ldb, k*n, 0, out.at(0), n, m*n)
	}
	keep(a, b, out)
	if g.needs(a, b) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			if a.requiresGrad { // dA = dY·op(B)ᵀ
				ga, beta := gradTarget(a)
				da := ga.at(0)
				if shared {
					p.gemm(false, !transB, 1, batch*m, k, n, 1, dy.at(0), n, 0, b.at(0), ldb, 0, beta, da, k, 0)
				} else {
					p.gemm(false, !transB, batch, m, k, n, 1, dy.at(0), n, m*n, b.at(0), ldb, k*n, beta, da, k, m*k)
				}
			}
			if b.requiresGrad {
				gb, beta := gradTarget(b)
				db := gb.at(0)
				switch {
				case shared && !transB: // dB = Aᵀ·dY over all rows
					p.gemm(true, false, 1, k, n, batch*m, 1, a.at(0), k, 0, dy.at(0), n, 0, beta, db, n, 0)
				case shared && transB: // dB = dYᵀ·A
					p.gemm(true, false, 1, n, k, batch*m, 1, dy.at(0), n, 0, a.at(0), k, 0, beta, db, k, 0)
				case !transB:
					p.gemm(true, false, batch, k, n, m, 1, a.at(0), k, m*k, dy.at(0), n, m*n, beta, db, n, k*n)
				default:
					p.gemm(true, false, batch, n, k, m, 1, dy.at(0), n, m*n, a.at(0), k, m*k, beta, db, k, k*n)
				}
			}
			keep(a, b, dy, a.grad, b.grad)
		})
	}
	return out
}

// Linear returns x·Wᵀ + bias for x [..., in], W [out, in] and bias [out]
// (bias may be nil): PyTorch's nn.Linear.
//
// On a graph that records nothing, on the CPU, a product of a few rows
// (a decoding step's) is deferred: it is computed with the graph's other
// products, each weight read once for all of them, when its result is
// first read, and a ReLU or a sum applied to its result is computed as
// part of it (see the package documentation, "Deferred products").
// Deferral is invisible but for one thing: a deferred product reads x,
// W and the bias when it runs, so values written in place into them
// (through Data's slice) before a result of the graph is read are seen.
func (g *Graph) Linear(x, w, bias *Tensor) *Tensor {
	if s, ok := g.stored[w]; ok {
		w = s
	}
	if w.IsHalf() && g.needs(x, bias) {
		panic("radgen: Linear with a half-precision weight in a graph that records gradients")
	}
	p := primsOf("Linear", x, w, bias)
	if g.deferrable(x, w) {
		return g.deferLinear(x, w, bias)
	}
	in, outDim := w.Dim(1), w.Dim(0)
	if w.Rank() != 2 || x.Dim(-1) != in {
		panic(fmt.Sprintf("radgen: Linear of %v with weight %v", x.shape, w.shape))
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != outDim) {
		panic(fmt.Sprintf("radgen: Linear bias %v for weight %v", bias.shape, w.shape))
	}
	rows := x.Len() / in
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(append(buf[:0], x.shape[:x.Rank()-1]...), outDim)
	out := g.empty(x, oshape)
	beta := 0.0
	if bias != nil { // the bias in every row, then y += x·Wᵀ
		p.copyStrided(out.at(0), outDim, bias.at(0), 0, rows, outDim, false)
		beta = 1
	}
	p.gemm(false, true, 1, rows, outDim, in, 1, x.at(0), in, 0, w.at(0), in, 0, beta, out.at(0), outDim, 0)
	keep(x, w, bias, out)
	if g.needs(x, w, bias) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			if x.requiresGrad { // dX = dY·W
				gx, beta := gradTarget(x)
				p.gemm(false, false, 1, rows, in, outDim, 1, dy.at(0), outDim, 0, w.at(0), in, 0, beta, gx.at(0), in, 0)
			}
			if w.requiresGrad { // dW = dYᵀ·X
				gw, beta := gradTarget(w)
				p.gemm(true, false, 1, outDim, in, rows, 1, dy.at(0), outDim, 0, x.at(0), in, 0, beta, gw.at(0), in, 0)
			}
			if bias != nil && bias.requiresGrad { // dBias = Σ_rows dY
				p.reduceSum(gradOf(bias).at(0), dy.at(0), newLayout([]int{rows, outDim}, []int{0, 1}, []int{0, 1}), true)
				keep(bias.grad)
			}
			keep(x, w, dy, x.grad, w.grad)
		})
	}
	return out
}
