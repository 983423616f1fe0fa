package serve

import (
	"bufio"
	"context"
	"image"
	"image/color"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/vision"
)

// memBudget is the process's memory budget for requests: every request
// reserves the bytes it is about to hold and gives them back when done.
// Nothing is reserved past the budget.
//
// A request holds bytes while it waits for more (its upload while its
// views wait for their decoding buffers, its views while its generation
// waits for its work), so the waits are ordered to keep requests from
// holding the budget among themselves: they are served oldest request
// first, each once all older ones are; and when the oldest's need would
// not fit even once every request not waiting had given back all it
// holds, the requests that wait could never be served, and the youngest
// of them gives way (its wait fails, and its request gives back what it
// holds) until it would.
type memBudget struct {
	total int64
	used  atomic.Int64 // changed under mu; read without it by the metrics
	peak  atomic.Int64

	mu      sync.Mutex
	seq     uint64       // the number of the last reservation made
	waiters []*memWaiter // by request, oldest first
}

// memWaiter is one wait for memory.
type memWaiter struct {
	res   *reservation // the request's reservation
	n     int64        // bytes wanted
	apart bool         // the bytes are held apart from res (takeApart)
	done  chan bool    // receives true when granted, false when it must give way
}

func newMemBudget(total int64) *memBudget {
	return &memBudget{total: total}
}

// newReservation starts a request's reservation, holding nothing; the
// requests' order is the order of these calls.
func (b *memBudget) newReservation() *reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return &reservation{b: b, seq: b.seq}
}

// free returns the bytes not reserved now.
func (b *memBudget) free() int64 { return b.total - b.used.Load() }

// add counts n more bytes reserved; b.mu is held.
func (b *memBudget) add(n int64) {
	u := b.used.Add(n)
	if u > b.peak.Load() {
		b.peak.Store(u)
	}
}

// settle serves the waits that fit, oldest first, and makes requests give
// way, youngest first, while the oldest wait could not be served even
// once every request that does not wait had given back all it holds.
// b.mu is held.
func (b *memBudget) settle() {
	for {
		for len(b.waiters) > 0 && b.waiters[0].n <= b.free() {
			w := b.waiters[0]
			b.waiters = b.waiters[1:]
			b.add(w.n)
			if !w.apart {
				w.res.n += w.n
			}
			w.done <- true
		}
		if len(b.waiters) == 0 {
			return
		}
		var kept int64 // held by the requests that wait
		victim := -1
		for i, w := range b.waiters {
			if w.res.n > 0 {
				kept += w.res.n
				victim = i
			}
		}
		if victim < 0 || b.waiters[0].n <= b.total-kept {
			return // what the others hold will come back
		}
		w := b.waiters[victim]
		b.waiters = slices.Delete(b.waiters, victim, victim+1)
		w.done <- false
	}
}

// wait takes n bytes for r (or apart from it), waiting in r's turn until
// they are served, ctx ends, or r must give way.
func (b *memBudget) wait(ctx context.Context, r *reservation, n int64, apart bool) bool {
	if n > b.total {
		return false
	}
	w := &memWaiter{res: r, n: n, apart: apart, done: make(chan bool, 1)}
	b.mu.Lock()
	i := len(b.waiters)
	for i > 0 && b.waiters[i-1].res.seq > r.seq {
		i--
	}
	b.waiters = slices.Insert(b.waiters, i, w)
	b.settle()
	b.mu.Unlock()
	select {
	case ok := <-w.done:
		return ok
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
		b.settle()
		return false
	}
	return <-w.done // served, or made to give way, meanwhile
}

// releaseApart gives back n bytes held apart (takeApart).
func (b *memBudget) releaseApart(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.add(-n)
	b.settle()
}

// collectAbove is the size of a released reservation above which the
// bytes are collected before they are given back: a view's decoding
// buffer is garbage once the view is scaled down, and until a collection
// takes it the next request's buffer would sit beside it.
const collectAbove = 16 << 20

// releaseCollected gives back n bytes of a hold apart whose buffers were
// just dropped: large ones once a garbage collection has reclaimed them.
// It blocks for that collection; call it off the request's path.
func (b *memBudget) releaseCollected(n int64) {
	if n >= collectAbove {
		runtime.GC()
	}
	b.releaseApart(n)
}

