package pacs

import (
	"context"
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

// Errors of the package.
var (
	// ErrConfig is wrapped by New's errors about the configuration.
	ErrConfig = errors.New("pacs: bad configuration")
	// ErrIncomplete is wrapped by RunOnce's error when it could not finish
	// every study within Config.OnceTimeout, or its last search could not
	// list every study (the page cap, a PACS ignoring offset).
	ErrIncomplete = errors.New("pacs: not every study done")
)

// Config configures a Worker. PACS, Model and ModelInfo.Name are
// required, and JournalFile with MLLP; the other fields have defaults.
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
	// SettlePolls bounds that wait: a study whose instance count has
	// changed at this many searches is reported on as it stands, logged
	// and counted (Stats.Unsettled) (default 10).
	SettlePolls int
	// PageSize is the number of studies asked per search page (default
	// 500); MaxPages bounds the pages of one search (default 100). A
	// search cut at MaxPages is logged and counted (Stats.SearchesCut).
	PageSize, MaxPages int
	// Backoff paces the searches while the PACS (or the HL7 receiver) is
	// unreachable; its Attempts is ignored: the worker never gives up
	// (default 1 s doubling to 60 s). A Retry-After of the PACS is
	// honoured, up to Backoff.Max.
	Backoff dicomweb.Retry

	// StudyRetry paces the attempts at one study that failed for a reason
	// that may pass while the PACS answers otherwise (a retrieval broken
	// off or past its deadline, 408, 429, 5xx, 404): StudyRetry.Attempts
	// failed attempts dead-letter it (default 8), waiting StudyRetry.Base
	// doubling to StudyRetry.Max between them (default 1 min to 30 min),
	// or the PACS's Retry-After up to StudyRetry.Max; a 404 dead-letters it
	// at its third. The other studies go on meanwhile.
	StudyRetry dicomweb.Retry
	// StudyMaxAge dead-letters a study still failing this long after its
	// first failure, whatever its count (default 24 h).
	StudyMaxAge time.Duration
	// StudyTimeout bounds one attempt at one study, from its series'
	// search to its stored SR (default 15 min); one past it has failed for
	// a reason that may pass.
	StudyTimeout time.Duration
	// OnceTimeout bounds RunOnce (default 1 h): then it returns an error
	// wrapping ErrIncomplete, the study in hand abandoned.
	OnceTimeout time.Duration

	// DeadLetterFile, when set, is a JSON Lines file to which failing
	// studies are appended ({"study", "error", "time"}, the error cut to
	// 1 KiB, one line each, the file to 64 MiB); the studies it lists are
	// skipped, across restarts, until their line is removed. Lines that do
	// not read are logged and skipped.
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

	// MLLP, when set, receives each report as an HL7 v2 ORU^R01 once its
	// SR is stored; HL7 are the message's options (receiving application
	// …).
	MLLP *hl7.Sender
	HL7  []hl7.Option
	// JournalFile, required with MLLP, keeps the ORU^R01 messages whose SR
	// is stored, or being stored, and that the receiver has not yet
	// acknowledged, so that a crash loses none (see the package
	// documentation). It holds the reports and the patients' identifiers:
	// it is written with mode 0600, and each entry is removed once
	// acknowledged.
	JournalFile string
	// MaxPendingHL7 bounds the journal's entries (default 100): while it is
	// full (the receiver unreachable), no new study is reported on.
	MaxPendingHL7 int

	// Drain is how long the study in hand may go on once the context of
	// Run is done (default 30 s; negative: abandon it at once). A study
	// cut short before its SR is stored is reported at the next run.
	Drain time.Duration

	// Logger receives progress (default: none).
	Logger *slog.Logger
	// Now is the clock of the documents' times and of the dead letters
	// (default time.Now).
	Now func() time.Time
}

