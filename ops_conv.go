package radgen

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/radgen/radgen/internal/freelist"
	"github.com/radgen/radgen/internal/kernels"
)

// Conv2dParams is the geometry of Conv2d as torch.nn.Conv2d has it, per
// spatial axis (height, width). A zero Stride or Dilation entry means 1, so
// the zero value is a stride-1, unpadded, undilated convolution.
type Conv2dParams struct {
	Stride   [2]int // step of the window; 0 means 1
	Padding  [2]int // zeros added on both sides
	Dilation [2]int // spacing of the window taps; 0 means 1
}

// ConvSquare returns the Conv2dParams of a square convolution with the same
// stride and padding on both axes and no dilation, as ResNets use.
func ConvSquare(stride, padding int) Conv2dParams {
	return Conv2dParams{Stride: [2]int{stride, stride}, Padding: [2]int{padding, padding}}
}

func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

func (p Conv2dParams) geom(h, w, kh, kw int) kernels.ConvGeom {
	g := kernels.ConvGeom{
		H: h, W: w, KH: kh, KW: kw,
		StrideH: orOne(p.Stride[0]), StrideW: orOne(p.Stride[1]),
		PadH: p.Padding[0], PadW: p.Padding[1],
		DilH: orOne(p.Dilation[0]), DilW: orOne(p.Dilation[1]),
	}
	if g.StrideH < 0 || g.StrideW < 0 || g.PadH < 0 || g.PadW < 0 || g.DilH < 0 || g.DilW < 0 {
		panic(fmt.Sprintf("radgen: invalid convolution parameters %+v", p))
	}
	g.Check()
	return g
}

// Tuning constants of Conv2d.
const (
	// colBudget bounds the column buffer of Conv2d, in elements: images are
	// unfolded in groups whose column matrices fit in it (at least one
	// image per group).
	colBudget = 1 << 22

	// directPixels is the output plane size from which a 1×1, stride-1
	// convolution multiplies each image's planes in place. Below it the
	// images of a group are laid side by side so that one product reads
	// the weights once for all of them (ResNet's last stages have 7×7 or
	// smaller planes).
	directPixels = 1024
)

