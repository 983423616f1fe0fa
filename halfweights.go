package radgen

import (
	"fmt"

	"github.com/radgen/radgen/internal/freelist"
	"github.com/radgen/radgen/internal/half"
)

// ToHalf returns a copy of the float32 weight matrix t (rank 2, on the CPU,
// out × in as Linear stores it) in IEEE half precision (binary16: 11
// significant bits, a relative rounding error of at most 2⁻¹¹), laid out
// for the kernels that multiply a few rows of activations by it. The copy
// takes half the bytes, which is most of the cost of a decoding step's
// products at small batch sizes; the arithmetic stays float32.
//
// A half-precision tensor is a weight storage: Graph.Linear reads it as
// its weight in a graph that records no gradient for it (a NoGrad graph,
// or through SubstituteWeights), To32 and Float64s widen it back, and
// every other op panics on it. It is a snapshot: later changes to t do not
// reach it.
func (t *Tensor) ToHalf() *Tensor {
	if t.device != CPU || t.Rank() != 2 || t.Is64() || t.IsHalf() {
		panic(fmt.Sprintf("radgen: ToHalf of %v: want a float32 matrix on the CPU", t))
	}
	w := half.NewWeights(t.Dim(0), t.Dim(1), t.Data())
	return &Tensor{host: &w, shape: append([]int(nil), t.shape...), device: CPU}
}

// IsHalf reports whether t is a half-precision weight matrix made by
// ToHalf.
func (t *Tensor) IsHalf() bool {
	_, ok := t.host.(*half.Weights)
	return ok
}

// halfValues returns the values of a half-precision tensor widened to
// float32, row-major.
func (t *Tensor) halfValues() []float32 {
	w := t.host.(*half.Weights)
	out := make([]float32, w.N*w.K)
	for j := range w.N {
		for p := range w.K {
			out[j*w.K+p] = w.At(j, p)
		}
	}
	return out
}

// SubstituteWeights makes every Linear of the graph read its weight w from
// stored[w] where the map has it: a copy of w in another storage, such as a
// half-precision snapshot (Tensor.ToHalf) of a model's decoder. The model's
// modules stay as they are; the graph decides which storage their products
// read. Gradients never flow to a substitute, so the graph must not record
// through one: use it with NoGrad. The graph reads stored, which must not
// change while the graph is in use.
func SubstituteWeights(stored map[*Tensor]*Tensor) GraphOption {
	return func(g *Graph) { g.stored = stored }
}

// runners holds idle batch runners of Linear's half-precision products and
// of deferred products, so that a warm decoding step never allocates a
// runner's buffers again.
var runners = freelist.New[half.Runner](64)

// getRunner returns an idle runner, or a new one.
func getRunner() *half.Runner {
	if r := runners.Get(); r != nil {
		return r
	}
	return new(half.Runner)
}

// halfGemm is the CPU's gemm with a half-precision right operand w (the
// weight of Linear: C = A·Wᵀ, or C += A·Wᵀ with beta 1, for float32 A),
// through internal/half's kernels, which stream the weight once for all
// rows and share its output columns out among the cores. Other products
// of a half-precision matrix panic: it is a weight storage.
func halfGemm(transA, transB bool, batch, m, n, k int, alpha float64, a []float32, lda int, w half.Weights, beta float64, c []float32, ldc int) {
	if transA || !transB || batch != 1 || alpha != 1 || beta != 0 && beta != 1 || a == nil || w.N != n || w.K != k {
		panic(fmt.Sprintf("radgen: a product of a half-precision %d×%d matrix other than Linear's x·Wᵀ", w.N, w.K))
	}
	r := getRunner()
	r.Add(half.Op{M: m, X: a, LDX: lda, W: w, Y: c, LDY: ldc, Add: beta == 1})
	r.Run()
	runners.Put(r)
}
