package radgen

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"gorgonia.org/tensor"

	"github.com/radgen/radgen/internal/kernels"
)

// The CPU engine's convolutions on a graph that records nothing.
//
// On such a graph (without an arena), with float32 CPU operands, Conv2d
// does not compute its result when it is issued: the result is deferred, a
// tensor whose values the engine computes when they are first read. Until
// then an op that only changes how the convolution's output is finished is
// absorbed into it instead of running: BatchNorm2d with running
// statistics (folded into the weight and bias of the output channels),
// Add of a residual of the same shape, and ReLU, in that order, each
// giving a new deferred tensor while the one it read keeps its own
// computation. Any other read of a deferred tensor computes it.
//
// The engine computes a deferred convolution channels last, (B, H, W, C),
// as one product with packed weights whose epilogue applies the folded
// bias, the residual and the ReLU (ops_prepared.go), and keeps the result
// so: a convolution or a max pool that reads it uses it as it is (MaxPool2d
// of a deferred tensor is deferred too, and runs the channels-last kernel),
// and only another op's read, or an access to the values, writes them
// channels first into the tensor's own storage. An op that reads a
// deferred tensor computes it when that op is issued, so that the work of
// a network's layers is done as its forward goes.
//
// The weight packed for the products, with the batch norm folded in, is
// prepared once and kept beside the weight tensor (its prep field), valid
// for the versions of the tensors it was made from: an in-place write of
// any of them (Tensor.CopyFrom, Fill, AdamUpdate, loading weights, Data)
// makes the next use prepare it again. The channels-last values a deferred
// tensor keeps are scratch buffers: once every op registered to read them
// has done so, they are reclaimable (see reclaimable), taken, newest first,
// for the values computed later, and a later read of a tensor whose buffer
// was taken computes its values again, from its inputs, to the same bits.
// The operands are read when the values are computed: they must not be
// written while the tensor may still be read (Conv2d's doc says so).

// deferred is a deferred tensor's computation and its state. The recipe
// (kind to hdr) is fixed when it is made, and its operands dropped once
// the tensor holds its values; the state is guarded by mu.
type deferred struct {
	kind           deferKind
	x, w, bias     *Tensor // input (B, Cin, H, W); the convolution's weight and bias (nil for none)
	bn             *bnFold // the absorbed batch norm, nil for none
	res            *Tensor // the absorbed residual (the output's shape), nil for none
	relu           bool    // the ReLU absorbed
	s              convShape
	hdr            *[]float32 // the tensor's storage (its host), written when computed channels first
	mu             sync.Mutex
	done           atomic.Bool // *hdr holds the values, channels first
	nhwc           []float32   // the values channels last, while kept (a scratch buffer)
	readers        int         // registered readers of nhwc, and reads under way
	holdX, holdRes bool        // the recipe holds a registration as a reader of x, of res
	computed       bool        // nhwc was computed once: nothing is absorbed any more
}

type deferKind uint8

const (
	deferConv deferKind = iota + 1 // a convolution, s its sizes and window
	deferPool                      // MaxPool2d, s.cin = s.cout the channels, s.geo its window
)

// bnFold is a batch norm with running statistics (BatchNorm2d's operands).
type bnFold struct {
	weight, bias, mean, variance *Tensor
	eps                          float64
}

// defers reports whether g defers the ops of ts (nil entries ignored): a
// graph that records nothing and has no arena, with float32 CPU operands.
func (g *Graph) defers(ts ...*Tensor) bool {
	if g.record || g.arena != nil {
		return false
	}
	for _, t := range ts {
		if t != nil && (t.device != CPU || t.dtype() != tensor.Float32) {
			return false
		}
	}
	return true
}

// newDeferred returns the tensor of shape whose values d computes.
func newDeferred(d *deferred, shape ...int) *Tensor {
	checkShape(shape)
	d.hdr = new([]float32)
	return &Tensor{host: d.hdr, shape: shape, device: CPU, lazy: d}
}

