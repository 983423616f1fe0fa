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
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
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
	decoding atomic.Int64  // admitted requests still reading or decoding their upload

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
	sum, err := checksum(m)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, err
	}
	h := &Handler{
		model: m,
		gen:   m.Generate,
		o:     o,
		m:     newMetrics(),
		web:   http.FileServerFS(sub),
		admit: make(chan struct{}, o.queue),
		queue: make(chan *job, 2*o.queue),
		stop:  make(chan struct{}),
		info: ModelInfo{Name: o.name, Architecture: cfg.Architecture(), Checksum: sum, VocabSize: m.Tokenizer().Len() + 1,
			Views: cfg.Views, ImageSize: cfg.ImageSize, MaxLength: cfg.MaxSeqLen(), Device: m.Device().String(), Config: cfg},
	}
	for range o.concurrency {
		h.wg.Add(1)
		go h.worker()
	}
	return h, nil
}

// checksum hashes the model's configuration, vocabulary and weights.
func checksum(m *memtrans.Model) (string, error) {
	d := sha256.New()
	cfg, err := json.Marshal(m.Config())
	if err != nil {
		return "", err
	}
	tok, err := m.Tokenizer().MarshalJSON()
	if err != nil {
		return "", err
	}
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
	return "sha256:" + hex.EncodeToString(d.Sum(nil)), nil
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

// Ready reports whether WarmUp has succeeded and the handler is open.
func (h *Handler) Ready() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.m.ready.Load() && !h.closed
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
	h.wg.Wait()
	h.drain()
	return nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	path := r.URL.Path
	route := path
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
			if h.Ready() {
				writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
			} else {
				e = errorf(http.StatusServiceUnavailable, CodeUnavailable, "the model is not warmed up yet")
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
		route = "/"
		if path != "/" && path != "/index.html" && !strings.HasPrefix(path, "/web/") {
			route = "other"
			e = errorf(http.StatusNotFound, CodeNotFound, "no such route")
			break
		}
		if e = allow(w, r, http.MethodGet, http.MethodHead); e == nil {
			h.page(w, r)
		}
	}
	outcome := "ok"
	if e != nil {
		outcome = e.code
		if e.status != statusCanceled {
			if e.code == CodeOverloaded {
				w.Header().Set("Retry-After", strconv.Itoa(h.retryAfter()))
			}
			if e.code == CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="radgen"`)
			}
			writeError(w, e)
		}
	}
	h.m.request(route, outcome, time.Since(start), route == "/v1/reports")
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

// authorize checks the bearer token, when one is required.
func (h *Handler) authorize(r *http.Request) *apiError {
	if len(h.o.tokens) == 0 {
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok {
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
	StudyID       string      `json:"study_id"`
	Text          string      `json:"text"`
	Words         []string    `json:"words"` // one per token; "" for the end of the report
	Tokens        []int       `json:"tokens"`
	TokenLogProbs []float32   `json:"token_log_probs"`
	LogProb       float64     `json:"log_prob"`
	Candidates    []string    `json:"candidates,omitempty"`
	Model         modelRef    `json:"model"`
	Timings       timings     `json:"timings"`
	Attention     *attention  `json:"attention,omitempty"`
	Views         []viewImage `json:"views,omitempty"`
	FHIR          any         `json:"fhir,omitempty"`
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
	Width  int    `json:"width"`  // of the file
	Height int    `json:"height"` // of the file
	PNG    string `json:"png"`    // data URL
}

// maxDisplaySide bounds the longer side of the views returned for display.
const maxDisplaySide = 512

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// reports serves POST /v1/reports.
func (h *Handler) reports(w http.ResponseWriter, r *http.Request, start time.Time) *apiError {
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(strings.ToLower(ct), "multipart/form-data") {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send the study as multipart/form-data, one file per view")
	}
	select {
	case h.admit <- struct{}{}:
	default:
		return errorf(http.StatusTooManyRequests, CodeOverloaded, "too many requests are waiting; retry later")
	}
	h.m.admitted.Add(1)
	defer func() {
		h.m.admitted.Add(-1)
		<-h.admit
	}()
	ctx, cancel := context.WithTimeout(r.Context(), h.o.timeout)
	defer cancel()

	h.decoding.Add(1)
	decoded := false
	defer func() {
		if !decoded {
			h.decoding.Add(-1)
		}
	}()
	cfg := h.model.Config()
	body := http.MaxBytesReader(w, r.Body, h.o.maxUpload)
	up, e := readUpload(ct, r.URL.Query(), body, limits{maxViews: h.o.maxViews, maxPixels: h.o.maxPixels, maxBeam: h.o.maxBeam, maxLen: cfg.MaxSeqLen()})
	if e != nil {
		return e
	}
	if len(up.views) != cfg.Views {
		return errorf(http.StatusUnprocessableEntity, CodeViewCount, fmt.Sprintf("%d views uploaded; the model takes %d (in its training order)", len(up.views), cfg.Views))
	}
	study := memtrans.Study{ID: up.studyID}
	for _, px := range up.views {
		study.Views = append(study.Views, pixelsImage(px))
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
	decoded = true
	h.mu.RUnlock()

	var res result
	select {
	case res = <-j.done:
	case <-ctx.Done():
		res.err = ctx.Err()
	}
	if res.err != nil {
		return h.generationError(r, res.err)
	}
	resp := h.response(res.report, up)
	done := time.Now()
	resp.Timings = timings{UploadMS: ms(uploaded.Sub(start)), QueueMS: ms(res.started.Sub(uploaded)), GenerateMS: ms(res.finished.Sub(res.started)),
		TotalMS: ms(done.Sub(start)), Batch: res.batch}
	if up.fhir {
		f, e := h.fhirReport(res.report, up, done)
		if e != nil {
			return e
		}
		resp.FHIR = f
	}
	writeJSON(w, http.StatusOK, resp)
	h.o.logger.Info("report", "study", up.studyID, "tokens", len(res.report.Tokens), "batch", res.batch,
		"upload_ms", resp.Timings.UploadMS, "queue_ms", resp.Timings.QueueMS, "generate_ms", resp.Timings.GenerateMS)
	return nil
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
		Candidates: rep.Candidates, Model: modelRef{Name: h.info.Name, Checksum: h.info.Checksum}}
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
		for i, px := range up.views {
			resp.Views = append(resp.Views, viewImage{Name: up.names[i], Width: px.W, Height: px.H, PNG: displayPNG(px)})
		}
	}
	return resp
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
	if err := enc.Encode(&b, pixelsImage(px)); err != nil {
		return ""
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}
