package data

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/radgen/radgen/vision"
)

// Batch is a collated batch, R2Gen's collate_fn: images stacked, targets and
// masks padded with 0 to the longest sequence of the batch.
type Batch struct {
	Examples []*Example // (B)
	Index    []int      // (B) positions in the dataset

	// Images is (B, Views, 3, Height, Width) float32, row-major; nil for a
	// text-only loader ([WithoutImages]) or [Collate].
	Images               []float32
	Views, Height, Width int

	Targets []int     // (B, SeqLen) ids, padded with 0
	Masks   []float32 // (B, SeqLen) 1 on the example's ids, 0 on padding
	Lengths []int     // (B) ids per example before padding
	SeqLen  int       // longest example of the batch
}

// Size returns the number of examples B.
func (b *Batch) Size() int { return len(b.Examples) }

// IDs returns the study ids of the batch.
func (b *Batch) IDs() []string {
	out := make([]string, len(b.Examples))
	for i, e := range b.Examples {
		out[i] = e.ID
	}
	return out
}

// Target returns row i of Targets (SeqLen ids).
func (b *Batch) Target(i int) []int { return b.Targets[i*b.SeqLen : (i+1)*b.SeqLen] }

// Collate pads the ids of exs into a text-only batch (no images), exactly as
// R2Gen's collate_fn pads targets and masks.
func Collate(exs []*Example) *Batch {
	b := &Batch{Examples: exs}
	collate(b)
	return b
}

func collate(b *Batch) {
	T := 0
	b.Lengths = make([]int, len(b.Examples))
	for i, e := range b.Examples {
		b.Lengths[i] = len(e.IDs)
		T = max(T, len(e.IDs))
	}
	b.SeqLen = T
	b.Targets = make([]int, len(b.Examples)*T)
	b.Masks = make([]float32, len(b.Examples)*T)
	for i, e := range b.Examples {
		copy(b.Targets[i*T:], e.IDs)
		for j := range e.IDs {
			b.Masks[i*T+j] = 1
		}
	}
}

// Loader reads a [Dataset] in batches: shuffled per epoch when asked,
// images decoded and transformed in parallel, the next batches prepared
// while the caller works on the current one. Everything random — the order
// and each image's crop and flip — derives from the seed, the epoch and the
// example, never from scheduling, so a run is reproducible. A Loader is safe
// for concurrent use; each Epoch call is independent.
type Loader struct {
	ds        *Dataset
	batchSize int
	shuffle   bool
	dropLast  bool
	seed      uint64
	transform vision.Transform
	images    bool
	workers   int
	prefetch  int
	decode    []vision.Option
	outH      int
	outW      int
}

// LoaderOption configures [NewLoader]; a bad value makes it return an error.
type LoaderOption func(*Loader) error

// WithBatchSize sets the number of studies per batch (default 16, R2Gen's).
func WithBatchSize(n int) LoaderOption {
	return func(l *Loader) error {
		if n < 1 {
			return fmt.Errorf("data: batch size %d", n)
		}
		l.batchSize = n
		return nil
	}
}

// WithShuffle turns per-epoch shuffling on or off. The default is on for
// the train split and off otherwise, as in R2Gen.
func WithShuffle(on bool) LoaderOption {
	return func(l *Loader) error { l.shuffle = on; return nil }
}

// WithDropLast drops a last batch smaller than the batch size (default keep,
// as R2Gen).
func WithDropLast(on bool) LoaderOption {
	return func(l *Loader) error { l.dropLast = on; return nil }
}

// WithSeed sets the seed of the shuffle and the random transforms
// (default 0).
func WithSeed(seed uint64) LoaderOption {
	return func(l *Loader) error { l.seed = seed; return nil }
}

// WithTransform sets the image pipeline. Its output size must not depend on
// the image (a fixed Width×Height or a Crop), so that views stack. The
// default is R2Gen's: vision.TrainTransform(256, 224) for the train split,
// vision.TestTransform(224) otherwise.
func WithTransform(t vision.Transform) LoaderOption {
	return func(l *Loader) error { l.transform = t; return nil }
}

// WithoutImages makes batches text only (Images nil): for models fed
// precomputed features, or to iterate over reports.
func WithoutImages() LoaderOption {
	return func(l *Loader) error { l.images = false; return nil }
}

// WithWorkers bounds the images decoded at once (default GOMAXPROCS).
func WithWorkers(n int) LoaderOption {
	return func(l *Loader) error {
		if n < 1 {
			return fmt.Errorf("data: %d workers", n)
		}
		l.workers = n
		return nil
	}
}

// WithPrefetch sets how many batches are prepared ahead of the one the
// caller holds (default 1; 0 loads each batch when asked). Memory is bounded
// by 1 + n batches plus one decoded image per worker.
func WithPrefetch(n int) LoaderOption {
	return func(l *Loader) error {
		if n < 0 {
			return fmt.Errorf("data: prefetch %d", n)
		}
		l.prefetch = n
		return nil
	}
}

// WithDecodeOptions passes options (such as vision.WithMaxPixels) to the
// image decoder.
func WithDecodeOptions(opts ...vision.Option) LoaderOption {
	return func(l *Loader) error { l.decode = append(l.decode, opts...); return nil }
}

