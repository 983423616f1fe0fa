package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/vision"
)

// Defaults of the options.
const (
	DefaultMaxUploadBytes = 64 << 20                // bytes of one request body
	DefaultMaxPixels      = vision.DefaultMaxPixels // pixels of one view (width × height)
	DefaultTimeout        = 60 * time.Second        // a request, from admission to its report
	DefaultQueue          = 64                      // requests admitted at once
	DefaultMaxBatch       = 16                      // studies in one Generate call
	DefaultBatchWait      = 5 * time.Millisecond
	DefaultMaxBeamSize    = 8
	DefaultUploadTimeout  = 30 * time.Second // an upload's body, from the request's arrival
	DefaultMaxInstances   = 16               // DICOM instances of one STOW-RS request
)

// defaultIdleTrim is how long the handler waits, idle after serving, before
// it returns freed memory to the operating system.
const defaultIdleTrim = 10 * time.Second

// Option configures a Handler. An option given an invalid value makes New
// return an error wrapping ErrOption.
type Option func(*options) error

// ErrOption is wrapped by New's errors about its options.
var ErrOption = errors.New("serve: invalid option")

type options struct {
	maxUpload   int64
	maxPixels   int64
	maxViews    int
	timeout     time.Duration
	queue       int
	concurrency int
	batch       bool
	maxBatch    int
	batchWait   time.Duration
	maxBeam     int
	tokens      []string
	logger      *slog.Logger
	name        string

	memory        int64 // 0: derived from the machine and the model
	uploadTimeout time.Duration
	idleTrim      time.Duration
	location      *time.Location

	maxInstances int
	pacs         *dicomweb.Client
}

func defaultOptions() options {
	return options{
		maxUpload:   DefaultMaxUploadBytes,
		maxPixels:   DefaultMaxPixels,
		timeout:     DefaultTimeout,
		queue:       DefaultQueue,
		concurrency: 1,
		batch:       true,
		maxBatch:    DefaultMaxBatch,
		batchWait:   DefaultBatchWait,
		maxBeam:     DefaultMaxBeamSize,
		logger:      slog.New(slog.DiscardHandler),
		name:        "radgen",

		uploadTimeout: DefaultUploadTimeout,
		idleTrim:      defaultIdleTrim,
		maxInstances:  DefaultMaxInstances,
	}
}

// WithMaxUploadBytes bounds the body of a report request (default
// DefaultMaxUploadBytes); a larger upload is refused with 413
// upload_too_large as soon as the limit is crossed, without reading the rest.
func WithMaxUploadBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: upload limit %d", ErrOption, n)
		}
		o.maxUpload = n
		return nil
	}
}

// WithMaxPixels bounds the width × height of every uploaded view (default
// DefaultMaxPixels). The limit is checked against the image's header before
// its pixels are decoded; a larger view is refused with 413 too_many_pixels.
func WithMaxPixels(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: pixel limit %d", ErrOption, n)
		}
		o.maxPixels = n
		return nil
	}
}

// WithMaxViews bounds the files of one upload (default: the views the model
// takes). Reading stops at the first file beyond it (413 too_many_views).
func WithMaxViews(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: view limit %d", ErrOption, n)
		}
		o.maxViews = n
		return nil
	}
}

// WithTimeout bounds a report request from its arrival to its answer:
// upload, decoding, waiting in the queue and generation (default
// DefaultTimeout). The request's context, with this deadline, reaches the
// decoding of the views and Model.Generate; a request past it gets 504
// timeout at once (a view's decoding under way then finishes apart, its
// memory still reserved).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout %v", ErrOption, d)
		}
		o.timeout = d
		return nil
	}
}

// WithQueue bounds the report requests admitted at once, waiting for or
// going through a generation (default DefaultQueue). A request is admitted
// only once its upload has arrived, been validated and decoded: uploads
// take no place in the queue, so slow or stalled clients cannot fill it. A
// request beyond it is answered at once with 429 overloaded and a
// Retry-After header; none waits unboundedly.
func WithQueue(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: queue limit %d", ErrOption, n)
		}
		o.queue = n
		return nil
	}
}

// WithConcurrency sets how many Model.Generate calls run at once (default 1:
// a generation already spreads its matrix products over the cores, and
// batching serves concurrent requests together).
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: concurrency %d", ErrOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithBatching sets how concurrent requests are combined: up to maxBatch
// studies with the same generation options go to one Model.Generate call.
// A generation starts with the requests already waiting; while others are
// still being uploaded and decoded, it waits for them at most wait. The
// defaults are DefaultMaxBatch and DefaultBatchWait. maxBatch 1 turns
// batching off (see WithoutBatching).
func WithBatching(maxBatch int, wait time.Duration) Option {
	return func(o *options) error {
		if maxBatch <= 0 || wait < 0 {
			return fmt.Errorf("%w: batching %d within %v", ErrOption, maxBatch, wait)
		}
		o.batch, o.maxBatch, o.batchWait = maxBatch > 1, maxBatch, wait
		return nil
	}
}