// Conv2d returns the 2-D cross-correlation of x (B, Cin, H, W) with weight
// (Cout, Cin, KH, KW) plus bias (Cout) (nil for none), the result
// (B, Cout, Ho, Wo) of torch.nn.functional.conv2d with groups = 1:
//
//	y[b][o][i][j] = bias[o] + Σ_{c,ky,kx} w[o][c][ky][kx]·x[b][c][i·s−p+ky·d][j·s−p+kx·d]
//
// with zeros outside x, Ho = ⌊(H + 2p − d(KH−1) − 1)/s⌋ + 1 (likewise Wo).
// On the CPU it runs as im2col and GEMM: the images of a group are unfolded
// side by side into one column matrix (Cin·KH·KW, G·Ho·Wo) and multiplied by
// the weight (Cout, Cin·KH·KW) in one product; a 1×1, stride-1, unpadded
// convolution on large planes multiplies each image's planes directly; a
// float32 3×3, stride-1 one runs by Winograd's F(2×2, 3×3), forward, input
// gradient and (on enough tiles) weight gradient. Devices run the plain
// per-image im2col and product.
//
// On a graph that records nothing and has no arena, with float32 CPU
// operands, the result is deferred: the engine computes it when it is first
// read, or when an op that reads it is issued. Until then BatchNorm2d with
// running statistics, Add of a residual of the result's shape and ReLU,
// issued in that order on it, are absorbed into its computation instead of
// running (each returns a new deferred tensor; the one it read keeps its own
// values). The engine then computes it channels last as one product with
// the weight packed (and the batch norm folded into it) once and kept
// beside the weight until the weight or the batch norm's tensors are
// written, the bias, the residual and the ReLU applied in the product, 3×3
// stride-1 windows by Winograd's F(2×2, 3×3); a convolution or a max pool
// that reads it takes it so, and any other read writes it channels first
// into the tensor's storage. The engine reads the operands when it
// computes the result, and computes a result that was not read channels
// first again if it is read after later results took its buffer: the
// operands must not be written while a deferred result may still be read
// (read it, or Clone it, first). The values are those of the ops run one
// by one, up to rounding, and the same at every computation.
func (g *Graph) Conv2d(x, weight, bias *Tensor, p Conv2dParams) *Tensor {
	pr := primsOf("Conv2d", x, weight, bias)
	w := weight
	if x.Rank() != 4 || w.Rank() != 4 || w.Dim(1) != x.Dim(1) {
		panic(fmt.Sprintf("radgen: Conv2d of %v with weight %v", x.shape, w.shape))
	}
	if bias != nil && (bias.Rank() != 1 || bias.Dim(0) != w.Dim(0)) {
		panic(fmt.Sprintf("radgen: Conv2d bias %v for weight %v", bias.shape, w.shape))
	}
	s := convShape{batch: x.Dim(0), cin: x.Dim(1), cout: w.Dim(0)}
	s.geo = p.geom(x.Dim(2), x.Dim(3), w.Dim(2), w.Dim(3))
	ho, wo := s.geo.OutH(), s.geo.OutW()
	if ho == 0 || wo == 0 {
		panic(fmt.Sprintf("radgen: Conv2d window %dx%d %+v does not fit input %v", w.Dim(2), w.Dim(3), p, x.shape))
	}
	if y := g.deferConv(x, w, bias, s); y != nil {
		return y
	}
	out := g.empty(x, []int{s.batch, s.cout, ho, wo})
	saved := pr.conv2d(out.at(0), x.at(0), w.at(0), optionalAt(bias), s, g.needs(x))
	keep(x, w, bias, out)
	if g.needs(x, w, bias) {
		g.push(out, func() {
			dy := out.grad
			if dy == nil {
				return
			}
			if bias != nil && bias.requiresGrad { // dBias = Σ over images and pixels of dY
				pr.reduceSum(gradOf(bias).at(0), dy.at(0), newLayout([]int{s.batch, s.cout, ho * wo}, []int{0, 1, 0}, []int{0, 1, 0}), true)
				keep(bias.grad)
			}
			var dx, dw buffer
			dxBeta := 1.0
			if w.requiresGrad {
				dw = gradOf(w).at(0)
			}
			if x.requiresGrad {
				t, beta := gradTarget(x)
				dx, dxBeta = t.at(0), beta
			}
			pr.conv2dBackward(dx, dxBeta, dw, dy.at(0), x.at(0), w.at(0), s, saved)
			keep(x, w, dy, x.grad, w.grad)
		})
	}
	return out
}

// convShape is a convolution's sizes: batch images of cin channels
// (geo's H×W planes) into cout channels.
type convShape struct {
	batch, cin, cout int
	geo              kernels.ConvGeom
}

// pixels returns the output pixels of one image.
func (s convShape) pixels() int { return s.geo.OutH() * s.geo.OutW() }

// column returns the height of one image's column matrix.
func (s convShape) column() int { return s.cin * s.geo.KH * s.geo.KW }

// inSize returns the values of one input image.
func (s convShape) inSize() int { return s.cin * s.geo.H * s.geo.W }

// direct reports whether the CPU multiplies the input planes in place: a
// 1×1, stride-1, unpadded convolution of one image or on large planes.
func (s convShape) direct() bool {
	return s.geo.Pointwise() && (s.batch == 1 || s.pixels() >= directPixels)
}

// group returns how many images the CPU unfolds into one column matrix.
func (s convShape) group() int {
	return max(1, min(s.batch, colBudget/max(1, s.column()*s.pixels())))
}

// unfold writes the column matrix of images b0 … b0+nb−1 of xv side by
// side into col (row stride nb·pixels).
func unfold[T float](col, xv []T, s convShape, b0, nb int) {
	n, inSize, ld := s.pixels(), s.inSize(), nb*s.pixels()
	parallelFor(nb, func(i int) {
		img := xv[(b0+i)*inSize : (b0+i+1)*inSize]
		if s.geo.Pointwise() {
			kernels.CopyRows(col[i*n:], ld, img, n, s.cin, n)
		} else {
			kernels.Im2col(col[i*n:], ld, img, s.cin, s.geo)
		}
	})
}