// reservation is what one request holds of the budget. Its methods are
// called by the request's goroutine, one at a time.
type reservation struct {
	b   *memBudget
	seq uint64
	n   int64 // bytes held; changed under b.mu
}

// try takes n bytes at once if they are free, without waiting.
func (r *reservation) try(n int64) bool {
	if n <= 0 {
		return true
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.free() {
		return false
	}
	b.add(n)
	r.n += n
	return true
}

// take takes n bytes, waiting in the request's turn. It returns false,
// having taken nothing, when ctx ends first, when n exceeds the whole
// budget, or when the request must give way (see memBudget).
func (r *reservation) take(ctx context.Context, n int64) bool {
	if n <= 0 {
		return true
	}
	return r.b.wait(ctx, r, n, false)
}

// takeApart is take for bytes held apart from the reservation, by work
// that may outlive the request (a view's decoding): memBudget.releaseApart
// gives them back.
func (r *reservation) takeApart(ctx context.Context, n int64) bool {
	if n <= 0 {
		return true
	}
	return r.b.wait(ctx, r, n, true)
}

// give gives back n of the bytes held (at most all of them).
func (r *reservation) give(n int64) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, r.n)
	if n <= 0 {
		return
	}
	r.n -= n
	b.add(-n)
	b.settle()
}

// release gives back all the bytes held; it is idempotent.
func (r *reservation) release() { r.give(math.MaxInt64) }

// credit is the part of a request's reservation that its upload may still
// allocate: the upload's bytes are reserved at once when it begins, and
// its files' chunks are drawn from them as they arrive.
type credit struct {
	res  *reservation
	left int64
}

// alloc draws n bytes from the credit, or, past it, from the budget as the
// request's further reservation; false when they cannot be had.
func (c *credit) alloc(ctx context.Context, n int64) bool {
	if c == nil {
		return true
	}
	if n <= c.left {
		c.left -= n
		return true
	}
	if !c.res.take(ctx, n-c.left) {
		return false
	}
	c.left = 0
	return true
}

// unalloc returns n bytes drawn by alloc to the credit.
func (c *credit) unalloc(n int64) {
	if c != nil {
		c.left += n
	}
}

// giveBack gives n bytes drawn by alloc back to the budget.
func (c *credit) giveBack(n int64) {
	if c != nil {
		c.res.give(n)
	}
}

// close gives back what the upload did not use.
func (c *credit) close() {
	if c != nil {
		c.res.give(c.left)
		c.left = 0
	}
}

// Bytes a request holds besides its files, and the size of the chunks in
// which the files are kept as they arrive.
const (
	requestOverhead = 256 << 10
	uploadChunk     = 64 << 10
)

// uploadCredit is what an upload reserves at once when it begins, besides
// requestOverhead: its body's declared length, or when none is declared
// the largest body allowed, at most a quarter of the budget (an undeclared
// body past that reserves the rest as it arrives, in its request's turn);
// and two chunks more (the one being filled, and the copy that trims a
// file's last chunk to its length).
func uploadCredit(declared, maxUpload, budget int64) int64 {
	if declared < 0 {
		declared = min(maxUpload, budget/4)
	}
	return min(declared, maxUpload) + 2*uploadChunk
}

// decodeCost is an upper estimate of the bytes that decoding a view of
// w×h pixels in the given format allocates at once: the decoder's buffer in
// the image's own bit depth (Go's decoders keep 8-bit RGB as RGBA), and
// the 8-bit result where it is not converted in place (vision.Decode's
// doc), plus the decoders' fixed buffers.
func decodeCost(format string, w, h int, model color.Model) int64 {
	px := int64(w) * int64(h)
	var per float64
	switch format {
	case "png":
		switch model {
		case color.GrayModel:
			per = 1
		case color.Gray16Model:
			per = 2
		case color.NRGBA64Model:
			per = 8 // converted in place
		case color.RGBA64Model:
			per = 8 + 3 // opaque 16-bit RGB: converted into a new 8-bit buffer
		default: // 8-bit colour, gray with alpha, or a palette and its RGB conversion
			per = 4
		}
	case "jpeg":
		switch model {
		case color.GrayModel:
			per = 1
		default:
			per = 7 // YCbCr or CMYK planes and the RGB result
		}
	default: // dicom: the stored values (16 or 32 bits a sample, up to 3 samples), a codec's planes and the 8-bit result
		per = 16
	}
	return int64(per*float64(px)) + 1<<20
}

