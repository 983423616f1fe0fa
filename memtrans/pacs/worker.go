package pacs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/vision"
)

// ErrConfig is wrapped by New's errors about the configuration.
var ErrConfig = errors.New("pacs: bad configuration")

// Config configures a Worker. PACS, Model and ModelInfo.Name are
// required; the other fields have defaults.
type Config struct {
	// PACS is the DICOMweb client of the archive to watch. Its own retries
	// ride out short failures; the worker rides out longer ones (Backoff).
	PACS *dicomweb.Client
	// Model writes the reports; its Config().Views (1 or 2) decides the
	// views read from each study.
	Model *memtrans.Model
	// ModelInfo names the model in the SR (and the HL7 message); its
	// checksum also keys the SR's derived UIDs (dicomsr.StudyUIDs).
	ModelInfo dicomsr.Model

	// Modalities of the studies to report on (default CR and DX); only
	// series of these modalities are retrieved.
	Modalities []string
	// Since, when set, limits the search to studies dated from then on
	// (StudyDate; a study without a date is then not found).
	Since time.Time
	// Interval between searches when there is nothing to do (default 30 s).
	Interval time.Duration
	// Immediate reports on a study as soon as it is found; by default a
	// study waits until its instance count is the same at two searches in
	// a row, so that views still arriving are not missed.
	Immediate bool
	// PageSize is the number of studies asked per search (default 500).
	PageSize int
	// Backoff paces the searches while the PACS (or the HL7 receiver) is
	// unreachable; its Attempts is ignored: the worker never gives up
	// (default 1 s doubling to 60 s).
	Backoff dicomweb.Retry

	// DeadLetterFile, when set, is a JSON Lines file to which failing
	// studies are appended ({"study", "error", "time"}); the studies it
	// lists are skipped, across restarts, until their line is removed.
	DeadLetterFile string
	// Generate are the options of every Model.Generate call (beam size …).
	Generate []memtrans.GenerateOption
	// Decode are the image decoding limits (vision.WithMaxPixels …);
	// default vision's.
	Decode []vision.Option
	// MaxStudyBytes and MaxInstances bound what is retrieved of one study
	// (default 1 GiB and 64 instances); a study over them is dead-lettered.
	MaxStudyBytes int64
	MaxInstances  int
	// TempDir holds each study's files while it is reported (default
	// os.TempDir()); they are removed after.
	TempDir string

	// MLLP, when set, receives each report as an HL7 v2 ORU^R01 before the
	// SR is stored; HL7 are the message's options (receiving application
	// …).
	MLLP *hl7.Sender
	HL7  []hl7.Option

	// Drain is how long the study in hand may go on once the context of
	// Run is done (default 30 s; negative: abandon it at once). A study
	// cut short stores nothing and is reported at the next run.
	Drain time.Duration

	// Logger receives progress (default: none).
	Logger *slog.Logger
	// Now is the clock of the documents' times (default time.Now).
	Now func() time.Time
}

// DeadLetter is a study the worker gave up on.
type DeadLetter struct {
	Study string    `json:"study"`
	Error string    `json:"error"`
	Time  time.Time `json:"time"`
}

// Stats counts what a Worker did since it was made.
type Stats struct {
	Polls           int // searches of the PACS that completed
	Reported        int // studies whose SR the worker stored
	AlreadyReported int // studies found holding the SR (stored before a restart, or by another worker)
	DeadLetters     int // studies given up on (including those read from DeadLetterFile)
	Outages         int // searches or studies interrupted by an unreachable PACS or receiver
	Waiting         int // studies found at the last search and waiting to settle
	StudySeconds    float64
}

// Worker watches a PACS and reports on its new studies. Run and RunOnce
// must not be called concurrently; Stats, DeadLetters and WriteMetrics may
// be called at any time.
type Worker struct {
	cfg   Config
	views int
	log   *slog.Logger

	mu    sync.Mutex
	done  map[string]bool
	dead  map[string]DeadLetter
	seen  map[string]int // instance count at the last search, for settling
	stats Stats
}