// deferConv returns Conv2d's deferred result (B, Cout, Ho, Wo) where g
// defers it, nil otherwise.
func (g *Graph) deferConv(x, w, bias *Tensor, s convShape) *Tensor {
	if !g.defers(x, w, bias) {
		return nil
	}
	d := &deferred{kind: deferConv, x: x, w: w, bias: bias, s: s}
	d.holdX = x.lazy.use()
	return newDeferred(d, s.batch, s.cout, s.geo.OutH(), s.geo.OutW())
}

// deferPool returns MaxPool2d's deferred result of a deferred x where g
// defers it, nil otherwise.
func (g *Graph) deferPool(x *Tensor, geo kernels.ConvGeom) *Tensor {
	if x.lazy == nil || !g.defers(x) {
		return nil
	}
	c := x.Dim(1)
	d := &deferred{kind: deferPool, x: x, s: convShape{batch: x.Dim(0), cin: c, cout: c, geo: geo}}
	d.holdX = x.lazy.use()
	return newDeferred(d, x.Dim(0), c, geo.OutH(), geo.OutW())
}

// absorbBN returns BatchNorm2d's result as the deferred convolution x with
// the batch norm folded in, where x is one that takes it; nil otherwise.
func (g *Graph) absorbBN(x, weight, bias, mean, variance *Tensor, eps float64) *Tensor {
	if x.lazy == nil || !g.defers(x, weight, bias, mean, variance) {
		return nil
	}
	return x.lazy.absorb(x, func(n *deferred) bool {
		if n.bn != nil || n.res != nil || n.relu {
			return false
		}
		n.bn = &bnFold{weight, bias, mean, variance, eps}
		return true
	}, nil)
}

// absorbAdd returns a + b as a deferred convolution with the other operand
// as its residual, where one of them is a deferred convolution that takes
// it and both have one shape; nil otherwise (Add runs).
func (g *Graph) absorbAdd(a, b *Tensor) *Tensor {
	if a.lazy == nil && b.lazy == nil || !slices.Equal(a.shape, b.shape) || !g.defers(a, b) {
		return nil
	}
	residual := func(r *Tensor) func(*deferred) bool {
		return func(n *deferred) bool {
			if n.res != nil || n.relu {
				return false
			}
			n.res = r
			return true
		}
	}
	if y := a.lazy.absorb(a, residual(b), b); y != nil {
		return y
	}
	return b.lazy.absorb(b, residual(a), a)
}

// absorbReLU returns ReLU(x) as the deferred convolution x with the ReLU
// absorbed, where x is one that takes it; nil otherwise (ReLU runs).
func (g *Graph) absorbReLU(x *Tensor) *Tensor {
	if x.lazy == nil || !g.defers(x) {
		return nil
	}
	return x.lazy.absorb(x, func(n *deferred) bool {
		if n.relu {
			return false
		}
		n.relu = true
		return true
	}, nil)
}

// absorb returns a new deferred tensor of t's shape whose recipe is d's
// (t's) changed by edit, or nil where d is not a convolution not yet
// computed or edit refuses. newRes is the residual edit adds, if any. The
// new recipe takes over d's registrations as a reader of its inputs, so
// that d, computed later all the same, reads them as any other reader
// does.
func (d *deferred) absorb(t *Tensor, edit func(*deferred) bool, newRes *Tensor) *Tensor {
	if d == nil || d.kind != deferConv {
		return nil
	}
	if newRes != nil && newRes.lazy == d {
		return nil // x + x: not a residual of its own
	}
	d.mu.Lock()
	if d.computed || d.done.Load() {
		d.mu.Unlock()
		return nil
	}
	n := &deferred{kind: d.kind, x: d.x, w: d.w, bias: d.bias, bn: d.bn, res: d.res, relu: d.relu, s: d.s}
	if !edit(n) {
		d.mu.Unlock()
		return nil
	}
	n.holdX, d.holdX = d.holdX, false
	if n.res == d.res {
		n.holdRes, d.holdRes = d.holdRes, false
	}
	d.mu.Unlock()
	// Outside d's lock: a residual may read d.
	if !n.holdX {
		n.holdX = n.x.lazy.register()
	}
	if n.res != nil && !n.holdRes {
		if n.res == newRes {
			n.holdRes = n.res.lazy.use()
		} else {
			n.holdRes = n.res.lazy.register()
		}
	}
	return newDeferred(n, slices.Clone(t.shape)...)
}

