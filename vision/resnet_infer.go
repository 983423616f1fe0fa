package vision

// The float32 inference engine of ResNet: the folded network run on raw
// buffers, channels last, with every convolution one fused product.
//
// Layout. An activation is (B, H, W, C), channels last: row b·H·W + y·W + x
// of a (B·H·W, C) matrix. A 1×1, stride-1 convolution is then the product
// of that matrix with the weight (Cin, Cout), with no copy at all; any other
// is the product of its window matrix (Im2colNHWC, (B·Ho·Wo, KH·KW·Cin))
// with the weight laid out tap-major, (KH·KW·Cin, Cout). The product is
// again channels last, so layers chain without transposes, and the batch's
// images share every product (two IU X-Ray views of a 7×7 grid are 98
// rows).
//
// Fusion. The weights are packed once, when the batch norms are folded, in
// the layout the GEMM micro-kernels read (f32.PackB). Each product applies
// the folded batch norm's bias and the ReLU to its tiles in registers
// (f32.GemmPacked's epilogue), and a residual block's last product adds
// onto the shortcut in place (beta = 1): the identity shortcut is the block
// input itself, overwritten by the block's output; a projection shortcut is
// computed first into the output buffer. No pass over memory remains for
// batch norm, ReLU or the residual sum, and no buffer is zeroed: every one
// is overwritten whole.
//
// Buffers come from a pool of per-call arenas, so that concurrent forwards
// never share one and a steady stream of them allocates only its result.

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/f32"
	"github.com/radgen/radgen/internal/kernels"
)

// packedConv is a convolution with its batch norm folded in, packed for
// the engine: a 3×3, stride-1 one as the 16 transformed filters of
// Winograd's F(2×2, 3×3) (see internal/f32/winograd.go), 2.25 times fewer
// multiplications; any other as the weight of the product with its window
// matrix.
type packedConv struct {
	cin, cout, kh, kw, stride int
	w                         *f32.PackedB      // (KH·KW·Cin, Cout), rows tap-major: (ky·KW + kx)·Cin + c
	wino                      *[16]*f32.PackedB // U_ξ (Cin, Cout), instead of w
	b                         []float32         // (Cout)
}

// newPackedConv packs the folded weight w (Cout, Cin, KH, KW), as torch lays
// it out, and bias (Cout).
func newPackedConv(w, bias []float64, cin, kh, kw, stride int) *packedConv {
	cout := len(bias)
	b := make([]float32, cout)
	for o, v := range bias {
		b[o] = float32(v)
	}
	if kh == 3 && kw == 3 && stride == 1 {
		u := f32.WinogradWeights(w, cout, cin)
		return &packedConv{cin: cin, cout: cout, kh: kh, kw: kw, stride: stride, wino: &u, b: b}
	}
	k := kh * kw * cin
	wt := make([]float32, k*cout) // (KH·KW·Cin, Cout)
	for o := range cout {
		for c := range cin {
			for t := range kh * kw {
				wt[(t*cin+c)*cout+o] = float32(w[(o*cin+c)*kh*kw+t])
			}
		}
	}
	return &packedConv{cin: cin, cout: cout, kh: kh, kw: kw, stride: stride, w: f32.PackB(false, k, cout, wt, cout), b: b}
}

// geom returns the convolution's geometry on an h×w plane (padding k/2).
func (pc *packedConv) geom(h, w int) kernels.ConvGeom {
	return kernels.ConvGeom{H: h, W: w, KH: pc.kh, KW: pc.kw, StrideH: pc.stride, StrideW: pc.stride,
		PadH: pc.kh / 2, PadW: pc.kw / 2, DilH: 1, DilW: 1}
}

// apply computes y = f(conv(x) + bias + beta·y) for x (B, h, w, Cin),
// channels last, into y (B, ho, wo, Cout), f the ReLU or the identity, and
// returns ho, wo. It uses the arena's col and prod buffers.
func (pc *packedConv) apply(ar *arena, x []float32, bsz, h, w int, y []float32, beta float32, relu bool) (ho, wo int) {
	g := pc.geom(h, w)
	ho, wo = g.OutH(), g.OutW()
	rows := bsz * ho * wo
	if pc.wino != nil {
		// V (16, T, Cin) in col, M (16, T, Cout) in prod.
		nt := f32.WinogradTiles(bsz, h, w)
		ar.col = growBuf(ar.col, 16*nt*pc.cin)
		ar.prod = growBuf(ar.prod, 16*nt*pc.cout)
		v, m := ar.col, ar.prod
		parallelRows(nt, 32*pc.cin, func(lo, hi int) { f32.WinogradInput(v, x, bsz, h, w, pc.cin, lo, hi) })
		f32.GemmPackedBatch(nt, v, pc.cin, nt*pc.cin, pc.wino[:], m, pc.cout, nt*pc.cout)
		parallelRows(nt, 32*pc.cout, func(lo, hi int) {
			f32.WinogradOutput(y, m, bsz, h, w, pc.cout, pc.b, beta, relu, lo, hi)
		})
		return ho, wo
	}
	a, lda := x, pc.cin
	if !g.Pointwise() {
		k := pc.kh * pc.kw * pc.cin
		ar.col = growBuf(ar.col, rows*k)
		c := ar.col
		parallelRows(bsz*ho, wo*k, func(lo, hi int) { kernels.Im2colNHWC(c, x, pc.cin, g, lo, hi) })
		a, lda = c, k
	}
	f32.GemmPacked(rows, a, lda, pc.w, beta, y[:rows*pc.cout], pc.cout, pc.b, relu)
	return ho, wo
}