// The CPU engine's convolution (cpuPrims.conv2d and conv2dBackward): the
// grouped im2col products, the direct products of 1×1 convolutions on
// large planes, and Winograd's F(2×2, 3×3) for 3×3, stride-1 float32 ones.

// convForward writes the convolution of x by w (plus bias, nil for none)
// to out; it returns Winograd's transformed filters when keep asks for the
// input's gradient to reuse them (nil otherwise).
func convForward[T float](ov, xv, wv, bv []T, s convShape, keep bool) []float32 {
	batch, cin, cout, geo := s.batch, s.cin, s.cout, s.geo
	h, wd := geo.H, geo.W
	n, k, inSize := s.pixels(), s.column(), s.inSize()
	outSize := cout * n // one output image

	var beta T
	if bv != nil {
		for b := 0; b < batch; b++ {
			for o := 0; o < cout; o++ {
				row := ov[b*outSize+o*n : b*outSize+(o+1)*n]
				for i := range row {
					row[i] = bv[o]
				}
			}
		}
		beta = 1
	}
	var u []float32 // Winograd's transformed filters
	group := s.group()
	switch {
	case winogradFits(xv, geo, cin, cout):
		// The input's gradient reuses the transformed filters.
		u = winogradFilters(any(wv).([]float32), cin, cout)
		winogradConv(any(ov).([]float32), any(xv).([]float32), u, batch, cin, cout, h, wd, false, bv != nil)
		if !keep {
			release(u)
			u = nil
		}
	case s.direct():
		// Y[b] = W·X[b]: the input planes are the column matrix.
		kernels.GemmStrided(false, false, batch, cout, n, k, 1, wv, k, 0, xv, n, inSize, beta, ov, n, outSize)
	default:
		col := scratch[T](k * group * n)
		defer release(col)
		var wide []T
		if group > 1 {
			wide = scratch[T](cout * group * n)
			defer release(wide)
		}
		for b0 := 0; b0 < batch; b0 += group {
			nb := min(group, batch-b0)
			ld := nb * n
			unfold(col, xv, s, b0, nb)
			if nb == 1 {
				kernels.Gemm(false, false, cout, n, k, 1, wv, k, col, n, beta, ov[b0*outSize:], n)
				continue
			}
			// [Cout, nb·n] = W·col, then image i's block to out[b0+i].
			kernels.Gemm(false, false, cout, ld, k, 1, wv, k, col, ld, 0, wide, ld)
			parallelFor(nb, func(i int) {
				dst := ov[(b0+i)*outSize:]
				if bv != nil {
					kernels.AddRows(dst, n, wide[i*n:], ld, cout, n)
				} else {
					kernels.CopyRows(dst, n, wide[i*n:], ld, cout, n)
				}
			})
		}
	}

	return u
}

