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
// of Linears, so that a warm decoding step never allocates a runner's
// buffers again.
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

// addProduct adds addend + act(x·Wᵀ + bias) to r, for the weight w stored
// as hw, and returns the tensor the product will fill when r runs; addend
// (N), broadcast over the rows, may be nil. x may be pending in r's
// earlier stages (an ahead batch's).
func (g *Graph) addProduct(r *half.Runner, x, w *Tensor, hw half.Weights, bias, addend *Tensor, relu bool) *Tensor {
	const op = "Linears"
	if x.Dim(-1) != hw.K {
		panic(fmt.Sprintf("radgen: %s of %v with weight %v", op, x.shape, w.shape))
	}
	var bv []float32
	if bias != nil {
		if bias.Rank() != 1 || bias.Dim(0) != hw.N {
			panic(fmt.Sprintf("radgen: %s bias %v for weight %v", op, bias.shape, w.shape))
		}
		bv = bias.Data()
	}
	if m := x.pend; m.a == nil || m.a.r != r || m.gen != m.a.gen {
		x.ready() // not a result of r's own earlier stages
	}
	var buf [8]int // on the stack for ranks up to 8
	oshape := append(append(buf[:0], x.shape[:x.Rank()-1]...), hw.N)
	out := g.empty(x, oshape)
	y := out.Data()
	if addend != nil {
		if addend.Rank() != 1 || addend.Dim(0) != hw.N || addend.Is64() || addend.device != CPU {
			panic(fmt.Sprintf("radgen: %s adding %v to a product with weight %v", op, addend, w.shape))
		}
		for a, row := addend.Data(), y; len(row) > 0; row = row[hw.N:] {
			copy(row, a)
		}
	}
	r.Add(half.Op{M: x.Len() / max(hw.K, 1), X: hostValues[float32](x), W: hw, Bias: bv, Y: y, ReLU: relu, Add: addend != nil})
	return out
}

// maxBatchRows is the most rows per input for which Linears batches its
// products (the decoding steps' products, a few rows against a weight
// streamed once); larger products run one by one through Linear's GEMM.
const maxBatchRows = 48

// Linears computes out[i] = act(xs[i]·Wᵢᵀ + bᵢ) for the linear maps ls[i]
// (Wᵢ read through SubstituteWeights as Linear reads it), where act is
// max(0, ·) if relu is set and the identity otherwise: independent maps of
// the same or of different inputs, such as the γ and β MLPs of every
// conditional norm of a decoder, which all read one memory.
//
// On the CPU, outside a recording graph, with float32 inputs of at most 48
// rows, the products run as one batch (internal/half's runner, with
// internal/f32's dot kernels for float32 weights): every weight is read
// once and the output columns of all of them are shared out among the
// cores in one start, instead of one start per map; within Ahead they join
// the graph's ahead batch. Elsewhere each map is a Linear (and a ReLU).
// out, xs and ls must have the same length.
func (g *Graph) Linears(out, xs []*Tensor, ls []*Linear, relu bool) {
	g.linears(out, xs, ls, nil, relu)
}

// AddLinear returns a + x·Wᵀ + b for the linear map l: Add(l.Forward(g, x), a),
// a (N) broadcast over the rows, with the same values. Where Linears batches
// its products, the sum is the product's last step, so that within Ahead
// a + l(x) is computed beside the caller whole (as a conditional norm's
// γ̂ = γ + f_mlp(M) is).
func (g *Graph) AddLinear(a, x *Tensor, l *Linear) *Tensor {
	if a.Rank() != 1 || a.Dim(0) != l.Weight.Dim(0) {
		panic(fmt.Sprintf("radgen: AddLinear of %v to a map of weight %v", a, l.Weight.shape))
	}
	var out [1]*Tensor
	g.linears(out[:], []*Tensor{x}, []*Linear{l}, []*Tensor{a}, false)
	return out[0]
}

// linears is Linears with addends (nil, or one per map: AddLinear's a).
func (g *Graph) linears(out, xs []*Tensor, ls []*Linear, addends []*Tensor, relu bool) {
	const op = "Linears"
	if len(out) != len(ls) || len(xs) != len(ls) || addends != nil && len(addends) != len(ls) {
		panic(fmt.Sprintf("radgen: %s of %d inputs and %d maps into %d results", op, len(xs), len(ls), len(out)))
	}
	if !g.batchable(xs) {
		for i, l := range ls {
			out[i] = l.Forward(g, xs[i])
			if relu {
				out[i] = g.ReLU(out[i])
			}
			if addends != nil {
				out[i] = g.Add(out[i], addends[i])
			}
		}
		return
	}
	a := g.ahead
	if a == nil || !a.open {
		r := getRunner()
		g.addLinears(r, out, xs, ls, addends, relu)
		r.Run()
		runners.Put(r)
		return
	}
	a.join(xs...)
	g.addLinears(a.r, out, xs, ls, addends, relu)
	a.mark(out)
}

// batchable reports whether Linears batches maps of xs.
func (g *Graph) batchable(xs []*Tensor) bool {
	ok := !g.record
	for _, x := range xs {
		ok = ok && x.device == CPU && !x.Is64() && !x.IsHalf() && x.Rank() >= 1 && x.Len() <= maxBatchRows*x.Dim(-1)
	}
	return ok
}

// addLinears adds the maps of Linears, with their addends, to r.
func (g *Graph) addLinears(r *half.Runner, out, xs []*Tensor, ls []*Linear, addends []*Tensor, relu bool) {
	for i, l := range ls {
		x, w := xs[i], l.Weight
		if s, ok := g.stored[w]; ok {
			w = s
		}
		var hw half.Weights
		switch {
		case w.IsHalf():
			hw = *w.host.(*half.Weights)
		case w.device == CPU && !w.Is64() && w.Rank() == 2:
			hw = half.Float32(w.Dim(0), w.Dim(1), w.Data())
		default:
			panic(fmt.Sprintf("radgen: Linears with weight %v", w))
		}
		var addend *Tensor
		if addends != nil {
			addend = addends[i]
		}
		out[i] = g.addProduct(r, x, w, hw, l.Bias, addend, relu)
	}
}
