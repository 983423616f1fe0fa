package serve

import (
	"bufio"
	"bytes"
	"context"
	"image"
	"image/color"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/vision"
)

// memBudget is the process's memory budget for requests: every request
// reserves the bytes it is about to hold (its upload as it arrives, a
// view's decoding buffers before decoding, its generation's work before
// it is queued) and gives them back when done. Reservations wait in order
// of arrival; none makes the total exceed the budget.
type memBudget struct {
	total int64
	sem   *semaphore.Weighted
	used  atomic.Int64
	peak  atomic.Int64
}

func newMemBudget(total int64) *memBudget {
	return &memBudget{total: total, sem: semaphore.NewWeighted(total)}
}

// reserve takes n bytes, waiting until they are free or ctx is done. It
// returns false, having taken nothing, when ctx ends first or n exceeds the
// whole budget.
func (b *memBudget) reserve(ctx context.Context, n int64) bool {
	if n <= 0 {
		return true
	}
	if n > b.total || b.sem.Acquire(ctx, n) != nil {
		return false
	}
	u := b.used.Add(n)
	for p := b.peak.Load(); u > p && !b.peak.CompareAndSwap(p, u); p = b.peak.Load() {
	}
	return true
}

// release gives back n bytes taken by reserve.
func (b *memBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.used.Add(-n)
	b.sem.Release(n)
}

// collectAbove is the size of a released reservation above which the
// bytes are collected before they are given back: a view's decoding
// buffer is garbage once the view is scaled down, and until a collection
// takes it the next request's buffer would sit beside it.
const collectAbove = 16 << 20

// releaseCollected gives back n bytes whose buffers were just dropped:
// large ones once a garbage collection has reclaimed them. It blocks for
// that collection; call it off the request's path.
func (b *memBudget) releaseCollected(n int64) {
	if n >= collectAbove {
		runtime.GC()
	}
	b.release(n)
}

// free returns the bytes not reserved now.
func (b *memBudget) free() int64 { return b.total - b.used.Load() }

// reservation is what one request holds of the budget; release gives all
// of it back and is idempotent.
type reservation struct {
	b  *memBudget
	mu sync.Mutex
	n  int64
}

func (r *reservation) take(ctx context.Context, n int64) bool {
	if !r.b.reserve(ctx, n) {
		return false
	}
	r.mu.Lock()
	r.n += n
	r.mu.Unlock()
	return true
}

func (r *reservation) give(n int64) {
	r.mu.Lock()
	n = min(n, r.n)
	r.n -= n
	r.mu.Unlock()
	r.b.release(n)
}

func (r *reservation) release() {
	r.mu.Lock()
	n := r.n
	r.n = 0
	r.mu.Unlock()
	r.b.release(n)
}

// Bytes a request holds besides its views, and the granularity of the
// reservations of an upload as it arrives.
const (
	requestOverhead = 256 << 10
	uploadChunk     = 256 << 10
)

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
func readHeader(b []byte) (vh viewHeader, ok bool, err error) {
	switch {
	case vision.IsDICOM(b[:min(len(b), 132)]):
		info, err := vision.ReadDICOMInfo(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return vh, true, err
		}
		return viewHeader{format: "dicom", w: info.Columns, h: info.Rows, cost: decodeCost("dicom", info.Columns, info.Rows, nil), dicom: info}, true, nil
	case bytes.HasPrefix(b, pngMagic), bytes.HasPrefix(b, jpegMagic):
		cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
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