// arena holds one forward's buffers; see the file comment.
type arena struct {
	in, col, prod, x, t1, t2, sc []float32
}

var arenas = sync.Pool{New: func() any { return new(arena) }}

func growBuf(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// parallelRows runs f over [0, n) on up to GOMAXPROCS goroutines when the
// work (n rows of about cost elements each) is worth more than starting
// them. The goroutines take contiguous runs of rows, four per goroutine,
// from a counter, so that on cores shared with other work the ones that run
// take over from the ones that wait.
func parallelRows(n, cost int, f func(lo, hi int)) {
	const minWork = 1 << 14
	procs := min(n, runtime.GOMAXPROCS(0), max(1, n*cost/minWork))
	if procs <= 1 {
		f(0, n)
		return
	}
	runs := min(n, 4*procs)
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < runs; i = int(next.Add(1) - 1) {
			f(i*n/runs, (i+1)*n/runs)
		}
	}
	var wg sync.WaitGroup
	for range procs - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// forward32 runs the folded network on images x [B, 3, H, W] (float32) and
// returns the feature map [B, C, h, w].
func (f *foldedNet) forward32(ctx context.Context, x *radgen.Tensor) (*radgen.Tensor, error) {
	bsz, cin, h, w := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	ar := arenas.Get().(*arena)
	defer arenas.Put(ar)

	// The images, channels last.
	ar.in = growBuf(ar.in, bsz*h*w*cin)
	toNHWC(ar.in, x.Data(), bsz, cin, h*w)

	// Stem: conv1 + bn1 + ReLU, then the max pool.
	stem := f.stem.packed
	sg := stem.geom(h, w)
	ar.t1 = growBuf(ar.t1, bsz*sg.OutH()*sg.OutW()*stem.cout)
	h, w = stem.apply(ar, ar.in, bsz, h, w, ar.t1, 0, true)
	c := stem.cout
	pool := kernels.ConvGeom{H: h, W: w, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilH: 1, DilW: 1}
	ho, wo := pool.OutH(), pool.OutW()
	ar.x = growBuf(ar.x, bsz*ho*wo*c)
	t1 := ar.t1
	parallelRows(bsz*ho, wo*c*9, func(lo, hi int) { kernels.MaxPoolNHWC(ar.x, t1, c, pool, lo, hi) })
	h, w = ho, wo

	for _, b := range f.blocks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, w, c = ar.block(&b, bsz, h, w, c)
	}

	// The feature map, channels first.
	out := make([]float32, bsz*c*h*w)
	toNCHW(out, ar.x[:bsz*h*w*c], bsz, c, h*w)
	return radgen.FromFloat32(out, bsz, c, h, w), nil
}

// block runs one residual block on ar.x (B, h, w, c), leaving its output in
// ar.x, and returns the output's geometry.
func (ar *arena) block(b *foldedBlock, bsz, h, w, c int) (int, int, int) {
	// The convolutions but the last, each with its ReLU, alternate between
	// t1 and t2.
	y, yh, yw := ar.x, h, w
	bufs := [2]*[]float32{&ar.t1, &ar.t2}
	for i := range len(b.conv) - 1 {
		pc := b.conv[i].packed
		g := pc.geom(yh, yw)
		dst := bufs[i%2]
		*dst = growBuf(*dst, bsz*g.OutH()*g.OutW()*pc.cout)
		yh, yw = pc.apply(ar, y, bsz, yh, yw, *dst, 0, true)
		y = *dst
	}
	last := b.conv[len(b.conv)-1].packed
	g := last.geom(yh, yw)
	oh, ow := g.OutH(), g.OutW()
	if b.down == nil {
		// Identity shortcut: out = ReLU(conv(y) + bias + x), in place.
		last.apply(ar, y, bsz, yh, yw, ar.x, 1, true)
		return oh, ow, last.cout
	}
	// Projection shortcut into sc, then the sum onto it.
	d := b.down.packed
	ar.sc = growBuf(ar.sc, bsz*oh*ow*last.cout)
	d.apply(ar, ar.x, bsz, h, w, ar.sc, 0, false)
	last.apply(ar, y, bsz, yh, yw, ar.sc, 1, true)
	ar.x, ar.sc = ar.sc, ar.x
	return oh, ow, last.cout
}

// toNHWC transposes each of bsz images (c, plane) of src into (plane, c).
func toNHWC(dst, src []float32, bsz, c, plane int) {
	parallelRows(bsz, c*plane, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			s, d := src[b*c*plane:(b+1)*c*plane], dst[b*c*plane:(b+1)*c*plane]
			for ch := range c {
				for i, v := range s[ch*plane : (ch+1)*plane] {
					d[i*c+ch] = v
				}
			}
		}
	})
}

// toNCHW transposes each of bsz images (plane, c) of src into (c, plane).
func toNCHW(dst, src []float32, bsz, c, plane int) {
	for b := range bsz {
		s, d := src[b*c*plane:(b+1)*c*plane], dst[b*c*plane:(b+1)*c*plane]
		for i := range plane {
			for ch, v := range s[i*c : (i+1)*c] {
				d[ch*plane+i] = v
			}
		}
	}
}