// Stats counts what a Worker did since it was made.
type Stats struct {
	Polls           int // searches of the PACS that completed
	Reported        int // studies whose SR the worker stored
	AlreadyReported int // studies found holding the SR (stored before a restart, or by another worker)
	DeadLetters     int // studies given up on (including those read from DeadLetterFile)
	Outages         int // searches or studies interrupted by an unreachable PACS or receiver
	Waiting         int // studies found at the last search and not done: settling, waiting to be retried, or held back
	StudySeconds    float64

	Retries     int // failures of one study (or one HL7 message) that may pass, retried later
	Duplicates  int // StudyInstanceUIDs a search listed more than once
	Unsettled   int // studies reported on while their instance count still changed (SettlePolls)
	InvalidUIDs int // studies listed with a StudyInstanceUID that is not a UID, left alone
	ShortPages  int // search pages shorter than asked with more after them (a PACS capping its pages)
	SearchesCut int // searches that could not list every study: page cap, a page repeating earlier ones, an error past the first page
	HL7Sent     int // ORU^R01 messages acknowledged by the receiver
	HL7Pending  int // ORU^R01 messages in the journal, not yet acknowledged
}

// Worker watches a PACS and reports on its new studies. Run and RunOnce
// must not be called concurrently; Stats, DeadLetters and WriteMetrics may
// be called at any time.
type Worker struct {
	cfg     Config
	views   int
	log     *slog.Logger
	journal *journal // with MLLP

	// Owned by the goroutine of Run or RunOnce.
	done     map[string]bool
	state    map[string]*studyState
	invalids map[string]struct{}
	logged   map[string]bool
	ris      outage    // the HL7 receiver's
	hard     time.Time // RunOnce's deadline

	mu    sync.Mutex
	dead  map[string]DeadLetter
	stats Stats
}

// studyState is what the worker remembers of a study it has not done.
type studyState struct {
	count, changes int  // instance count at the last search; searches at which it changed
	known          bool // count is set
	duplicate      bool // logged as listed twice
	unsettled      bool // logged as reported on unsettled
	failures       int  // failures attributed to the study
	notFound       int  // 404 answers among them
	firstFail      time.Time
	next           time.Time // no attempt before then
}

// outage tracks an unreachable peer.
type outage struct {
	failures int
	next     time.Time
}

// notFoundAttempts dead-letters a study answered 404 that many times.
const notFoundAttempts = 3

