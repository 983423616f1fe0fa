package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// Handler serves a loaded memtrans.Model over HTTP (see the package doc for
// the routes). It is safe for concurrent use. It does not own the model:
// Close stops the handler, and the caller closes the model after it.
type Handler struct {
	model *memtrans.Model
	gen   func(context.Context, []memtrans.Study, ...memtrans.GenerateOption) ([]memtrans.Report, error) // model.Generate; tests wrap it
	o     options
	info  ModelInfo
	m     *metrics
	web   http.Handler

	admit    chan struct{} // a token per admitted report request
	queue    chan *job     // studies waiting for a worker
	decoding atomic.Int64  // requests decoding their views, about to be admitted

	mem     *memBudget // the process's memory budget for requests
	genCost int64      // bytes a study holds from its admission to its answer
	trim    trimmer

	upMu     sync.Mutex
	uploads  map[*http.ResponseController]struct{} // requests whose body is being read
	draining atomic.Bool                           // Drain was called

	lastBatch atomic.Int64 // duration of the last Generate call, ns

	mu      sync.RWMutex // held for reading while enqueueing, for writing by Close
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
	readyMu sync.Mutex
}

// ModelInfo describes the served model (GET /v1/model).
type ModelInfo struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	// Checksum identifies the weights: "sha256:" and the hex SHA-256 of the
	// configuration, the vocabulary and every parameter (name, shape and
	// little-endian float32 values, in the model's parameter order).
	Checksum  string               `json:"checksum"`
	VocabSize int                  `json:"vocab_size"` // tokenizer entries + 1 (id 0 ends a report)
	Views     int                  `json:"views"`      // images per study
	ImageSize int                  `json:"image_size"`
	MaxLength int                  `json:"max_length"` // default and largest max_length
	Device    string               `json:"device"`
	Config    memtrans.ModelConfig `json:"config"`
	// TrainedOn is what the model's checkpoint says it was trained on
	// (memtrans.Model.Provenance); nil when it does not say.
	TrainedOn *memtrans.Provenance `json:"trained_on,omitempty"`
	// MemoryBudget is the bytes the handler lets requests hold at once
	// (WithMemoryBudget).
	MemoryBudget int64 `json:"memory_budget"`
	// RadgenVersion is the version of the software that serves the model
	// (radgen.Version).
	RadgenVersion string `json:"radgen_version"`
}

// New returns a handler over m, which must stay open while the handler
// serves. It starts the workers that call m.Generate; call Close to stop
// them. The handler answers /readyz with 503 until WarmUp has succeeded.
func New(m *memtrans.Model, opts ...Option) (*Handler, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil model", ErrOption)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg := m.Config()
	if o.maxViews == 0 {
		o.maxViews = max(cfg.Views, 1)
	}
	sum, modelBytes, err := checksum(m)
	if err != nil {
		return nil, err
	}
	genCost := generationCost(cfg)
	if o.memory == 0 {
		o.memory = defaultMemoryBudget(modelBytes, genCost+decodeCost("dicom", int(min(o.maxPixels, 1<<30)), 1, nil)+o.maxUpload)
	}
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, err
	}
	h := &Handler{
		model:   m,
		gen:     m.Generate,
		o:       o,
		m:       newMetrics(),
		web:     http.FileServerFS(sub),
		admit:   make(chan struct{}, o.queue),
		queue:   make(chan *job, 2*o.queue),
		stop:    make(chan struct{}),
		mem:     newMemBudget(o.memory),
		genCost: genCost,
		trim:    trimmer{idle: o.idleTrim},
		uploads: map[*http.ResponseController]struct{}{},
		info: ModelInfo{Name: o.name, Architecture: cfg.Architecture(), Checksum: sum, VocabSize: m.Tokenizer().Len() + 1,
			Views: cfg.Views, ImageSize: cfg.ImageSize, MaxLength: cfg.MaxSeqLen(), Device: m.Device().String(), Config: cfg,
			MemoryBudget: o.memory, RadgenVersion: radgen.Version},
	}
	if p := m.Provenance(); p != (memtrans.Provenance{}) {
		h.info.TrainedOn = &p
	}
	h.m.memory = h.mem
	if o.pacs != nil {
		h.m.pacs = map[string]uint64{}
	}
	for range o.concurrency {
		h.wg.Add(1)
		go h.worker()
	}
	return h, nil
}