// register makes the caller a reader of d's channels-last values, which d
// then keeps until the reader has read them (acquire with held set, then
// unuse). It reports whether it did: false for a nil d (a tensor whose
// values are there).
func (d *deferred) register() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	d.readers++
	d.mu.Unlock()
	return true
}

// use is register, and computes d's values now: an op that reads a
// deferred tensor computes it when the op is issued.
func (d *deferred) use() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readers++
	d.ensure()
	return true
}

// acquire returns d's values channels last, computing them if need be;
// the caller reads them until it calls unuse. held says the caller
// registered as a reader before.
func (d *deferred) acquire(held bool) []float32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !held {
		d.readers++
	}
	d.ensure()
	return d.nhwc
}

// unuse ends a reader's read: the last one gives the channels-last values
// back to the engine's pool.
func (d *deferred) unuse() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readers--
	d.dropIdle()
}

// dropIdle makes the channels-last values free where no reader is left:
// back to the engine's pool if the tensor holds its values, else
// reclaimable (see reclaimable).
func (d *deferred) dropIdle() {
	if d.readers > 0 || d.nhwc == nil {
		return
	}
	d.readers = 0
	if d.done.Load() {
		release(d.nhwc)
		d.nhwc = nil
		return
	}
	reclaim.put(d)
}

// outSize returns the number of d's values.
func (d *deferred) outSize() int {
	return d.s.batch * d.s.cout * d.s.geo.OutH() * d.s.geo.OutW()
}

// ensure computes d's values channels last into d.nhwc, unless they are
// there; d.mu is held.
func (d *deferred) ensure() {
	if d.nhwc != nil {
		return
	}
	if d.done.Load() { // computed channels first: transposed back
		out := nhwcBuffer(d.outSize())
		src, plane := *d.hdr, d.s.geo.OutH()*d.s.geo.OutW()
		parallelFor(d.s.batch, func(i int) { kernels.ToChannelsLast(out, src, d.s.cout, plane, i, i+1) })
		d.nhwc = out
		return
	}
	// The inputs first: while read, their values are not reclaimed for
	// the output.
	xh, xDone := channelsLast(d.x, d.holdX)
	var out []float32
	switch d.kind {
	case deferConv:
		var rh []float32
		rDone := func() {}
		if d.res != nil {
			rh, rDone = channelsLast(d.res, d.holdRes)
		}
		out = nhwcBuffer(d.outSize())
		preparedConv(d.w, d.bias, d.bn, d.s.geo).apply(out, xh, rh, d.s, d.relu)
		rDone()
	case deferPool:
		out = nhwcBuffer(d.outSize())
		geo, c := d.s.geo, d.s.cout
		channelChunks(d.s.batch*geo.OutH(), geo.OutW()*c*geo.KH*geo.KW, func(lo, hi int) { kernels.MaxPoolNHWC(out, xh, c, geo, lo, hi) })
	}
	xDone()
	d.holdX, d.holdRes = false, false
	d.computed = true
	d.nhwc = out
}

// channelsLast returns the values of x (B, C, H, W) channels last, and the
// function that ends their read: a deferred x's own (held says the caller
// registered as their reader), or a transposed copy.
func channelsLast(x *Tensor, held bool) ([]float32, func()) {
	if d := x.lazy; d != nil {
		return d.acquire(held), d.unuse
	}
	v := values[float32](x)
	c, plane := x.Dim(1), x.Dim(2)*x.Dim(3)
	t := scratch[float32](len(v))
	parallelFor(x.Dim(0), func(i int) { kernels.ToChannelsLast(t, v, c, plane, i, i+1) })
	return t, func() { release(t) }
}