// convBackward adds the convolution's gradients to dw and dx (nil for
// none; dx's existing values scaled by dxBeta, 0 for a new gradient),
// given dY; u is convForward's result.
func convBackward[T float](dx []T, dxBeta T, dw, dy, xv, wv []T, s convShape, u []float32) {
	batch, cin, cout, geo := s.batch, s.cin, s.cout, s.geo
	h, wd := geo.H, geo.W
	n, k, inSize := s.pixels(), s.column(), s.inSize()
	outSize := cout * n
	pointwise := geo.Pointwise()
	group := s.group()
	if s.direct() {
		if dw != nil { // dW += Σ_b dY[b]·X[b]ᵀ
			kernels.GemmStrided(false, true, batch, cout, k, n, 1, dy, n, outSize, xv, n, inSize, 1, dw, k, 0)
		}
		if dx != nil { // dX[b] += Wᵀ·dY[b]
			kernels.GemmStrided(true, false, batch, k, n, cout, 1, wv, k, 0, dy, n, outSize, dxBeta, dx, n, inSize)
		}
		return
	}
	if u != nil { // Winograd ran forward
		if dx != nil { // dX += the adjoint convolution of dY
			winogradConv(any(dx).([]float32), any(dy).([]float32), u, batch, cin, cout, h, wd, true, dxBeta != 0)
			dx = nil
		}
		release(u)
	}
	if dw != nil && winogradFits(xv, geo, cin, cout) && kernels.WinogradTiles(batch, h, wd) >= winogradGradTiles {
		// dW += Winograd's sums of the correlation of X with dY
		winogradWeightGrad(any(dw).([]float32), any(dy).([]float32), any(xv).([]float32), batch, cin, cout, h, wd, colBudget)
		dw = nil
	}
	if dw == nil && dx == nil {
		return
	}
	col, dyw := scratch[T](k*group*n), scratch[T](cout*group*n)
	defer release(col)
	defer release(dyw)
	for b0 := 0; b0 < batch; b0 += group {
		nb := min(group, batch-b0)
		ld := nb * n
		parallelFor(nb, func(i int) { // dY of the group side by side
			kernels.CopyRows(dyw[i*n:], ld, dy[(b0+i)*outSize:], n, cout, n)
		})
		if dw != nil { // dW += dY·colᵀ, col recomputed to save memory
			unfold(col, xv, s, b0, nb)
			kernels.Gemm(false, true, cout, k, ld, 1, dyw, ld, col, ld, 1, dw, k)
		}
		if dx != nil { // dcol = Wᵀ·dY; dX[b] += col2im(dcol)
			kernels.Gemm(true, false, k, ld, cout, 1, wv, k, dyw, ld, 0, col, ld)
			parallelFor(nb, func(i int) {
				img := dx[(b0+i)*inSize : (b0+i+1)*inSize]
				switch {
				case pointwise && dxBeta == 0: // a new gradient: copy, not add to zeros
					kernels.CopyRows(img, n, col[i*n:], ld, cin, n)
				case pointwise:
					kernels.AddRows(img, n, col[i*n:], ld, cin, n)
				default:
					kernels.Col2im(img, col[i*n:], ld, cin, geo)
				}
			})
		}
	}
}

// winogradFits reports whether Conv2d of x (values xv) runs by Winograd's
// F(2×2, 3×3) (kernels/winograd.go): in float32, for a 3×3, stride-1,
// padding-1, undilated window between at least winogradChannels channels.
// It takes 2.25 times fewer multiplications than the product with the
// column matrix, and its transforms and transposes are additions and
// copies of the size of the input and the output; the error stays within a
// few times that of the direct product.
func winogradFits[T float](xv []T, g kernels.ConvGeom, cin, cout int) bool {
	if _, ok := any(xv).([]float32); !ok {
		return false
	}
	return g.KH == 3 && g.KW == 3 && g.StrideH == 1 && g.StrideW == 1 && g.PadH == 1 && g.PadW == 1 &&
		g.DilH == 1 && g.DilW == 1 && cin >= winogradChannels && cout >= winogradChannels
}

// winogradChannels is the fewest channels (in and out) of a convolution
// that Conv2d runs by Winograd's algorithm.
const winogradChannels = 4

// winogradGradTiles is the fewest 2×2 tiles (over the batch) for which the
// weight's gradient of a Winograd convolution is computed by Winograd's
// algorithm too. Its cost per channel pair is 32 flops per tile plus a
// fixed part (the transform back of 16 sums, and their trip through
// memory) worth some hundreds of flops; the column matrix's is 18 flops
// per pixel. On ResNet's last stage (512 channels, 7×7 planes, 16 tiles an
// image for 49 pixels) Winograd's took about 10% more CPU time than the
// column matrix with a batch of four (64 tiles) and about 10% less with
// eight (BenchmarkConvWeightGrad).
const winogradGradTiles = 128

// winogradFilters returns the transformed filters (16, Cin, Cout) of w
// (Cout, Cin, 3, 3), in a buffer from scratch.
func winogradFilters(w []float32, cin, cout int) []float32 {
	u := scratch[float32](16 * kernels.WinogradFilterStride(cin, cout))
	channelChunks(cout, cin*64, func(lo, hi int) { kernels.WinogradFilters(u, w, cout, cin, lo, hi) })
	return u
}

