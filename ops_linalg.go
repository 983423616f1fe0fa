package radgen

import (
	"fmt"
	"slices"

	"github.com/radgen/radgen/internal/kernels"
)

// MatMul returns the batched product a·b (or a·bᵀ when transB): a is
// [..., M, K]; b is [..., K, N] ([..., N, K] when transB) with the same
// leading dimensions as a, or a single matrix shared by the whole batch. The
// result is [..., M, N].
func (g *Graph) MatMul(a, b *Tensor, transB bool) *Tensor {
	if deviceOf("MatMul", a, b) != CPU {
		return devMatMul(g, a, b, transB)
	}
	if a.Is64() {
		return matmul[float64](g, a, b, transB)
	}
	return matmul[float32](g, a, b, transB)
}

func matmul[T Float](g *Graph, a, b *Tensor, transB bool) *Tensor {
	sameDevice("MatMul", a, b)
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
	av, bv, ov := values[T](a), values[T](b), values[T](out)
	ldb := b.Dim(-1)
	if shared {
		// One GEMM over all batch rows: [batch·M, K]·op(B).
		kernels.Gemm(false, transB, batch*m, n, k, 1, av, k, bv, ldb, 0, ov, n)
	} else {
		kernels.GemmStrided(false, transB, batch, m, n, k, 1, av, k, m*k, bv, ldb, k*n, 0, ov, n, m*n)
	}
	if g.needs(a, b) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dy := values[T](out.grad)
			if a.requiresGrad {
				da := values[T](gradOf(a))
				// dA = dY·op(B)ᵀ
				if shared {
					kernels.Gemm(false, !transB, batch*m, k, n, 1, dy, n, bv, ldb, 1, da, k)
				} else {
					kernels.GemmStrided(false, !transB, batch, m, k, n, 1, dy, n, m*n, bv, ldb, k*n, 1, da, k, m*k)
				}
			}
			if b.requiresGrad {
				db := values[T](gradOf(b))
				switch {
				case shared && !transB: // dB = Aᵀ·dY over all rows
					kernels.Gemm(true, false, k, n, batch*m, 1, av, k, dy, n, 1, db, n)
				case shared && transB: // dB = dYᵀ·A
					kernels.Gemm(true, false, n, k, batch*m, 1, dy, n, av, k, 1, db, k)
				case !transB:
					kernels.GemmStrided(true, false, batch, k, n, m, 1, av, k, m*k, dy, n, m*n, 1, db, n, k*n)
				default:
					kernels.GemmStrided(true, false, batch, n, k, m, 1, dy, n, m*n, av, k, m*k, 1, db, k, k*n)
				}
			}
		})
	}
	return out
}

// Linear returns x·Wᵀ + bias for x [..., in], W [out, in] and bias [out]
// (bias may be nil): PyTorch's nn.Linear.
func (g *Graph) Linear(x, w, bias *Tensor) *Tensor {
	if s, ok := g.stored[w]; ok {
		w = s
	}
	if w.IsHalf() {
		return halfLinear(g, x, w, bias)
	}
	if deviceOf("Linear", x, w, bias) != CPU {
		return devLinear(g, x, w, bias)
	}
	if x.Is64() {
		return linear[float64](g, x, w, bias)
	}
	return linear[float32](g, x, w, bias)
}

func linear[T Float](g *Graph, x, w, bias *Tensor) *Tensor {
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
	xv, wv, ov := values[T](x), values[T](w), values[T](out)
	if bias != nil {
		bv := values[T](bias)
		for r := 0; r < rows; r++ {
			copy(ov[r*outDim:(r+1)*outDim], bv)
		}
		kernels.Gemm(false, true, rows, outDim, in, 1, xv, in, wv, in, 1, ov, outDim)
	} else {
		kernels.Gemm(false, true, rows, outDim, in, 1, xv, in, wv, in, 0, ov, outDim)
	}
	if g.needs(x, w, bias) {
		g.push(out, func() {
			if out.grad == nil {
				return
			}
			dy := values[T](out.grad)
			if x.requiresGrad { // dx = dy·W
				kernels.Gemm(false, false, rows, in, outDim, 1, dy, outDim, wv, in, 1, values[T](gradOf(x)), in)
			}
			if w.requiresGrad { // dW = dyᵀ·x
				kernels.Gemm(true, false, outDim, in, rows, 1, dy, outDim, xv, in, 1, values[T](gradOf(w)), in)
			}
			if bias != nil && bias.requiresGrad {
				db := values[T](gradOf(bias))
				for r := 0; r < rows; r++ {
					for j, v := range dy[r*outDim : (r+1)*outDim] {
						db[j] += v
					}
				}
			}
		})
	}
	return out
}