// reclaim is the engine's list of reclaimable channels-last values.
var reclaim reclaimable

// reclaimable lists, by size class, the deferred values whose channels-last
// values no reader holds, in the order they were let go, through weak
// pointers: a value that is no longer reachable costs nothing here, and is
// collected with its buffer. A buffer that the engine needs (nhwcBuffer)
// comes from the newest value of the list that still has it and that no
// one reads now (which is computed again if ever read; the newest is the
// warmest in the caches), else from the engine's pool, else from the heap.
// So a network's forwards reuse the buffers of the values they no longer
// read, without waiting for a collection. A value that a later op still
// reads is there when it does: an op that reads a deferred tensor computes
// it when the op is issued, so that between a value's last registered read
// and an unregistered one (a residual block's input, read by its first
// convolution, then by the block's sum) only a few values are computed,
// and those need buffers of other sizes or take others (ResNet-18 to -101
// compute each convolution once).
type reclaimable struct {
	mu      sync.Mutex
	classes [48]reclaimRing
}

// reclaimRing is a size class of reclaimable: a ring of the newest
// entries; the oldest is dropped (left to the collector) when it is full.
type reclaimRing struct {
	ds         [reclaimRoom]weak.Pointer[deferred]
	head, size int
}

// reclaimRoom is how many values a size class of reclaimable lists.
const reclaimRoom = 64

// put lists d, whose values no reader holds; d.mu is held.
func (r *reclaimable) put(d *deferred) {
	c := sizeClass(cap(d.nhwc))
	if 1<<c != cap(d.nhwc) {
		return // not of a scratch buffer's capacity: left to the collector
	}
	wp := weak.Make(d)
	r.mu.Lock()
	ring := &r.classes[c]
	if ring.size == reclaimRoom {
		ring.head = (ring.head + 1) % reclaimRoom
		ring.size--
	}
	ring.ds[(ring.head+ring.size)%reclaimRoom] = wp
	ring.size++
	r.mu.Unlock()
}

// take returns the buffer of the newest listed value that still holds one
// of n values' size class and that no one reads or computes now, or nil.
// It takes no lock that it waits for: a value whose lock is held is
// skipped, so that a caller holding the locks of the values it computes
// cannot deadlock.
func (r *reclaimable) take(n int) []float32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ring := &r.classes[sizeClass(n)]
	for ring.size > 0 {
		i := (ring.head + ring.size - 1) % reclaimRoom
		d := ring.ds[i].Value()
		ring.ds[i] = weak.Pointer[deferred]{}
		ring.size--
		if d == nil || !d.mu.TryLock() {
			continue
		}
		b := d.nhwc
		if d.readers > 0 || b == nil || cap(b) != 1<<sizeClass(n) {
			d.mu.Unlock()
			continue
		}
		d.nhwc = nil
		d.mu.Unlock()
		return b[:n]
	}
	return nil
}

// nhwcBuffer returns a buffer of n values, arbitrary contents, for a
// deferred value's channels-last values: a reclaimed one, else one from the
// engine's pool, else a new one. Reclaimed first: a buffer taken from the
// pool stays with its value until the value is reclaimed or collected,
// while the pool's temporaries (window matrices, transforms) come back.
func nhwcBuffer(n int) []float32 {
	if b := reclaim.take(n); b != nil {
		return b
	}
	if b := freeScratch[float32](n); b != nil {
		return b
	}
	return scratch[float32](n)
}