// New checks cfg and returns a worker; it reads DeadLetterFile when it
// exists.
func New(cfg Config) (*Worker, error) {
	if cfg.PACS == nil || cfg.Model == nil {
		return nil, fmt.Errorf("%w: PACS and Model are required", ErrConfig)
	}
	if strings.TrimSpace(cfg.ModelInfo.Name) == "" {
		return nil, fmt.Errorf("%w: ModelInfo.Name is required", ErrConfig)
	}
	if len(cfg.Modalities) == 0 {
		cfg.Modalities = []string{"CR", "DX"}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff = dicomweb.Retry{Attempts: 1, Base: time.Second, Max: time.Minute}
	}
	cfg.Backoff.Max = max(cfg.Backoff.Max, cfg.Backoff.Base)
	if cfg.MaxStudyBytes <= 0 {
		cfg.MaxStudyBytes = 1 << 30
	}
	if cfg.MaxInstances <= 0 {
		cfg.MaxInstances = 64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Drain == 0 {
		cfg.Drain = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, views: cfg.Model.Config().Views, log: log, done: map[string]bool{}, dead: map[string]DeadLetter{}, seen: map[string]int{}}
	if err := w.readDeadLetters(); err != nil {
		return nil, err
	}
	return w, nil
}

// maxDeadLetterFile bounds the dead-letter file read at start.
const maxDeadLetterFile = 64 << 20

func (w *Worker) readDeadLetters() error {
	if w.cfg.DeadLetterFile == "" {
		return nil
	}
	f, err := os.Open(w.cfg.DeadLetterFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pacs: dead letters: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxDeadLetterFile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var d DeadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil || d.Study == "" {
			return fmt.Errorf("%w: %s line %d is not a dead letter", ErrConfig, w.cfg.DeadLetterFile, n)
		}
		w.dead[d.Study] = d
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pacs: dead letters: %s: %w", w.cfg.DeadLetterFile, err)
	}
	w.stats.DeadLetters = len(w.dead)
	return nil
}

// Run watches the PACS until ctx is done, and returns ctx's error then;
// it returns another error only when the worker cannot go on (the PACS
// refuses its searches, the dead-letter file or the temporary folder
// cannot be written). When ctx is done the worker stops between studies:
// the study in hand is finished if it can be within Config.Drain, and
// otherwise abandoned with nothing of it stored (the next run reports on
// it).
func (w *Worker) Run(ctx context.Context) error { return w.run(ctx, false) }

// RunOnce reports on every study the PACS holds now and returns nil once
// a search finds nothing left to do (every study reported, found
// reported, or dead-lettered). Like Run, it rides out an unreachable PACS.
func (w *Worker) RunOnce(ctx context.Context) error { return w.run(ctx, true) }

func (w *Worker) run(ctx context.Context, once bool) error {
	failures := 0
	for {
		waiting, err := w.poll(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := w.cfg.Interval
		switch {
		case err != nil && !transient(err):
			return err
		case err != nil:
			failures++
			w.count(func(s *Stats) { s.Outages++ })
			wait = w.cfg.Backoff.Delay(failures)
			w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: unreachable, waiting", slog.Duration("wait", wait), slog.Int("failures", failures), slog.String("error", err.Error()))
		default:
			failures = 0
			if once && waiting == 0 {
				return nil
			}
			if once {
				wait = min(wait, time.Second) // a study settling needs one more search, not a full interval
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Stats returns the worker's counts.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// DeadLetters returns the studies given up on, by StudyInstanceUID.
func (w *Worker) DeadLetters() []DeadLetter {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]DeadLetter, 0, len(w.dead))
	for _, d := range w.dead {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DeadLetter) int { return strings.Compare(a.Study, b.Study) })
	return out
}

func (w *Worker) count(f func(*Stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// studyError classifies a failure of one study.
type studyError struct {
	err   error
	fatal bool // the worker cannot go on (local I/O)
}

func (e *studyError) Error() string { return e.err.Error() }
func (e *studyError) Unwrap() error { return e.err }

// transient reports whether err may pass by itself: the PACS or the HL7
// receiver unreachable.
func transient(err error) bool {
	return errors.Is(err, dicomweb.ErrUnavailable) || errors.Is(err, hl7.ErrUnavailable)
}

// poll searches the PACS and reports on the studies ready; it returns the
// number of studies still waiting and the first error that stopped it.
func (w *Worker) poll(ctx context.Context) (waiting int, err error) {
	var found []dicomweb.Dataset
	for offset := 0; ; offset += w.cfg.PageSize {
		page, err := w.cfg.PACS.SearchStudies(ctx, dicomweb.Query{Modalities: w.cfg.Modalities, From: w.cfg.Since, Limit: w.cfg.PageSize, Offset: offset})
		if err != nil {
			return 0, fmt.Errorf("pacs: searching for studies: %w", err)
		}
		found = append(found, page...)
		if len(page) < w.cfg.PageSize {
			break
		}
	}
	w.count(func(s *Stats) { s.Polls++ })
	for _, st := range found {
		uid := st.String(dicomweb.TagStudyInstanceUID)
		w.mu.Lock()
		skip := uid == "" || w.done[uid] || w.dead[uid].Study != ""
		w.mu.Unlock()
		if skip {
			continue
		}
		if !w.cfg.Immediate {
			n, _ := st.Int(dicomweb.TagNumberOfStudyInstances)
			prev, ok := w.seen[uid]
			w.seen[uid] = n
			if !ok || prev != n {
				waiting++
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return waiting, err
		}
		err := w.studyDraining(ctx, uid)
		switch {
		case err == nil:
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || transient(err)):
			return waiting, ctx.Err() // cut short by the stop: not the study's fault
		case transient(err):
			return waiting + 1, err
		default:
			var se *studyError
			if errors.As(err, &se) && se.fatal {
				return waiting, err
			}
			if derr := w.deadLetter(ctx, uid, err); derr != nil {
				return waiting, derr
			}
		}
	}
	w.mu.Lock()
	w.stats.Waiting = waiting
	w.mu.Unlock()
	return waiting, nil
}

// studyDraining runs study on a context that outlives ctx by Drain, so
// that a stop lets the study in hand finish.
func (w *Worker) studyDraining(ctx context.Context, uid string) error {
	if w.cfg.Drain < 0 {
		return w.study(ctx, uid)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		timer = time.AfterFunc(w.cfg.Drain, cancel)
		mu.Unlock()
		w.log.LogAttrs(sctx, slog.LevelInfo, "pacs: stopping after the study in hand", slog.String("study", uid), slog.Duration("drain", w.cfg.Drain))
	})
	defer func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
	}()
	return w.study(sctx, uid)
}

// deadLetter records a failed study.
func (w *Worker) deadLetter(ctx context.Context, uid string, err error) error {
	d := DeadLetter{Study: uid, Error: err.Error(), Time: w.cfg.Now().UTC()}
	w.log.LogAttrs(ctx, slog.LevelError, "pacs: study dead-lettered", slog.String("study", uid), slog.String("error", d.Error))
	if w.cfg.DeadLetterFile != "" {
		b, _ := json.Marshal(d)
		f, ferr := os.OpenFile(w.cfg.DeadLetterFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if ferr == nil {
			_, ferr = f.Write(append(b, '\n'))
			if serr := f.Sync(); ferr == nil {
				ferr = serr
			}
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		if ferr != nil {
			return &studyError{fmt.Errorf("pacs: writing the dead letter of %s: %w", uid, ferr), true}
		}
	}
	w.mu.Lock()
	w.dead[uid] = d
	w.stats.DeadLetters = len(w.dead)
	w.mu.Unlock()
	return nil
}

// study reports on one study: it looks for the SR in the PACS, retrieves
// the images, picks the views, generates, and stores the SR (sending the
// HL7 message first).
func (w *Worker) study(ctx context.Context, uid string) error {
	start := time.Now()
	srSeries, srInstance := dicomsr.StudyUIDs(uid, w.cfg.ModelInfo)
	series, err := w.cfg.PACS.SearchSeries(ctx, uid, dicomweb.Query{})
	if err != nil {
		return fmt.Errorf("study %s: its series: %w", uid, err)
	}
	var images []string
	for _, s := range series {
		suid := s.String(dicomweb.TagSeriesInstanceUID)
		if suid == srSeries {
			w.markDone(uid)
			w.count(func(s *Stats) { s.AlreadyReported++ })
			w.log.LogAttrs(ctx, slog.LevelInfo, "pacs: study already reported", slog.String("study", uid), slog.String("sr_series", srSeries))
			return nil
		}
		if slices.Contains(w.cfg.Modalities, s.String(dicomweb.TagModality)) && suid != "" {
			images = append(images, suid)
		}
	}
	if len(images) == 0 {
		return fmt.Errorf("study %s: no series of modality %s", uid, strings.Join(w.cfg.Modalities, " or "))
	}
	dir, err := os.MkdirTemp(w.cfg.TempDir, "radgen-study-")
	if err != nil {
		return &studyError{fmt.Errorf("pacs: %w", err), true}
	}
	defer os.RemoveAll(dir)
	if err := w.retrieve(ctx, uid, images, dir); err != nil {
		return err
	}
	studies, rerr := memtrans.StudiesFromDICOMDir(ctx, dir, w.views, memtrans.WithDICOMDecodeOptions(w.cfg.Decode...), memtrans.WithMaxDICOMFiles(w.cfg.MaxInstances))
	i := slices.IndexFunc(studies, func(s memtrans.Study) bool { return s.ID == uid })
	if rerr != nil {
		rerr = &pathless{rerr, dir + string(os.PathSeparator)}
	}
	if i < 0 {
		if rerr == nil {
			rerr = errors.New("the instances retrieved belong to other studies")
		}
		return fmt.Errorf("study %s: %w", uid, rerr)
	}
	if rerr != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: some instances left out", slog.String("study", uid), slog.String("error", rerr.Error()))
	}
	st := studies[i]
	reps, err := w.cfg.Model.Generate(ctx, []memtrans.Study{st}, w.cfg.Generate...)
	if err != nil {
		return fmt.Errorf("study %s: generating: %w", uid, err)
	}
	now := w.cfg.Now()
	doc, err := dicomsr.New(reps[0], st.DICOM, w.cfg.ModelInfo, now, dicomsr.WithUIDs(srSeries, srInstance))
	if err != nil {
		return fmt.Errorf("study %s: the SR: %w", uid, err)
	}
	if w.cfg.MLLP != nil {
		m := w.cfg.ModelInfo
		msg, err := hl7.NewORU(reps[0], st.DICOM, hl7.Model{Name: m.Name, Version: m.Version, Checksum: m.Checksum, Manufacturer: m.Manufacturer,
			DeviceUID: dicomsr.DeviceUID(m)}, now, w.cfg.HL7...)
		if err != nil {
			return fmt.Errorf("study %s: the HL7 message: %w", uid, err)
		}
		if _, err := w.cfg.MLLP.Send(ctx, msg); err != nil {
			return fmt.Errorf("study %s: sending the HL7 message: %w", uid, err)
		}
	}
	if _, err := w.cfg.PACS.Store(ctx, uid, doc.Bytes()); err != nil {
		return fmt.Errorf("study %s: storing the SR: %w", uid, err)
	}
	w.markDone(uid)
	secs := time.Since(start).Seconds()
	w.count(func(s *Stats) { s.Reported++; s.StudySeconds += secs })
	w.log.LogAttrs(ctx, slog.LevelInfo, "pacs: study reported", slog.String("study", uid), slog.String("sr", srInstance),
		slog.Int("views", len(st.DICOM.Views)), slog.Float64("seconds", secs), slog.Int("words", len(strings.Fields(reps[0].Text))))
	return nil
}

func (w *Worker) markDone(uid string) {
	w.mu.Lock()
	w.done[uid] = true
	delete(w.seen, uid)
	w.mu.Unlock()
}

// retrieve writes the instances of the series into dir, within the
// study's bounds.
func (w *Worker) retrieve(ctx context.Context, uid string, series []string, dir string) error {
	left := w.cfg.MaxStudyBytes
	n := 0
	for _, s := range series {
		err := w.cfg.PACS.Retrieve(ctx, uid, s, "", func(p dicomweb.Part) error {
			if n == w.cfg.MaxInstances {
				return fmt.Errorf("%w: more than %d instances", dicomweb.ErrLimit, w.cfg.MaxInstances)
			}
			n++
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s_%05d.dcm", s, n)))
			if err != nil {
				return &studyError{fmt.Errorf("pacs: %w", err), true}
			}
			m, err := io.Copy(f, io.LimitReader(p.Body, left+1))
			if cerr := f.Close(); err == nil && cerr != nil {
				return &studyError{fmt.Errorf("pacs: %w", cerr), true}
			}
			if err != nil {
				return err
			}
			if left -= m; left < 0 {
				return fmt.Errorf("%w: more than %d bytes", dicomweb.ErrLimit, w.cfg.MaxStudyBytes)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("study %s: retrieving series %s: %w", uid, s, err)
		}
	}
	return nil
}

// pathless is an error about the retrieved files whose message names them
// by series and number (<SeriesInstanceUID>_<n>.dcm) without the
// temporary folder, which is gone when the error is read.
type pathless struct {
	err error
	dir string
}

func (p *pathless) Error() string { return strings.ReplaceAll(p.err.Error(), p.dir, "") }
func (p *pathless) Unwrap() error { return p.err }