// checksum hashes the model's configuration, vocabulary and weights, and
// counts the weights' bytes.
func checksum(m *memtrans.Model) (string, int64, error) {
	d := sha256.New()
	cfg, err := json.Marshal(m.Config())
	if err != nil {
		return "", 0, err
	}
	tok, err := m.Tokenizer().MarshalJSON()
	if err != nil {
		return "", 0, err
	}
	var bytes int64
	var n [8]byte
	put := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		d.Write(n[:])
		d.Write(b)
	}
	put(cfg)
	put(tok)
	buf := make([]byte, 0, 1<<16)
	m.VisitParams(func(name string, t *radgen.Tensor) {
		put([]byte(name))
		for _, s := range t.Shape() {
			binary.LittleEndian.PutUint64(n[:], uint64(s))
			d.Write(n[:])
		}
		bytes += 4 * int64(len(t.Data()))
		for _, v := range t.Data() {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) {
				d.Write(buf)
				buf = buf[:0]
			}
		}
		d.Write(buf)
		buf = buf[:0]
	})
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), bytes, nil
}

// Info returns what GET /v1/model answers.
func (h *Handler) Info() ModelInfo { return h.info }

// WarmUp generates one report for a blank study of the model's size with the
// default options, so that the first request does not pay for sizing the
// buffers, then marks the handler ready (/readyz answers 200). It is safe to
// call more than once.
func (h *Handler) WarmUp(ctx context.Context) error {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	if h.m.ready.Load() {
		return nil
	}
	cfg := h.model.Config()
	s := memtrans.Study{ID: "warm-up"}
	for range cfg.Views {
		g := image.NewGray(image.Rect(0, 0, cfg.ImageSize, cfg.ImageSize))
		for i := range g.Pix {
			g.Pix[i] = 128
		}
		s.Views = append(s.Views, g)
	}
	start := time.Now()
	if _, err := h.model.Generate(ctx, []memtrans.Study{s}); err != nil {
		return fmt.Errorf("serve: warm-up: %w", err)
	}
	h.m.ready.Store(true)
	h.o.logger.Info("model ready", "name", h.info.Name, "checksum", h.info.Checksum, "warm_up", time.Since(start).Round(time.Millisecond))
	return nil
}

// Ready reports whether a report request would be taken now: WarmUp has
// succeeded, the handler is open and not draining, the queue has room and
// the memory budget has room for a study's generation.
func (h *Handler) Ready() bool {
	ok, _ := h.readiness()
	return ok
}

// readiness says whether a report can be taken now, and if not why.
func (h *Handler) readiness() (bool, string) {
	h.mu.RLock()
	closed := h.closed
	h.mu.RUnlock()
	switch {
	case !h.m.ready.Load():
		return false, "the model is not warmed up yet"
	case closed || h.draining.Load():
		return false, "the service is shutting down"
	case len(h.admit) >= cap(h.admit):
		return false, "the queue is full"
	case h.mem.free() < h.genCost:
		return false, "the memory budget is taken by the requests in progress"
	}
	return true, ""
}

// Drain prepares the handler for the server's shutdown: report requests
// that arrive from now on get 503, and the uploads still being read are
// cut at once (their requests answer 503 and their connections close), so
// that http.Server.Shutdown waits only for the requests being decoded or
// generated. Register it with the server: srv.RegisterOnShutdown(h.Drain).
// /readyz answers 503 from then on. Drain is idempotent.
func (h *Handler) Drain() {
	h.upMu.Lock()
	defer h.upMu.Unlock()
	h.draining.Store(true)
	for rc := range h.uploads {
		_ = rc.SetReadDeadline(time.Now()) // a connection that cannot have deadlines keeps reading
	}
}