// resolveLazy computes t's deferred values into its own storage, channels
// first, unless they are there. Every access to t's values calls it first
// (ready, hostValues).
func (t *Tensor) resolveLazy() {
	d := t.lazy
	if d.done.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done.Load() {
		return
	}
	d.ensure()
	v := make([]float32, d.outSize())
	plane := d.s.geo.OutH() * d.s.geo.OutW()
	parallelFor(d.s.batch, func(i int) { kernels.FromChannelsLast(v, d.nhwc, d.s.cout, plane, false, i, i+1) })
	*d.hdr = v
	d.done.Store(true)
	// The values are there for good: the recipe's operands may go.
	d.x, d.w, d.bias, d.bn, d.res = nil, nil, nil, nil, nil
	d.dropIdle()
}

// convPrep is a weight prepared for the CPU's float32 products (kept in
// the weight tensor's prep field), and what it was prepared from.
type convPrep struct {
	key prepKey
	pc  *packedConv
}

// prepKey identifies what a convPrep was prepared from: the weight's
// storage and the tensors folded in, each at its version, and the window.
type prepKey struct {
	w        unsafe.Pointer
	bias     *Tensor
	bn       bnFold
	versions [6]uint64 // weight, bias, batch norm's weight, bias, mean, variance
	geo      kernels.ConvGeom
}

// version returns t's version, 0 for a nil t.
func version(t *Tensor) uint64 {
	if t == nil {
		return 0
	}
	return t.version.Load()
}

// preparedConv returns the weight w (Cout, Cin, KH, KW) with bias (nil for
// none) and the batch norm bn (nil for none) folded in, packed for the
// CPU's float32 products of window geo: from w's prep field where it was
// prepared from the same tensors at their current versions, else prepared
// now and kept there.
func preparedConv(w, bias *Tensor, bn *bnFold, geo kernels.ConvGeom) *packedConv {
	geo.H, geo.W = 0, 0
	wv := values[float32](w)
	key := prepKey{w: unsafe.Pointer(unsafe.SliceData(wv)), bias: bias, geo: geo,
		versions: [6]uint64{version(w), version(bias)}}
	if bn != nil {
		key.bn = *bn
		key.versions[2], key.versions[3] = version(bn.weight), version(bn.bias)
		key.versions[4], key.versions[5] = version(bn.mean), version(bn.variance)
	}
	if p := w.prep.Load(); p != nil && p.key == key {
		return p.pc
	}
	cout, cin := w.Dim(0), w.Dim(1)
	var bv []float32
	if bias != nil {
		bv = slices.Clone(values[float32](bias))
	}
	if bn != nil {
		wv, bv = foldBN(wv, bv, bn, cout)
	}
	pc := packConv(wv, bv, cout, cin, geo)
	w.prep.Store(&convPrep{key: key, pc: pc})
	return pc
}

// foldBN returns the weight w (Cout rows) and bias (nil for none) of a
// convolution with the batch norm bn folded in, computed in float64:
// BN(W∗x + b) = s·(W∗x) + (β + (b − μ)·s), s = γ/sqrt(σ² + eps).
func foldBN(w, bias []float32, bn *bnFold, cout int) (fw, fb []float32) {
	vals := func(t *Tensor) []float32 {
		if t == nil {
			return nil
		}
		return values[float32](t)
	}
	gamma, beta, mean, variance := vals(bn.weight), vals(bn.bias), vals(bn.mean), vals(bn.variance)
	per := len(w) / max(cout, 1)
	fw, fb = make([]float32, len(w)), make([]float32, cout)
	for o := range cout {
		g := 1.0
		if gamma != nil {
			g = float64(gamma[o])
		}
		s := g / math.Sqrt(float64(variance[o])+bn.eps)
		for i, v := range w[o*per : (o+1)*per] {
			fw[o*per+i] = float32(float64(v) * s)
		}
		t := -float64(mean[o])
		if bias != nil {
			t += float64(bias[o])
		}
		t *= s
		if beta != nil {
			t += float64(beta[o])
		}
		fb[o] = float32(t)
	}
	return fw, fb
}