// winogradConv writes (add false) or adds (add true) into y (B, Cout, h, w)
// the 3×3, stride-1, padding-1 convolution of x (B, Cin, h, w) whose
// transformed filters are u (winogradFilters); with adjoint set, the
// adjoint convolution instead, of x (B, Cout, h, w) into y (B, Cin, h, w):
// the gradient of the input.
func winogradConv(y, x, u []float32, batch, cin, cout, h, wd int, adjoint, add bool) {
	kin, kout := cin, cout
	if adjoint {
		kin, kout = cout, cin
	}
	plane := h * wd
	nt := kernels.WinogradTiles(batch, h, wd)
	xh := scratch[float32](batch * plane * max(kin, kout))
	defer release(xh)
	parallelFor(batch, func(i int) { kernels.ToChannelsLast(xh, x, kin, plane, i, i+1) })
	v := scratch[float32](16 * nt * kin)
	defer release(v)
	channelChunks(nt, 16*kin, func(lo, hi int) { kernels.WinogradInput(v, xh, batch, h, wd, kin, lo, hi) })
	m := scratch[float32](16 * nt * kout)
	defer release(m)
	kernels.WinogradProducts(m, v, u, nt, cin, cout, adjoint)
	yh := xh[:batch*plane*kout] // the input is transformed: its buffer is free
	channelChunks(nt, 16*kout, func(lo, hi int) { kernels.WinogradOutput(yh, m, batch, h, wd, kout, nil, lo, hi) })
	parallelFor(batch, func(i int) { kernels.FromChannelsLast(y, yh, kout, plane, add, i, i+1) })
}

// winogradWeightGrad adds to dw (Cout, Cin, 3, 3) the weight's gradient of
// the 3×3, stride-1, padding-1 convolution of x (B, Cin, h, w) given the
// output's gradient dy (B, Cout, h, w), by Winograd's F(2×2, 3×3) in its
// transposed form (kernels/winograd_grad.go): dW[o][c] = Gᵀ·M[o][c]·G with
// the 16 sums M_ξ = Σ_t Ŷ_ξ[·][t]·V_ξ[·][t]ᵀ of the transformed
// output-gradient tiles Ŷ = A·dY·Aᵀ and input tiles V = Bᵀ·d·B, both
// transformed plane by plane. The images are transformed in blocks whose
// tiles (16·T·(Cin + Cout) values) fit in budget, one image at least, and
// the blocks' products are added to M in order, so the result does not
// depend on the number of goroutines.
func winogradWeightGrad(dw, dy, x []float32, batch, cin, cout, h, wd, budget int) {
	plane := h * wd
	per := kernels.WinogradTiles(1, h, wd)
	nb := max(1, min(batch, budget/(16*per*(cin+cout))))
	vx := scratch[float32](16 * kernels.WinogradGradStride(cin, nb*per))
	vy := scratch[float32](16 * kernels.WinogradGradStride(cout, nb*per))
	defer release(vx)
	defer release(vy)
	m := scratch[float32](16 * kernels.WinogradFilterStride(cin, cout))
	defer release(m)
	for b0 := 0; b0 < batch; b0 += nb {
		n := min(nb, batch-b0)
		nt := n * per
		sx, sy := kernels.WinogradGradStride(cin, nt), kernels.WinogradGradStride(cout, nt)
		// Plane p = i·C + c of the block (image b0 + i, channel c) goes to
		// row c of each matrix, from column i·per.
		channelChunks(n*(cin+cout), 4*plane, func(lo, hi int) {
			var zbuf [512]float32 // a row of zeros for the padding
			zero := zbuf[:]
			if wd > len(zbuf) {
				zero = make([]float32, wd)
			}
			for p := lo; p < hi; p++ {
				if p < n*cin {
					i, c := p/cin, p%cin
					kernels.WinogradInputPlane(vx[c*nt+i*per:], sx, x[(b0*cin+p)*plane:][:plane], h, wd, zero)
				} else {
					i, o := (p-n*cin)/cout, (p-n*cin)%cout
					kernels.WinogradGradPlane(vy[o*nt+i*per:], sy, dy[(b0*cout+p-n*cin)*plane:][:plane], h, wd, zero)
				}
			}
		})
		kernels.WinogradGradProducts(m, vy, vx, nt, cin, cout, b0 > 0)
	}
	channelChunks(cout, 16*cin, func(lo, hi int) { kernels.WinogradWeightGrad(dw, m, cout, cin, lo, hi) })
}