// NewLoader returns a loader over ds.
func NewLoader(ds *Dataset, opts ...LoaderOption) (*Loader, error) {
	l := &Loader{
		ds: ds, batchSize: 16, shuffle: ds.Split == "train", images: true,
		workers: runtime.GOMAXPROCS(0), prefetch: 1,
		transform: vision.TestTransform(224),
	}
	if ds.Split == "train" {
		l.transform = vision.TrainTransform(256, 224)
	}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	if l.images {
		for i := range ds.Examples {
			if e := &ds.Examples[i]; len(e.Images) < ds.Views {
				return nil, fmt.Errorf("%w %q: %d images, the dataset has %d views", ErrBadStudy, e.ID, len(e.Images), ds.Views)
			}
		}
		t := l.transform
		switch {
		case t.Crop > 0:
			l.outH, l.outW = t.Crop, t.Crop
		case t.Shorter == 0 && t.Width > 0 && t.Height > 0:
			l.outH, l.outW = t.Height, t.Width
		default:
			return nil, fmt.Errorf("data: transform %v: the output size depends on the image; batching needs a Crop or a fixed Width×Height", t)
		}
		if err := t.Validate(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Len returns the number of batches per epoch.
func (l *Loader) Len() int {
	n := len(l.ds.Examples)
	if l.dropLast {
		return n / l.batchSize
	}
	return (n + l.batchSize - 1) / l.batchSize
}

// Order returns the example order of an epoch: a seeded permutation when
// shuffling, 0…n−1 otherwise.
func (l *Loader) Order(epoch int) []int {
	n := len(l.ds.Examples)
	if !l.shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return stream(l.seed, uint64(epoch), 0, 0).Perm(n)
}

// stream returns a PCG generator for one (seed, epoch, kind, item) tuple;
// the words are mixed with SplitMix64 so neighbouring tuples are unrelated.
func stream(seed, epoch, kind, item uint64) *rand.Rand {
	h := splitmix(seed ^ splitmix(epoch^splitmix(kind^splitmix(item))))
	return rand.New(rand.NewPCG(h, splitmix(h)))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Epoch iterates over the batches of one epoch. It stops at the first
// error, which it yields with a nil batch; errors name the study and the
// image. Breaking out of the loop or cancelling ctx stops the background
// work before Epoch returns.
//
//	for b, err := range loader.Epoch(ctx, epoch) {
//		if err != nil { return err }
//		… b.Images (B, V, 3, H, W), b.Targets (B, T) …
//	}
func (l *Loader) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		order := l.Order(epoch)
		nb := l.Len()
		batch := func(ctx context.Context, k int) (*Batch, error) {
			lo, hi := k*l.batchSize, min((k+1)*l.batchSize, len(order))
			return l.load(ctx, epoch, order[lo:hi])
		}
		if l.prefetch == 0 {
			for k := range nb {
				b, err := batch(ctx, k)
				if !yield(b, err) || err != nil {
					return
				}
			}
			return
		}
		type result struct {
			b   *Batch
			err error
		}
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan result, l.prefetch-1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ch)
			for k := range nb {
				b, err := batch(ctx, k)
				select {
				case ch <- result{b, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		defer func() { cancel(); wg.Wait() }()
		for r := range ch {
			if !yield(r.b, r.err) || r.err != nil {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// load builds the batch of the examples at idx.
func (l *Loader) load(ctx context.Context, epoch int, idx []int) (*Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &Batch{Index: append([]int(nil), idx...), Examples: make([]*Example, len(idx))}
	for i, j := range idx {
		b.Examples[i] = &l.ds.Examples[j]
	}
	collate(b)
	if !l.images {
		return b, nil
	}
	V := l.ds.Views
	b.Views, b.Height, b.Width = V, l.outH, l.outW
	n := 3 * l.outH * l.outW
	b.Images = make([]float32, len(idx)*V*n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(l.workers)
	for i, j := range idx {
		for v := range V {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				off := (i*V + v) * n
				return l.image(b.Images[off:off+n:off+n], epoch, j, v)
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return b, nil
}

// ErrImage wraps failures to read or transform a study's image.
var ErrImage = errors.New("data: image")

// image decodes and transforms view v of example j into dst (3·H·W floats).
func (l *Loader) image(dst []float32, epoch, j, v int) error {
	e := &l.ds.Examples[j]
	path := l.ds.ImagePath(j, v)
	px, err := vision.DecodeFile(path, l.decode...)
	if err != nil {
		return fmt.Errorf("%w of study %q (view %d): %w", ErrImage, e.ID, v, err)
	}
	var rng *rand.Rand
	if l.transform.Random() {
		rng = stream(l.seed, uint64(epoch), 1, uint64(j)*uint64(l.ds.Views)+uint64(v))
	}
	out := vision.Image{Pix: dst}
	got, err := l.transform.Apply(&out, px, rng)
	if err != nil {
		return fmt.Errorf("%w of study %q (view %d, %s): %w", ErrImage, e.ID, v, path, err)
	}
	if got.H != l.outH || got.W != l.outW || &got.Pix[0] != &dst[0] {
		return fmt.Errorf("%w of study %q (view %d): transformed to %d×%d, want %d×%d", ErrImage, e.ID, v, got.W, got.H, l.outW, l.outH)
	}
	return nil
}