// Close stops the workers after the Generate calls under way and answers
// the requests still waiting with 503. Call it after http.Server.Shutdown
// has let the requests in flight finish. It does not close the model.
// Close is idempotent.
func (h *Handler) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	h.mu.Unlock()
	h.trim.stop()
	h.wg.Wait()
	h.drain()
	return nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	path := r.URL.Path
	route := path
	outcome := "ok"
	var e *apiError
	switch path {
	case "/v1/reports":
		if e = h.authorize(r); e == nil {
			if e = allow(w, r, http.MethodPost); e == nil {
				e = h.reports(w, r, start)
			}
		}
	case "/v1/model":
		if e = h.authorize(r); e == nil {
			if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
				writeJSON(w, http.StatusOK, h.info)
			}
		}
	case "/healthz":
		if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}
	case "/readyz":
		if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
			if ok, why := h.readiness(); ok {
				writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
			} else {
				e = errorf(http.StatusServiceUnavailable, CodeUnavailable, why)
			}
		}
	case "/metrics":
		if e = h.authorize(r); e == nil {
			if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				h.m.write(w)
			}
		}
	default:
		if rest, ok := strings.CutPrefix(path, stowRoot); ok && (rest == "" || rest[0] == '/') {
			study := strings.TrimPrefix(rest, "/")
			route = stowRoot
			if study != "" {
				route = stowRoot + "/{study}"
			}
			if e = h.authorize(r); e == nil {
				if e = allow(w, r, http.MethodPost); e == nil {
					outcome, e = h.stow(w, r, start, study)
				}
			}
			break
		}
		route = "/"
		if path != "/" && path != "/index.html" && !strings.HasPrefix(path, "/web/") {
			route = "other"
			e = errorf(http.StatusNotFound, CodeNotFound, "no such route")
			break
		}
		if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
			sw := &statusWriter{ResponseWriter: w}
			h.page(sw, r)
			if sw.status == http.StatusNotFound {
				outcome = CodeNotFound
			}
		}
	}
	if e != nil {
		outcome = e.code
		if e.status != statusCanceled {
			if e.code == CodeOverloaded || e.status == http.StatusServiceUnavailable && isReport(route) {
				w.Header().Set("Retry-After", strconv.Itoa(h.retryAfter()))
			}
			if e.code == CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="radgen"`)
			}
			writeError(w, e)
		}
	}
	h.m.request(route, outcome, time.Since(start), isReport(route))
}

// isReport reports whether a route (its metrics label) writes reports.
func isReport(route string) bool {
	return route == "/v1/reports" || route == stowRoot || route == stowRoot+"/{study}"
}

// allow checks the method.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) *apiError {
	for _, m := range methods {
		if r.Method == m {
			return nil
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	return errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here; use "+strings.Join(methods, " or "))
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorize checks the bearer token, when one is required. The scheme's
// name is case-insensitive (RFC 9110, 11.1).
func (h *Handler) authorize(r *http.Request) *apiError {
	if len(h.o.tokens) == 0 {
		return nil
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	got = strings.TrimLeft(got, " ")
	if ok && strings.EqualFold(scheme, "Bearer") && got != "" {
		for _, t := range h.o.tokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
				return nil
			}
		}
	}
	return errorf(http.StatusUnauthorized, CodeUnauthorized, "a valid bearer token is required")
}

// retryAfter estimates, in whole seconds, when the queue will have room:
// the queued requests' share of Generate calls at the last call's duration.
func (h *Handler) retryAfter() int {
	last := time.Duration(h.lastBatch.Load())
	rounds := (int(h.m.admitted.Load()) + h.o.maxBatch*h.o.concurrency - 1) / (h.o.maxBatch * h.o.concurrency)
	return min(60, max(1, int(math.Ceil((last*time.Duration(rounds)).Seconds()))))
}

// reportResponse is the answer of POST /v1/reports.
type reportResponse struct {
	StudyID       string    `json:"study_id"`
	Text          string    `json:"text"`
	Words         []string  `json:"words"` // one per token; "" for the end of the report
	Tokens        []int     `json:"tokens"`
	TokenLogProbs []float32 `json:"token_log_probs"`
	LogProb       float64   `json:"log_prob"`
	// Truncated is set when the report reached max_length before the
	// model ended it.
	Truncated  bool        `json:"truncated"`
	Candidates []string    `json:"candidates,omitempty"`
	Study      *studyInfo  `json:"study,omitempty"` // from the first DICOM view's header
	Model      modelRef    `json:"model"`
	Timings    timings     `json:"timings"`
	Attention  *attention  `json:"attention,omitempty"`
	Views      []viewImage `json:"views,omitempty"`
	FHIR       any         `json:"fhir,omitempty"`
}

// studyInfo is the identity of a study as its DICOM header gives it, for
// display.
type studyInfo struct {
	PatientName       string `json:"patient_name,omitempty"` // "FAMILY, Given Middle"
	PatientID         string `json:"patient_id,omitempty"`
	IssuerOfPatientID string `json:"issuer_of_patient_id,omitempty"`
	PatientBirthDate  string `json:"patient_birth_date,omitempty"` // YYYY-MM-DD
	PatientSex        string `json:"patient_sex,omitempty"`
	StudyInstanceUID  string `json:"study_instance_uid,omitempty"`
	AccessionNumber   string `json:"accession_number,omitempty"`
	StudyDate         string `json:"study_date,omitempty"` // YYYY-MM-DD
	StudyTime         string `json:"study_time,omitempty"` // HH:MM[:SS]
	StudyDescription  string `json:"study_description,omitempty"`
	Modality          string `json:"modality,omitempty"`
}

type modelRef struct {
	Name     string `json:"name"`
	Checksum string `json:"checksum"`
}

// timings are in milliseconds.
type timings struct {
	UploadMS   float64 `json:"upload_ms"`   // reading and decoding the views
	QueueMS    float64 `json:"queue_ms"`    // waiting for a generation
	GenerateMS float64 `json:"generate_ms"` // the Generate call
	TotalMS    float64 `json:"total_ms"`
	Batch      int     `json:"batch"` // studies in the Generate call
}

// attention holds, per token, the weights over every view's Grid×Grid
// patches (view-major, each row-major).
type attention struct {
	Grid    int         `json:"grid"`
	Views   int         `json:"views"`
	Weights [][]float32 `json:"weights"`
}

// viewImage is a decoded view as the model saw it before resizing, scaled
// down for display.
type viewImage struct {
	Name   string `json:"name"`
	Width  int    `json:"width"`           // of the file
	Height int    `json:"height"`          // of the file
	DICOM  bool   `json:"dicom,omitempty"` // a DICOM file, rendered with its own window
	PNG    string `json:"png"`             // data URL
}

// maxDisplaySide bounds the longer side of the views returned for display.
const maxDisplaySide = 512

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// reports serves POST /v1/reports: a study as multipart/form-data, one
// file per view, answered with the report as JSON (see serveStudy for the
// path every report request takes).
func (h *Handler) reports(w http.ResponseWriter, r *http.Request, start time.Time) *apiError {
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(strings.ToLower(ct), "multipart/form-data") {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send the study as multipart/form-data, one file per view")
	}
	var fst fhir.Study
	read := func(ctx context.Context, body io.Reader, cr *credit) (*upload, *apiError) {
		return readUpload(ctx, ct, r.URL.Query(), body, limits{maxViews: h.o.maxViews, maxPixels: h.o.maxPixels, maxBeam: h.o.maxBeam, maxLen: h.model.Config().MaxSeqLen()}, cr)
	}
	check := func(up *upload) *apiError {
		if !up.fhir {
			return nil
		}
		var e *apiError
		fst, e = h.fhirStudy(up)
		return e
	}
	respond := func(ctx context.Context, up *upload, rep memtrans.Report, t timings) *apiError {
		resp := h.response(rep, up)
		resp.Timings = t
		if up.fhir {
			f, e := h.fhirReport(rep, fst, time.Now())
			if e != nil {
				return e
			}
			resp.FHIR = f
		}
		writeJSON(w, http.StatusOK, resp)
		h.o.logger.Info("report", "study", up.studyID, "tokens", len(rep.Tokens), "truncated", rep.Truncated, "batch", t.Batch,
			"upload_ms", t.UploadMS, "queue_ms", t.QueueMS, "generate_ms", t.GenerateMS)
		return nil
	}
	return h.serveStudy(w, r, start, read, check, respond)
}

// serveStudy is the path every report request takes once its route has
// checked the request's media type: it reserves the upload's memory at
// once (or answers 429), reads the body with read (bounded in bytes, time
// and memory, and holding no place in the queue), checks
// the views' count and, with check, what the route must know can be
// answered before any generation; decodes the views within the memory
// budget; only then takes a place in the queue and the memory of a
// generation; and, once the report is written and the place in the queue
// given back, calls respond with the request's context (its deadline still
// running) while the request's memory is still reserved.
func (h *Handler) serveStudy(w http.ResponseWriter, r *http.Request, start time.Time,
	read func(ctx context.Context, body io.Reader, cr *credit) (*upload, *apiError),
	check func(*upload) *apiError,
	respond func(ctx context.Context, up *upload, rep memtrans.Report, t timings) *apiError) *apiError {
	if r.ContentLength > h.o.maxUpload {
		// Refused before a byte of the body is read; the connection
		// closes rather than draining the body.
		w.Header().Set("Connection", "close")
		return errorf(http.StatusRequestEntityTooLarge, CodeUploadTooLarge, fmt.Sprintf("the upload is larger than %d bytes", h.o.maxUpload))
	}
	if h.draining.Load() || h.isClosed() {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	}
	h.trim.enter()
	defer h.trim.leave()
	ctx, cancel := context.WithTimeout(r.Context(), h.o.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	res := h.mem.newReservation()
	defer res.release()

	// The upload, under its own read deadline; Drain cuts it.
	up, e := h.readBody(ctx, w, r, start, deadline, res, read)
	if e != nil {
		return h.orDeadline(r, ctx, e)
	}
	cfg := h.model.Config()
	if len(up.files) != cfg.Views {
		return errorf(http.StatusUnprocessableEntity, CodeViewCount, fmt.Sprintf("%d views uploaded; the model takes %d (in its training order)", len(up.files), cfg.Views))
	}
	if e := check(up); e != nil {
		return e
	}

	// The views, each decoded once its buffers are reserved.
	h.decoding.Add(1)
	decoding := true
	defer func() {
		if decoding {
			h.decoding.Add(-1)
		}
	}()
	wait, cancelWait := waitContext(ctx, deadline)
	e = up.decode(ctx, cfg.ImageSize, h.o.maxPixels, up.images, res, wait)
	cancelWait()
	if e != nil {
		return h.orDeadline(r, ctx, e)
	}
	if err := ctx.Err(); err != nil {
		return h.generationError(r, err)
	}

	// Admission: a place in the queue and the generation's memory.
	select {
	case h.admit <- struct{}{}:
	default:
		return errorf(http.StatusTooManyRequests, CodeOverloaded, "too many requests are waiting; retry later")
	}
	h.m.admitted.Add(1)
	admitted := true
	leave := func() {
		if admitted {
			admitted = false
			h.m.admitted.Add(-1)
			<-h.admit
		}
	}
	defer leave()
	wait, cancelWait = waitContext(ctx, deadline)
	ok := res.take(wait, h.genCost)
	cancelWait()
	if !ok {
		if err := ctx.Err(); err != nil {
			return h.generationError(r, err)
		}
		return errorf(http.StatusTooManyRequests, CodeOverloaded, "the service's memory is taken by other requests; retry later")
	}
	study := memtrans.Study{ID: up.studyID}
	for _, px := range up.views {
		study.Views = append(study.Views, px)
	}
	j := &job{ctx: ctx, study: study, key: genKey{beam: up.beam, maxLen: up.maxLen, attention: up.attention}, done: make(chan result, 1)}
	uploaded := time.Now()

	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	}
	select {
	case h.queue <- j:
	default:
		// Only jobs of requests that timed out while the workers were busy
		// (their tokens are back, their jobs not yet skipped) fill it.
		h.mu.RUnlock()
		return errorf(http.StatusTooManyRequests, CodeOverloaded, "too many requests are waiting; retry later")
	}
	h.decoding.Add(-1)
	decoding = false
	h.mu.RUnlock()

	var rs result
	select {
	case rs = <-j.done:
	case <-ctx.Done():
		rs.err = ctx.Err()
	}
	if rs.err != nil {
		return h.generationError(r, rs.err)
	}
	leave() // what is left (the answer, a PACS) holds no place in the queue
	t := timings{UploadMS: ms(uploaded.Sub(start)), QueueMS: ms(rs.started.Sub(uploaded)), GenerateMS: ms(rs.finished.Sub(rs.started)),
		TotalMS: ms(time.Since(start)), Batch: rs.batch}
	return respond(ctx, up, rs.report, t)
}

// orDeadline returns the request's timeout (or cancellation) instead of e
// when a wait for memory failed because the request's context ended.
func (h *Handler) orDeadline(r *http.Request, ctx context.Context, e *apiError) *apiError {
	if e.code == CodeOverloaded && ctx.Err() != nil {
		return h.generationError(r, ctx.Err())
	}
	return e
}

// isClosed reports whether Close has been called.
func (h *Handler) isClosed() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.closed
}

// waitContext bounds a wait for memory: at most half the time the request
// has left, so that its generation keeps the other half.
func waitContext(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/2))
}

// readBody reserves the upload's memory in one step (uploadCredit: the
// declared length, or the largest body allowed, at most a quarter of the
// budget), answering 429 at once when it does not fit (413 when it never
// could), so that no upload holds a part of the budget while it waits for
// the rest; then reads
// the body with read under the upload's own read deadline
// (WithUploadTimeout, never past the request's), registered for Drain, and
// tells the connection's failures (a read deadline, a client gone, a
// shutdown) apart from a malformed body. What the upload did not use is
// given back once it is read.
func (h *Handler) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, start, deadline time.Time, res *reservation,
	read func(ctx context.Context, body io.Reader, cr *credit) (*upload, *apiError)) (*upload, *apiError) {
	cr := &credit{res: res, left: uploadCredit(r.ContentLength, h.o.maxUpload, h.mem.total)}
	if requestOverhead+cr.left > h.mem.total {
		w.Header().Set("Connection", "close")
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeUploadTooLarge, fmt.Sprintf("the upload of %d bytes is larger than the service's memory budget allows", r.ContentLength))
	}
	if !res.try(requestOverhead + cr.left) {
		// The body is not read; the connection closes rather than
		// draining it.
		w.Header().Set("Connection", "close")
		return nil, errorf(http.StatusTooManyRequests, CodeOverloaded, "the service's memory is taken by other requests; retry later")
	}
	defer cr.close()
	rc := http.NewResponseController(w)
	readBy := start.Add(h.o.uploadTimeout)
	if deadline.Before(readBy) {
		readBy = deadline
	}
	h.upMu.Lock()
	if h.draining.Load() {
		h.upMu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	}
	_ = rc.SetReadDeadline(readBy) // without deadlines (a test's recorder), the request's context still bounds the waits
	h.uploads[rc] = struct{}{}
	h.upMu.Unlock()
	h.m.uploads.Add(1)
	defer func() {
		h.m.uploads.Add(-1)
		h.upMu.Lock()
		delete(h.uploads, rc)
		h.upMu.Unlock()
	}()

	tb := &trackedBody{r: r.Body}
	body := http.MaxBytesReader(w, tb, h.o.maxUpload)
	wait, cancelWait := waitContext(ctx, deadline)
	defer cancelWait()
	up, e := read(wait, body, cr)
	if e == nil {
		// The body is read: no deadline for the connection's background
		// read, whose timeout would cancel the request's context.
		_ = rc.SetReadDeadline(time.Time{})
		return up, nil
	}
	if tb.err == nil || e.code == CodeUploadTooLarge {
		return nil, e
	}
	switch {
	case h.draining.Load():
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	case errors.Is(tb.err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline):
		return nil, errorf(http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("no report within %v", h.o.timeout))
	case errors.Is(tb.err, os.ErrDeadlineExceeded):
		return nil, errorf(http.StatusRequestTimeout, CodeUploadTimeout, fmt.Sprintf("the upload did not arrive within %v", h.o.uploadTimeout))
	}
	return nil, errorf(statusCanceled, CodeCanceled, "the client went away during the upload")
}

// generationError maps an error of the queue or of Generate.
func (h *Handler) generationError(r *http.Request, err error) *apiError {
	switch {
	case r.Context().Err() != nil:
		return errorf(statusCanceled, CodeCanceled, "the client went away")
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("no report within %v", h.o.timeout))
	case errors.Is(err, memtrans.ErrClosed):
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	case errors.Is(err, memtrans.ErrStudy), errors.Is(err, vision.ErrTooLarge):
		h.o.logger.Warn("study refused by the model", "err", err)
		return errorf(http.StatusUnprocessableEntity, CodeBadImage, "the model could not read the views")
	}
	h.o.logger.Error("generation failed", "err", err)
	return errorf(http.StatusInternalServerError, CodeInternal, "the report could not be generated")
}

// response builds the JSON answer of a report.
func (h *Handler) response(rep memtrans.Report, up *upload) *reportResponse {
	tok := h.model.Tokenizer()
	resp := &reportResponse{StudyID: up.studyID, Text: rep.Text, Tokens: rep.Tokens, TokenLogProbs: rep.TokenLogProbs, LogProb: rep.LogProb,
		Truncated: rep.Truncated, Candidates: rep.Candidates, Model: modelRef{Name: h.info.Name, Checksum: h.info.Checksum}, Study: studyOf(up.dicom)}
	resp.Words = make([]string, len(rep.Tokens))
	for i, id := range rep.Tokens {
		if id != 0 {
			resp.Words[i] = tok.Token(id)
		}
	}
	if up.attention && rep.Attention != nil {
		resp.Attention = &attention{Grid: rep.Grid, Views: len(up.views), Weights: rep.Attention}
	}
	if up.images {
		for i, px := range up.display {
			resp.Views = append(resp.Views, viewImage{Name: up.names[i], Width: up.sizes[i][0], Height: up.sizes[i][1],
				DICOM: up.headers[i].format == "dicom", PNG: displayPNG(px)})
		}
	}
	return resp
}

// studyOf returns the identity a DICOM header gives, nil without one.
func studyOf(d *vision.DICOMInfo) *studyInfo {
	if d == nil {
		return nil
	}
	s := &studyInfo{PatientName: personName(d.PatientName), PatientID: d.PatientID, IssuerOfPatientID: d.IssuerOfPatientID,
		PatientBirthDate: dicomDate(d.PatientBirthDate), PatientSex: d.PatientSex, StudyInstanceUID: d.StudyInstanceUID,
		AccessionNumber: d.AccessionNumber, StudyDate: dicomDate(d.StudyDate), StudyDescription: d.StudyDescription, Modality: d.Modality}
	if t := strings.TrimSpace(d.StudyTime); len(t) >= 4 && strings.Trim(t[:4], "0123456789") == "" {
		s.StudyTime = t[:2] + ":" + t[2:4]
		if len(t) >= 6 && strings.Trim(t[4:6], "0123456789") == "" {
			s.StudyTime += ":" + t[4:6]
		}
	}
	return s
}

// dicomDate writes a DICOM date (YYYYMMDD) as YYYY-MM-DD; anything else is
// left out.
func dicomDate(v string) string {
	v = strings.TrimSpace(v)
	if _, err := time.Parse("20060102", v); err != nil {
		return ""
	}
	return v[:4] + "-" + v[4:6] + "-" + v[6:]
}

// personName writes a DICOM person name (family^given^middle^prefix^suffix,
// its alphabetic group) as "FAMILY, Given Middle".
func personName(v string) string {
	v, _, _ = strings.Cut(v, "=")
	parts := strings.Split(v, "^")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	family := parts[0]
	var rest []string
	for _, p := range parts[1:min(len(parts), 3)] {
		if p != "" {
			rest = append(rest, p)
		}
	}
	if len(rest) == 0 {
		return family
	}
	if family == "" {
		return strings.Join(rest, " ")
	}
	return family + ", " + strings.Join(rest, " ")
}

// displayPNG scales a view down to at most maxDisplaySide and encodes it as
// a PNG data URL.
func displayPNG(px *vision.Pixels) string {
	if s := max(px.W, px.H); s > maxDisplaySide {
		w, h := max(1, px.W*maxDisplaySide/s), max(1, px.H*maxDisplaySide/s)
		px = vision.Resize(nil, px, w, h)
	}
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, pngImage(px)); err != nil {
		return ""
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}