// WithoutBatching makes every request its own Model.Generate call, with the
// request's context.
func WithoutBatching() Option {
	return func(o *options) error { o.batch, o.maxBatch = false, 1; return nil }
}

// WithMaxBeamSize bounds the beam_size a request may ask for (default
// DefaultMaxBeamSize).
func WithMaxBeamSize(k int) Option {
	return func(o *options) error {
		if k <= 0 {
			return fmt.Errorf("%w: beam limit %d", ErrOption, k)
		}
		o.maxBeam = k
		return nil
	}
}

// WithBearerToken requires "Authorization: Bearer <token>" on the API
// (/v1/…, /dicomweb/…) and /metrics; any of the given tokens is accepted. The page,
// /healthz and /readyz stay open. By default no authentication is required.
func WithBearerToken(tokens ...string) Option {
	return func(o *options) error {
		if len(tokens) == 0 {
			return fmt.Errorf("%w: no bearer token", ErrOption)
		}
		for _, t := range tokens {
			if t == "" {
				return fmt.Errorf("%w: empty bearer token", ErrOption)
			}
		}
		o.tokens = append([]string(nil), tokens...)
		return nil
	}
}

// WithLogger sends the handler's logs (one line per report request, errors,
// warm-up) to l. By default they are discarded.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrOption)
		}
		o.logger = l
		return nil
	}
}

// WithModelName sets the name the handler reports for its model (default
// "radgen"), for example the checkpoint's file name.
func WithModelName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: empty model name", ErrOption)
		}
		o.name = name
		return nil
	}
}

// WithMemoryBudget bounds the bytes that report requests hold at once
// (default: half of the machine's memory, or of the process's cgroup limit,
// less the model's weights). Each request reserves what it is about to
// hold before it allocates it: its upload in one step before the body is
// read (the declared Content-Length, or without one the upload limit, at
// most a quarter of the budget), each view's decoding buffers (known from
// the image's header: the pixel count times the bytes a pixel takes while
// it decodes) and its generation's work. An upload that does not fit gets
// 429 overloaded with a Retry-After header at once, and one declared
// larger than the budget 413 upload_too_large. A later reservation that
// does not fit waits, oldest request first and at most half the time the
// request has left, then gets 429; a waiting request that could only be
// served once other waiting requests had given way gives way itself
// (429), youngest first, and a view that could never fit gets 413
// too_many_pixels. Nothing is allocated past the budget on a request's
// behalf.
func WithMemoryBudget(bytes int64) Option {
	return func(o *options) error {
		if bytes < 16<<20 {
			return fmt.Errorf("%w: memory budget %d bytes (at least 16 MiB)", ErrOption, bytes)
		}
		o.memory = bytes
		return nil
	}
}

// WithUploadTimeout bounds the time a report request's body may take to
// arrive, from the request's arrival (default DefaultUploadTimeout, and
// never more than WithTimeout). An upload still incomplete then gets 408
// upload_timeout and its connection closes: a stalled client costs one
// connection for this long, and no place in the queue.
func WithUploadTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: upload timeout %v", ErrOption, d)
		}
		o.uploadTimeout = d
		return nil
	}
}

// WithStudyTimeZone sets the zone in which the FHIR report reads a DICOM
// study's date and time when its header gives no TimezoneOffsetFromUTC
// (DICOM times carry no zone). By default such a study's
// effectiveDateTime is its date alone.
func WithStudyTimeZone(loc *time.Location) Option {
	return func(o *options) error {
		if loc == nil {
			return fmt.Errorf("%w: nil time zone", ErrOption)
		}
		o.location = loc
		return nil
	}
}

// WithMaxInstances bounds the DICOM instances (parts) of one STOW-RS
// request (default DefaultMaxInstances): a study's views and whatever
// else the sender includes (other films, presentation states). Reading
// stops at the first part beyond it (413 too_many_views).
func WithMaxInstances(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: instance limit %d", ErrOption, n)
		}
		o.maxInstances = n
		return nil
	}
}

// WithPACS stores the DICOM SR of every study pushed by STOW-RS into that
// study in the PACS c serves, by STOW-RS, before the request is answered;
// the answer's Retrieve URL then names the study there. The SR's series
// and instance UIDs derive from the study and the model
// (dicomsr.StudyUIDs), so a push retried stores one SR, not two. A PACS
// that does not take the SR makes the request fail with 502 pacs_error
// (the client's own retries come first); a PACS takes it when its Store
// Instances Response lists the SR in the Referenced SOP Sequence and not
// in the Failed SOP Sequence, whatever its status. By default nothing is
// stored.
func WithPACS(c *dicomweb.Client) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil PACS client", ErrOption)
		}
		o.pacs = c
		return nil
	}
}