// scratchPool recycles one element type's temporary buffers (column
// matrices, Winograd's transforms, products), which are large and fully
// overwritten before use, so they are handed out dirty. They are kept by
// size class, class c holding capacities of at least 2^c, so that a
// request finds a buffer of its size whatever mix of sizes came before:
// in a stack of up to two per core, which a garbage collection does not
// empty and which gives back the buffer used last (the warmest), and the
// rest in a sync.Pool. boxes holds the empty slice headers the classes
// store, so that a warm release allocates nothing.
type scratchPool[T float] struct {
	classes [48]struct {
		stack *freelist.Stack[[]T]
		pool  sync.Pool // *[]T beyond the stack's room
	}
	boxes sync.Pool // empty *[]T
}

func newScratchPool[T float]() *scratchPool[T] {
	p := new(scratchPool[T])
	for i := range p.classes {
		p.classes[i].stack = freelist.NewStack[[]T](2 * runtime.GOMAXPROCS(0))
	}
	return p
}

var (
	scratch32 = newScratchPool[float32]()
	scratch64 = newScratchPool[float64]()
)

func scratchOf[T float]() *scratchPool[T] {
	if p, ok := any(scratch64).(*scratchPool[T]); ok {
		return p
	}
	return any(scratch32).(*scratchPool[T])
}