// New checks cfg and returns a worker; it reads DeadLetterFile and
// JournalFile when they exist.
func New(cfg Config) (*Worker, error) {
	if cfg.PACS == nil || cfg.Model == nil {
		return nil, fmt.Errorf("%w: PACS and Model are required", ErrConfig)
	}
	if strings.TrimSpace(cfg.ModelInfo.Name) == "" {
		return nil, fmt.Errorf("%w: ModelInfo.Name is required", ErrConfig)
	}
	if cfg.MLLP != nil && cfg.JournalFile == "" {
		return nil, fmt.Errorf("%w: MLLP needs a JournalFile, where the HL7 messages not yet acknowledged are kept across a crash", ErrConfig)
	}
	if len(cfg.Modalities) == 0 {
		cfg.Modalities = []string{"CR", "DX"}
	}
	for _, m := range cfg.Modalities {
		if m == "" || strings.ContainsAny(m, `,\*?`) {
			return nil, fmt.Errorf("%w: modality %q", ErrConfig, m)
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.SettlePolls <= 0 {
		cfg.SettlePolls = 10
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	if cfg.MaxPages <= 0 {
		cfg.MaxPages = 100
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff = dicomweb.Retry{Attempts: 1, Base: time.Second, Max: time.Minute}
	}
	cfg.Backoff.Max = max(cfg.Backoff.Max, cfg.Backoff.Base)
	if cfg.StudyRetry.Base <= 0 {
		cfg.StudyRetry.Base, cfg.StudyRetry.Max = time.Minute, 30*time.Minute
	}
	if cfg.StudyRetry.Attempts <= 0 {
		cfg.StudyRetry.Attempts = 8
	}
	cfg.StudyRetry.Max = max(cfg.StudyRetry.Max, cfg.StudyRetry.Base)
	if cfg.StudyMaxAge <= 0 {
		cfg.StudyMaxAge = 24 * time.Hour
	}
	if cfg.StudyTimeout <= 0 {
		cfg.StudyTimeout = 15 * time.Minute
	}
	if cfg.OnceTimeout <= 0 {
		cfg.OnceTimeout = time.Hour
	}
	if cfg.MaxStudyBytes <= 0 {
		cfg.MaxStudyBytes = 1 << 30
	}
	if cfg.MaxInstances <= 0 {
		cfg.MaxInstances = 64
	}
	if cfg.MaxPendingHL7 <= 0 {
		cfg.MaxPendingHL7 = 100
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
	w := &Worker{cfg: cfg, views: cfg.Model.Config().Views, log: log, done: map[string]bool{}, dead: map[string]DeadLetter{},
		state: map[string]*studyState{}, invalids: map[string]struct{}{}, logged: map[string]bool{}}
	if err := w.readDeadLetters(); err != nil {
		return nil, err
	}
	if cfg.MLLP != nil {
		j, err := openJournal(cfg.JournalFile, log)
		if err != nil {
			return nil, err
		}
		w.journal = j
		w.setPending()
	}
	return w, nil
}

// Run watches the PACS until ctx is done, and returns ctx's error then;
// it returns another error only when the worker cannot go on: the
// dead-letter file, the HL7 journal or the temporary folder cannot be
// written. Nothing the PACS or the HL7 receiver answers ends it. When ctx
// is done the worker stops between studies: the study in hand is
// finished if it can be within Config.Drain, and otherwise abandoned with
// nothing of it stored (the next run reports on it).
func (w *Worker) Run(ctx context.Context) error { return w.run(ctx, false) }

// RunOnce reports on every study the PACS holds now and returns nil once
// a search finds nothing left to do (every study reported, found
// reported, or dead-lettered, and every HL7 message acknowledged). Like
// Run, it rides out an unreachable PACS, but for Config.OnceTimeout at
// most: then, or when its last search could not list every study, it
// returns an error wrapping ErrIncomplete.
func (w *Worker) RunOnce(ctx context.Context) error { return w.run(ctx, true) }

func (w *Worker) run(parent context.Context, once bool) error {
	ctx := parent
	if once {
		w.hard = time.Now().Add(w.cfg.OnceTimeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(parent, w.hard)
		defer cancel()
		defer func() { w.hard = time.Time{} }()
	}
	failures := 0
	var last pollResult
	for {
		r, err := w.poll(ctx)
		if r.searched {
			last = r
		}
		if ctx.Err() != nil || errors.Is(err, errOnceTimeout) {
			if parent.Err() == nil {
				return fmt.Errorf("%w: RunOnce stopped at its bound of %s with %d studies and %d HL7 messages left", ErrIncomplete,
					w.cfg.OnceTimeout, last.left, w.pendingCount())
			}
			return parent.Err()
		}
		if se, ok := errors.AsType[*studyError](err); ok && se.fatal {
			return err
		}
		wait := w.cfg.Interval
		switch {
		case err != nil:
			failures++
			w.count(func(s *Stats) { s.Outages++ })
			wait = max(w.cfg.Backoff.Delay(failures), min(retryAfter(err), w.cfg.Backoff.Max))
			w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: unreachable, waiting", slog.Duration("wait", wait), slog.Int("failures", failures), slog.String("error", err.Error()))
		default:
			failures = 0
			if once && r.left == 0 && w.pendingCount() == 0 {
				if !r.complete {
					return fmt.Errorf("%w: the search could not list every study of the PACS (see the log)", ErrIncomplete)
				}
				return nil
			}
			if once {
				wait = min(wait, time.Second) // a study settling needs one more search, not a full interval
				if r.settling == 0 && !r.soonest.IsZero() {
					wait = max(wait, min(time.Until(r.soonest), w.cfg.Interval))
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
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

func (w *Worker) isDead(uid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.dead[uid]
	return ok
}

// studyError is a failure the worker cannot go on after (local I/O).
type studyError struct {
	err   error
	fatal bool
}

func (e *studyError) Error() string { return e.err.Error() }
func (e *studyError) Unwrap() error { return e.err }

// errStudyTimeout is the cause of a study cut at Config.StudyTimeout;
// errOnceTimeout of one cut at RunOnce's bound.
var (
	errStudyTimeout = errors.New("pacs: the study took longer than its bound")
	errOnceTimeout  = errors.New("pacs: RunOnce's bound reached")
)

// kind is how a failure of a study is handled.
type kind int

const (
	final    kind = iota // dead-lettered at once
	passing              // may pass: retried later, within StudyRetry and StudyMaxAge
	notFound             // 404: retried, dead-lettered at the notFoundAttempts-th
	fatal                // the worker stops
)

// classify tells how a failure of a study is handled, by its cause.
func classify(err error) kind {
	if se, ok := errors.AsType[*studyError](err); ok && se.fatal {
		return fatal
	}
	if errors.Is(err, errStudyTimeout) || errors.Is(err, dicomweb.ErrUnavailable) || errors.Is(err, hl7.ErrUnavailable) {
		return passing
	}
	if se, ok := errors.AsType[*dicomweb.StoreError](err); ok {
		if se.Temporary() {
			return passing
		}
		return final
	}
	if se, ok := errors.AsType[*dicomweb.StatusError](err); ok {
		switch {
		case se.StatusCode == 404:
			return notFound
		case se.Temporary() || se.StatusCode == 401: // 401: the worker's credentials, not the study
			return passing
		}
	}
	return final
}

// retryAfter returns the Retry-After the PACS gave with err, if any.
func retryAfter(err error) time.Duration {
	if se, ok := errors.AsType[*dicomweb.StatusError](err); ok {
		return se.RetryAfter
	}
	return 0
}

// pollResult is what one round found.
type pollResult struct {
	searched bool      // the search listed studies (all, or some)
	complete bool      // the search listed every study
	left     int       // studies found and not done
	settling int       // among them, studies waiting for their count to hold
	held     int       // among them, studies held back by a full HL7 journal
	soonest  time.Time // the earliest retry of a study or an HL7 message held back; zero if none
}

func (r *pollResult) retryAt(t time.Time) {
	if r.soonest.IsZero() || t.Before(r.soonest) {
		r.soonest = t
	}
}

// poll sends the HL7 messages due, searches the PACS and reports on the
// studies ready. It returns an error when the PACS or the receiver is
// unreachable (the round is cut short) or the worker cannot go on.
func (w *Worker) poll(ctx context.Context) (pollResult, error) {
	var res pollResult
	if err := w.flushHL7(ctx, &res); err != nil {
		return res, err
	}
	sr, serr := w.search(ctx)
	if ctx.Err() != nil || serr != nil && len(sr.studies) == 0 {
		return res, serr
	}
	res.searched, res.complete = true, sr.complete
	if serr == nil {
		w.count(func(s *Stats) { s.Polls++ })
	}
	defer func() {
		w.count(func(s *Stats) { s.Waiting = res.left })
	}()
	if sr.complete {
		w.prune(sr.studies)
	}
	for _, f := range sr.studies {
		if w.done[f.uid] || w.isDead(f.uid) {
			continue
		}
		st := w.stateOf(f.uid)
		if !w.cfg.Immediate && !w.settled(ctx, f, st) {
			res.left++
			res.settling++
			continue
		}
		now := time.Now()
		if now.Before(st.next) {
			res.left++
			res.retryAt(st.next)
			continue
		}
		if w.journal != nil && w.journal.len() >= w.cfg.MaxPendingHL7 && w.journal.get(f.uid) == nil {
			if res.held == 0 {
				w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: the HL7 journal is full; no new study is reported on until the receiver takes its messages",
					slog.Int("pending", w.journal.len()), slog.String("first_study_held", f.uid))
			}
			res.left++
			res.held++
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		err := w.studyDraining(ctx, f.uid)
		if err == nil {
			delete(w.state, f.uid)
			continue
		}
		if errors.Is(err, errOnceTimeout) {
			// RunOnce's bound, which the study's own deadline may reach
			// before ctx's timer for the same instant has fired.
			res.left++
			return res, errOnceTimeout
		}
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || classify(err) == passing) {
			res.left++
			return res, ctx.Err() // cut short by the stop: not the study's fault
		}
		switch k := classify(err); k {
		case fatal:
			return res, err
		case final:
			if derr := w.deadLetter(ctx, f.uid, err); derr != nil {
				return res, derr
			}
		default:
			if k == passing && !w.pacsAnswers(ctx) {
				res.left++
				return res, err // the PACS is down, not the study's fault
			}
			if derr := w.studyFailed(ctx, f.uid, st, k, err); derr != nil {
				return res, derr
			}
			if !w.isDead(f.uid) {
				res.left++
				res.retryAt(st.next)
			}
		}
	}
	return res, serr
}

// settled reports whether a study's instance count held between two
// searches, or changed at SettlePolls of them.
func (w *Worker) settled(ctx context.Context, f found, st *studyState) bool {
	prev, known := st.count, st.known
	st.count, st.known = f.count, true
	if known && prev == f.count {
		return true
	}
	if known {
		st.changes++
	}
	if st.changes < w.cfg.SettlePolls {
		return false
	}
	if !st.unsettled {
		st.unsettled = true
		w.count(func(s *Stats) { s.Unsettled++ })
		w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: the study's instance count keeps changing; reporting on what it holds now",
			slog.String("study", f.uid), slog.Int("instances", f.count), slog.Int("changes", st.changes))
	}
	return true
}

func (w *Worker) stateOf(uid string) *studyState {
	st := w.state[uid]
	if st == nil {
		st = &studyState{}
		w.state[uid] = st
	}
	return st
}

// prune forgets the studies a complete search no longer lists, so that
// what the worker keeps is bounded by what the PACS lists.
func (w *Worker) prune(studies []found) {
	listed := make(map[string]struct{}, len(studies))
	for _, f := range studies {
		listed[f.uid] = struct{}{}
	}
	for uid := range w.state {
		if _, ok := listed[uid]; !ok {
			delete(w.state, uid)
		}
	}
	for uid := range w.done {
		if _, ok := listed[uid]; !ok {
			delete(w.done, uid)
		}
	}
}

// pacsAnswers asks the PACS the smallest search, to tell a study's own
// failure from an outage.
func (w *Worker) pacsAnswers(ctx context.Context) bool {
	_, err := w.cfg.PACS.SearchStudies(ctx, dicomweb.Query{Modalities: w.cfg.Modalities, From: w.cfg.Since, Limit: 1})
	return err == nil
}

// studyFailed counts a failure of a study that may pass, and dead-letters
// it past its bounds; otherwise it sets the study's next attempt.
func (w *Worker) studyFailed(ctx context.Context, uid string, st *studyState, k kind, err error) error {
	now := time.Now()
	st.failures++
	if st.failures == 1 {
		st.firstFail = now
	}
	if k == notFound {
		st.notFound++
	}
	switch {
	case k == notFound && st.notFound >= notFoundAttempts:
		return w.deadLetter(ctx, uid, fmt.Errorf("answered 404 %d times: %w", st.notFound, err))
	case st.failures >= w.cfg.StudyRetry.Attempts:
		return w.deadLetter(ctx, uid, fmt.Errorf("failed %d times: %w", st.failures, err))
	case now.Sub(st.firstFail) >= w.cfg.StudyMaxAge:
		return w.deadLetter(ctx, uid, fmt.Errorf("still failing %s after its first failure: %w", now.Sub(st.firstFail).Round(time.Second), err))
	}
	wait := max(w.cfg.StudyRetry.Delay(st.failures), min(retryAfter(err), w.cfg.StudyRetry.Max))
	st.next = now.Add(wait)
	w.count(func(s *Stats) { s.Retries++ })
	w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: study failed, retrying it later", slog.String("study", uid), slog.Int("failures", st.failures),
		slog.Duration("wait", wait), slog.String("error", clean(err.Error(), 1024)))
	return nil
}

// studyDraining runs study on a context that outlives ctx by Drain, so
// that a stop lets the study in hand finish, and that ends at
// StudyTimeout (or RunOnce's bound, when sooner).
func (w *Worker) studyDraining(ctx context.Context, uid string) error {
	deadline, cause := time.Now().Add(w.cfg.StudyTimeout), errStudyTimeout
	if !w.hard.IsZero() && w.hard.Before(deadline) {
		deadline, cause = w.hard, errOnceTimeout
	}
	base := context.WithoutCancel(ctx)
	if w.cfg.Drain < 0 {
		base = ctx
	}
	sctx, cancel := context.WithDeadlineCause(base, deadline, cause)
	defer cancel()
	if w.cfg.Drain >= 0 {
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
	}
	err := w.study(sctx, uid)
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		if c := context.Cause(sctx); errors.Is(c, errStudyTimeout) || errors.Is(c, errOnceTimeout) {
			return fmt.Errorf("%w: %w", c, err)
		}
	}
	return err
}

// study reports on one study: it looks for the SR in the PACS, retrieves
// the images, picks the views, generates, stores the SR, and then sends
// the HL7 message (journalled first).
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
			if p := w.journalled(uid); p != nil { // stored before a crash or a lost answer: its message is due
				p.stored = true
				return w.deliver(ctx, p)
			}
			return nil
		}
		if slices.Contains(w.cfg.Modalities, s.String(dicomweb.TagModality)) && suid != "" && !slices.Contains(images, suid) {
			if len(images) == w.cfg.MaxInstances { // each series holds an instance at least
				return fmt.Errorf("study %s: %w: more than %d series of modality %s", uid, dicomweb.ErrLimit, w.cfg.MaxInstances, strings.Join(w.cfg.Modalities, " or "))
			}
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
	var p *pending
	if w.cfg.MLLP != nil {
		m := w.cfg.ModelInfo
		hm := hl7.Model{Name: m.Name, Version: m.Version, Checksum: m.Checksum, Manufacturer: m.Manufacturer, DeviceUID: dicomsr.DeviceUID(m)}
		msg, err := hl7.NewORU(reps[0], st.DICOM, hm, now, w.cfg.HL7...)
		if err != nil {
			return fmt.Errorf("study %s: the HL7 message: %w", uid, err)
		}
		if len(msg) > maxJournalMessage {
			return fmt.Errorf("study %s: the HL7 message is larger than %d bytes", uid, maxJournalMessage)
		}
		id, _ := hl7.ParseMessage(msg)
		p = &pending{Study: uid, Series: srSeries, SR: srInstance, ControlID: id.Field("MSH", 10), Message: string(msg), Time: now.UTC()}
		if err := w.journal.put(p); err != nil { // before the SR: a crash after storing it finds the message here
			return err
		}
		w.setPending()
	}
	if _, err := w.cfg.PACS.Store(ctx, uid, doc.Bytes()); err != nil {
		if err := w.storeFailed(ctx, uid, srSeries, err); err != nil {
			return err
		}
	}
	w.markDone(uid)
	secs := time.Since(start).Seconds()
	w.count(func(s *Stats) { s.Reported++; s.StudySeconds += secs })
	w.log.LogAttrs(ctx, slog.LevelInfo, "pacs: study reported", slog.String("study", uid), slog.String("sr", srInstance),
		slog.Int("views", len(st.DICOM.Views)), slog.Float64("seconds", secs), slog.Int("words", len(strings.Fields(reps[0].Text))))
	if p != nil {
		p.stored = true
		return w.deliver(ctx, p)
	}
	return nil
}

// storeFailed handles a failed STOW-RS of a study's SR: the PACS may hold
// the SR all the same (an answer lost or wrong), so unless it is
// unreachable it is asked; nil means the SR is there. When it is not, the
// journalled message goes (the study will be reported on afresh), unless
// the outcome is unknown.
func (w *Worker) storeFailed(ctx context.Context, uid, srSeries string, err error) error {
	err = fmt.Errorf("study %s: storing the SR: %w", uid, err)
	if errors.Is(err, dicomweb.ErrUnavailable) || ctx.Err() != nil {
		return err // the journal keeps the message; the next attempt or flush looks for the SR
	}
	there, qerr := w.srStored(ctx, uid, srSeries)
	if qerr != nil {
		return err
	}
	if there {
		w.log.LogAttrs(ctx, slog.LevelWarn, "pacs: the PACS's answer to the SR was not a success, but it holds the SR", slog.String("study", uid),
			slog.String("answer", clean(err.Error(), 1024)))
		return nil
	}
	if rerr := w.unjournal(uid); rerr != nil {
		return rerr
	}
	return err
}

// srStored asks the PACS whether the study holds the SR series.
func (w *Worker) srStored(ctx context.Context, uid, srSeries string) (bool, error) {
	series, err := w.cfg.PACS.SearchSeries(ctx, uid, dicomweb.Query{})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(series, func(d dicomweb.Dataset) bool { return d.String(dicomweb.TagSeriesInstanceUID) == srSeries }), nil
}

func (w *Worker) markDone(uid string) {
	w.done[uid] = true
	delete(w.state, uid)
}

// fileWriter marks the errors of writing a retrieved instance as fatal.
type fileWriter struct{ f *os.File }

func (fw fileWriter) Write(b []byte) (int, error) {
	n, err := fw.f.Write(b)
	if err != nil {
		err = &studyError{fmt.Errorf("pacs: %w", err), true}
	}
	return n, err
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
			m, err := io.Copy(fileWriter{f}, io.LimitReader(p.Body, left+1))
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