// viewHeader is what a view's header says before any pixel is decoded.
type viewHeader struct {
	format string // "png", "jpeg" or "dicom"
	w, h   int
	cost   int64             // decodeCost
	dicom  *vision.DICOMInfo // for a DICOM view
}

// readHeader reads a view's dimensions from its header: PNG and JPEG with
// image.DecodeConfig, DICOM with vision.ReadDICOMInfo. It reports ok false
// for a file of another kind, and err for one whose header is malformed.
func readHeader(b *blob) (vh viewHeader, ok bool, err error) {
	switch vision.Sniff(b.head(132)) {
	case "dicom":
		info, err := vision.ReadDICOMInfo(b.reader(), b.len())
		if err != nil {
			return vh, true, err
		}
		return viewHeader{format: "dicom", w: info.Columns, h: info.Rows, cost: decodeCost("dicom", info.Columns, info.Rows, nil), dicom: info}, true, nil
	case "png", "jpeg":
		cfg, format, err := image.DecodeConfig(b.reader())
		if err != nil {
			return vh, true, err
		}
		return viewHeader{format: format, w: cfg.Width, h: cfg.Height, cost: decodeCost(format, cfg.Width, cfg.Height, cfg.ColorModel)}, true, nil
	}
	return vh, false, nil
}

// generationCost is an upper estimate of the bytes one study holds while
// it waits for and goes through Model.Generate: its views at the model's
// size (8-bit and as float32 tensors), the extractor's feature maps (a
// ResNet's first stages hold about 16·S² values a view, and a few of them
// live at once), the display copies the request may ask for, and the
// encoder–decoder's work, bounded by the activations the architecture says
// a study needs in a training step (arch.Config.Cost), which hold every
// layer's values for the whole report where decoding keeps a step's.
func generationCost(cfg memtrans.ModelConfig) int64 {
	s := int64(cfg.ImageSize) * int64(cfg.ImageSize)
	v := int64(max(cfg.Views, 1))
	views := v * s * (3 + 3*4) // 8-bit RGB and the normalised float32 tensor
	features := v * 4 * 4 * 16 * s
	display := v * (maxDisplaySide * maxDisplaySide * 3 * 2) // the scaled view and its PNG
	var decoding int64 = 64 << 20
	if cfg.EncoderDecoder != nil {
		if a := cfg.EncoderDecoder.Cost(cfg.PatchesPerStudy()).Activations; a > 0 && a < 1<<34 {
			decoding = int64(a) * 4
		}
	}
	return views + features + display + decoding + requestOverhead
}

// systemMemory returns the memory this process may use: the machine's
// (MemTotal) or its cgroup's limit (memory.max), whichever is smaller; 0
// when neither can be read.
func systemMemory() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				fs := strings.Fields(rest)
				if len(fs) > 0 {
					if kb, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
						total = kb << 10
					}
				}
				break
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
				total = n
			}
		}
	}
	return total
}

// defaultMemoryBudget is half of the memory the process may use, less the
// model's weights, and at least room for four requests of the largest
// view the pixel limit lets through; 2 GiB when the machine's memory cannot
// be read.
func defaultMemoryBudget(modelBytes, perRequest int64) int64 {
	sys := systemMemory()
	if sys <= 0 {
		return 2 << 30
	}
	return max(sys/2-modelBytes, 4*perRequest)
}

// trimmer returns freed memory to the operating system once the handler
// has been idle for a while after serving: the heap a burst of large
// uploads grew is otherwise kept by the runtime long after it is free.
type trimmer struct {
	idle   time.Duration
	active atomic.Int64 // report requests in progress
	dirty  atomic.Bool  // requests were served since the last trim
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

func (t *trimmer) enter() {
	t.active.Add(1)
	t.dirty.Store(true)
}

func (t *trimmer) leave() {
	if t.active.Add(-1) != 0 || t.idle <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(t.idle, t.trim)
	} else {
		t.timer.Reset(t.idle)
	}
}

func (t *trimmer) trim() {
	if t.active.Load() == 0 && t.dirty.Swap(false) {
		debug.FreeOSMemory()
	}
}

func (t *trimmer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}