// sizeClass returns the smallest c with 2^c ≥ n.
func sizeClass(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

// scratch returns a buffer of n elements with arbitrary contents, of a
// capacity of the next power of two; give it back with release.
func scratch[T float](n int) []T {
	if b := freeScratch[T](n); b != nil {
		return b
	}
	return make([]T, n, 1<<sizeClass(n))
}

// freeScratch is scratch where a buffer was given back, nil otherwise.
func freeScratch[T float](n int) []T {
	p := scratchOf[T]()
	c := &p.classes[sizeClass(n)]
	box := c.stack.Get()
	if box == nil {
		box, _ = c.pool.Get().(*[]T)
	}
	if box == nil {
		return nil
	}
	b := (*box)[:n]
	*box = nil
	p.boxes.Put(box)
	return b
}

// release gives a buffer back for later scratch calls: to the class its
// capacity covers whole (every buffer of class c holds at least 2^c).
func release[T float](b []T) {
	c := bits.Len(uint(cap(b))) - 1
	if c < 0 {
		return
	}
	p := scratchOf[T]()
	box, _ := p.boxes.Get().(*[]T)
	if box == nil {
		box = new([]T)
	}
	*box = b
	if cl := &p.classes[c]; !cl.stack.Put(box) {
		cl.pool.Put(box)
	}
}

// parallelFor runs f(0..n-1) on up to GOMAXPROCS goroutines.
func parallelFor(n int, f func(i int)) {
	procs := min(n, runtime.GOMAXPROCS(0))
	if procs <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < procs; w++ {
		lo, hi := w*n/procs, (w+1)*n/procs
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}

// channelLayout checks that x is [B, C, ...] with C channels and returns the
// size of one channel plane (the product of the trailing dimensions).
func channelLayout(op string, x *Tensor, c int) int {
	if x.Rank() < 2 || x.Dim(1) != c {
		panic(fmt.Sprintf("radgen: %s of %v with %d channels", op, x.shape, c))
	}
	return numel(x.shape[2:])
}

func checkChannelVec(op, what string, t *Tensor, c int) {
	if t != nil && (t.Rank() != 1 || t.Dim(0) != c) {
		panic(fmt.Sprintf("radgen: %s %s of shape %v for %d channels", op, what, t.shape, c))
	}
}

// Pool2dParams is the geometry of MaxPool2d as torch.nn.MaxPool2d has it
// (ceil_mode False), per spatial axis (height, width). A zero Stride entry
// means the kernel size (torch's default); a zero Dilation entry means 1.
type Pool2dParams struct {
	Kernel   [2]int
	Stride   [2]int
	Padding  [2]int // −∞ added on both sides; at most half the window
	Dilation [2]int
}

// PoolSquare returns square Pool2dParams. ResNet's stem pool is
// PoolSquare(3, 2, 1).
func PoolSquare(kernel, stride, padding int) Pool2dParams {
	return Pool2dParams{Kernel: [2]int{kernel, kernel}, Stride: [2]int{stride, stride}, Padding: [2]int{padding, padding}}
}

// MaxPool2d returns the maximum of each window of x [B, C, H, W]:
// [B, C, Ho, Wo] with Ho = ⌊(H + 2p − d(k−1) − 1)/s⌋ + 1. Padding never wins,
// and NaN propagates, as in torch. The gradient goes to the (first) maximum
// of each window. The max pool of a deferred convolution (see Conv2d) is
// deferred too, and runs on its channels-last values.
func (g *Graph) MaxPool2d(x *Tensor, p Pool2dParams) *Tensor {
	pr := primsOf("MaxPool2d", x)
	if x.Rank() != 4 {
		panic(fmt.Sprintf("radgen: MaxPool2d of %v", x.shape))
	}
	stride := p.Stride
	for i := range stride {
		if stride[i] == 0 {
			stride[i] = p.Kernel[i]
		}
	}
	cp := Conv2dParams{Stride: stride, Padding: p.Padding, Dilation: p.Dilation}
	geo := cp.geom(x.Dim(2), x.Dim(3), p.Kernel[0], p.Kernel[1])
	if 2*geo.PadH > geo.DilH*(geo.KH-1)+1 || 2*geo.PadW > geo.DilW*(geo.KW-1)+1 {
		panic(fmt.Sprintf("radgen: MaxPool2d padding %v exceeds half the window %v", p.Padding, p.Kernel))
	}
	ho, wo := geo.OutH(), geo.OutW()
	if ho == 0 || wo == 0 {
		panic(fmt.Sprintf("radgen: MaxPool2d window %+v does not fit input %v", p, x.shape))
	}
	if y := g.deferPool(x, geo); y != nil {
		return y
	}
	planes := x.Dim(0) * x.Dim(1)
	out := g.empty(x, []int{x.Dim(0), x.Dim(1), ho, wo})
	arg := pr.maxPool(out.at(0), x.at(0), planes, geo)
	keep(x, out)
	if g.needs(x) {
		g.push(out, func() {
			if out.grad != nil {
				pr.maxPoolBackward(gradOf(x).at(0), out.grad.at(0), arg, planes, geo)
				keep(x.grad, out.grad)
			}
		})
	}
	return out
}

// poolArgs are the positions of a max pool's maxima in their planes
// (int32s; −1 for a window of padding only), where the engine keeps them.
type poolArgs struct {
	host []int32
	dev  *Tensor
}

// maxPoolPlanes runs the CPU's max pool over planes planes, chunks of
// planes on every core, writing the maxima's positions to arg.
func maxPoolPlanes[T float](ov []T, arg []int32, xv []T, planes int, geo kernels.ConvGeom) {
	planeIn, planeOut := geo.H*geo.W, geo.OutH()*geo.OutW()
	channelChunks(planes, planeIn, func(lo, hi int) {
		kernels.MaxPool(ov[lo*planeOut:hi*planeOut], arg[lo*planeOut:hi*planeOut], xv[lo*planeIn:hi*planeIn], hi-lo, geo)
	})
}

// maxPoolPlanesBackward adds each dY to the element of dX that arg names.
func maxPoolPlanesBackward[T float](dx, dy []T, arg []int32, planes int, geo kernels.ConvGeom) {
	planeIn, planeOut := geo.H*geo.W, geo.OutH()*geo.OutW()
	channelChunks(planes, planeIn, func(lo, hi int) {
		kernels.MaxPoolBackward(dx[lo*planeIn:hi*planeIn], dy[lo*planeOut:hi*planeOut], arg[lo*planeOut:hi*planeOut], hi-lo, planeIn, planeOut)
	})
}
