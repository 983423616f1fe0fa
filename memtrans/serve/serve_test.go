package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// sequential returns the reports of the fixture's studies, each from its
// own Generate call on the files as StudyFromFiles reads them.
func sequential(t *testing.T, opts ...memtrans.GenerateOption) []memtrans.Report {
	f := tinyFixture(t)
	var out []memtrans.Report
	for _, s := range f.studies {
		st, err := memtrans.StudyFromFiles(s.id, s.paths...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.model.Generate(context.Background(), []memtrans.Study{st}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r[0])
	}
	return out
}

// sameReport compares a served report with one from Generate: tokens,
// words and text exactly; log-probabilities within tol (0: exactly).
func sameReport(t *testing.T, got *reportResponse, want memtrans.Report, tol float64) {
	t.Helper()
	if got.Text != want.Text || len(got.Tokens) != len(want.Tokens) {
		t.Fatalf("study %s: text %q (%d tokens), want %q (%d)", want.StudyID, got.Text, len(got.Tokens), want.Text, len(want.Tokens))
	}
	for i := range want.Tokens {
		if got.Tokens[i] != want.Tokens[i] {
			t.Fatalf("study %s: token %d is %d, want %d", want.StudyID, i, got.Tokens[i], want.Tokens[i])
		}
		if d := math.Abs(float64(got.TokenLogProbs[i] - want.TokenLogProbs[i])); d > tol {
			t.Fatalf("study %s: token %d log-prob %v, want %v", want.StudyID, i, got.TokenLogProbs[i], want.TokenLogProbs[i])
		}
	}
	if d := math.Abs(got.LogProb - want.LogProb); d > tol*float64(len(want.Tokens)) {
		t.Fatalf("study %s: log-prob %v, want %v", want.StudyID, got.LogProb, want.LogProb)
	}
}

func TestRoutes(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t, WithModelName("tiny"))
	srv := server(t, h)
	get := func(path string) (*http.Response, []byte) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	if resp, b := get("/healthz"); resp.StatusCode != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Errorf("healthz: %d %s", resp.StatusCode, b)
	}
	if resp, b := get("/readyz"); resp.StatusCode != 503 || decodeError(t, b).Error.Code != CodeUnavailable {
		t.Errorf("readyz before warm-up: %d %s", resp.StatusCode, b)
	}
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, b := get("/readyz"); resp.StatusCode != 200 {
		t.Errorf("readyz after warm-up: %d %s", resp.StatusCode, b)
	}

	resp, b := get("/v1/model")
	var info ModelInfo
	if err := json.Unmarshal(b, &info); err != nil || resp.StatusCode != 200 {
		t.Fatalf("model: %d %v %s", resp.StatusCode, err, b)
	}
	cfg := f.model.Config()
	if info.Name != "tiny" || info.Architecture != memtrans.ArchR2Gen || info.VocabSize != f.model.Tokenizer().Len()+1 ||
		info.Views != 2 || info.ImageSize != 64 || info.MaxLength != cfg.MaxSeqLen() || info.Config.EncoderDecoder.(r2gen.Config).DModel != cfg.EncoderDecoder.(r2gen.Config).DModel {
		t.Errorf("model info %+v", info)
	}
	if info.RadgenVersion != radgen.Version || !strings.Contains(string(b), `"radgen_version":"`+radgen.Version+`"`) {
		t.Errorf("radgen_version %q, want %q: %s", info.RadgenVersion, radgen.Version, b)
	}
	if !strings.HasPrefix(info.Checksum, "sha256:") || len(info.Checksum) != 7+64 {
		t.Errorf("checksum %q", info.Checksum)
	}
	// The checksum depends on the weights.
	other, err := memtrans.New(cfg, f.model.Tokenizer(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if sum, _, _ := checksum(other); sum == info.Checksum {
		t.Error("two models share a checksum")
	}
	if sum, _, _ := checksum(f.model); sum != info.Checksum {
		t.Error("checksum is not deterministic")
	}

	resp, b = post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0], "study_id", "S1")...)
	if resp.StatusCode != 200 {
		t.Fatalf("report: %d %s", resp.StatusCode, b)
	}
	if r := decodeReport(t, b); r.StudyID != "S1" || r.Model.Checksum != info.Checksum || r.Timings.Batch != 1 {
		t.Errorf("report %+v", r)
	}

	resp, b = get("/metrics")
	text := string(b)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`radgen_requests_total{route="/v1/reports",outcome="ok"} 1`,
		`radgen_requests_total{route="/readyz",outcome="unavailable"} 1`,
		`radgen_report_duration_seconds_bucket{le="+Inf"} 1`,
		`radgen_report_duration_seconds_count 1`,
		`radgen_batch_studies_bucket{le="1"} 1`,
		"radgen_in_flight 0",
		"radgen_queue_length 0",
		"radgen_ready 1",
		"# TYPE radgen_report_duration_seconds histogram",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	checkExposition(t, text)

	if resp, b := get("/"); resp.StatusCode != 200 || !strings.Contains(string(b), "radgen report viewer") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("page: %d %q", resp.StatusCode, b)
	}
	for _, p := range []string{"/web/app.js", "/web/style.css"} {
		if resp, b := get(p); resp.StatusCode != 200 || len(b) < 100 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	if resp, b := get("/nope"); resp.StatusCode != 404 || decodeError(t, b).Error.Code != CodeNotFound {
		t.Errorf("unknown route: %d %s", resp.StatusCode, b)
	}
	if resp, b := get("/v1/reports"); resp.StatusCode != 405 || decodeError(t, b).Error.Code != CodeMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET reports: %d %s", resp.StatusCode, b)
	}
	resp, err = srv.Client().Post(srv.URL+"/v1/model", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || decodeError(t, b).Error.Code != CodeMethodNotAllowed {
		t.Errorf("POST model: %d %s", resp.StatusCode, b)
	}
}

// checkExposition checks the metrics text line by line: comments are HELP
// or TYPE, samples are a name, optional labels and a number; histogram
// buckets are cumulative.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	var prevBucket float64 = -1
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "# ") {
			if !strings.HasPrefix(line, "# HELP radgen_") && !strings.HasPrefix(line, "# TYPE radgen_") {
				t.Errorf("bad comment %q", line)
			}
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad sample %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || !strings.HasPrefix(line, "radgen_") {
			t.Errorf("bad sample %q", line)
		}
		if strings.Contains(line, "_bucket{") {
			if strings.Contains(line, `le="0.005"`) || strings.Contains(line, `le="1",`) && strings.Contains(line, "batch") {
				prevBucket = -1
			}
			if v < prevBucket {
				t.Errorf("bucket not cumulative: %q", line)
			}
			prevBucket = v
		} else {
			prevBucket = -1
		}
	}
}

// TestReportMatchesGenerate checks one served report, with every option,
// against Model.Generate on the same files.
func TestReportMatchesGenerate(t *testing.T) {
	f := tinyFixture(t)
	srv := server(t, newHandler(t))
	want := sequential(t, memtrans.WithBeamSize(2), memtrans.WithMaxLength(12), memtrans.WithAttention())
	s := f.studies[1]
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports?beam_size=2", nil,
		studyParts(s, "max_length", "12", "attention", "true", "images", "1", "fhir", "on", "study_uid", "1.2.826.0.1.3680043.8.498.1")...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := decodeReport(t, b)
	sameReport(t, r, want[1], 0)
	if len(r.Words) != len(r.Tokens) || strings.Join(nonEmpty(r.Words), " ") != r.Text {
		t.Errorf("words %q for text %q", r.Words, r.Text)
	}
	a := r.Attention
	if a == nil || a.Grid != want[1].Grid || a.Views != 2 || len(a.Weights) != len(r.Tokens) {
		t.Fatalf("attention %+v", a)
	}
	for i, row := range a.Weights {
		if len(row) != a.Views*a.Grid*a.Grid {
			t.Fatalf("attention row %d has %d weights", i, len(row))
		}
		for k, w := range row {
			if w != want[1].Attention[i][k] {
				t.Fatalf("attention [%d][%d] = %v, want %v", i, k, w, want[1].Attention[i][k])
			}
		}
	}
	if len(r.Views) != 2 || r.Views[0].Width != 64 || r.Views[1].Name != "1.png" || !strings.HasPrefix(r.Views[0].PNG, "data:image/png;base64,") {
		t.Errorf("views %+v", r.Views)
	}
	fh, _ := json.Marshal(r.FHIR)
	for _, want := range []string{`"resourceType":"DiagnosticReport"`, `"status":"preliminary"`, "urn:oid:1.2.826.0.1.3680043.8.498.1", r.Model.Checksum} {
		if !bytes.Contains(fh, []byte(want)) {
			t.Errorf("FHIR lacks %s: %s", want, fh)
		}
	}
	if r.Timings.TotalMS <= 0 || r.Timings.GenerateMS <= 0 || r.Timings.TotalMS < r.Timings.GenerateMS {
		t.Errorf("timings %+v", r.Timings)
	}

	// Without the options: no attention, views or FHIR in the answer.
	resp, b = post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(s, "fhir", "1")...)
	r = decodeReport(t, b)
	if resp.StatusCode != 200 || r.Attention != nil || r.Views != nil || r.FHIR == nil {
		t.Errorf("default options: %d %+v", resp.StatusCode, r)
	}
	fh, _ = json.Marshal(r.FHIR)
	if !bytes.Contains(fh, []byte("urn:oid:2.25.")) {
		t.Errorf("FHIR without a study UID: %s", fh)
	}
}

func nonEmpty(ws []string) []string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// TestLimits sends every kind of bad request and checks the status and the
// stable code.
func TestLimits(t *testing.T) {
	f := tinyFixture(t)
	s := f.studies[0]
	srv := server(t, newHandler(t, WithMaxUploadBytes(64<<10), WithMaxPixels(64*64), WithMaxViews(3)))
	big := server(t, newHandler(t, WithMaxPixels(64*63)))
	corrupt := append([]byte(nil), s.files[1][:len(s.files[1])/2]...)
	dicomHead := append(make([]byte, 128), []byte("DICM\x02\x00\x00\x00")...)
	cases := []struct {
		name   string
		srv    string
		parts  []part
		ct     string // overrides the multipart content type
		status int
		code   string
	}{
		{"upload too large", srv.URL, append(studyParts(s), part{field: "view", name: "pad.png", body: make([]byte, 70<<10)}), "", 413, CodeUploadTooLarge},
		{"too many pixels", big.URL, studyParts(s), "", 413, CodeTooManyPixels},
		{"not multipart", srv.URL, studyParts(s), "application/json", 415, CodeUnsupportedMedia},
		{"no boundary", srv.URL, studyParts(s), "multipart/form-data", 415, CodeUnsupportedMedia},
		{"not an image", srv.URL, []part{{field: "view", name: "a.png", body: []byte("hello, world")}, {field: "view", name: "b.png", body: s.files[1]}}, "", 415, CodeUnsupportedMedia},
		{"gif", srv.URL, []part{{field: "view", name: "a.gif", body: []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")}}, "", 415, CodeUnsupportedMedia},
		{"corrupt png", srv.URL, []part{{field: "view", name: "0.png", body: s.files[0]}, {field: "view", name: "1.png", body: corrupt}}, "", 422, CodeBadImage},
		{"corrupt dicom", srv.URL, []part{{field: "view", name: "0.dcm", body: dicomHead}}, "", 422, CodeBadImage},
		{"no views", srv.URL, []part{{field: "beam_size", body: []byte("2")}}, "", 400, CodeNoViews},
		{"empty body", srv.URL, nil, "", 400, CodeNoViews},
		{"one view", srv.URL, studyParts(s)[:1], "", 422, CodeViewCount},
		{"too many views", srv.URL, append(studyParts(s), studyParts(s)...), "", 413, CodeTooManyViews},
		{"beam size", srv.URL, studyParts(s, "beam_size", "9"), "", 400, CodeInvalidOption},
		{"beam size text", srv.URL, studyParts(s, "beam_size", "three"), "", 400, CodeInvalidOption},
		{"max length", srv.URL, studyParts(s, "max_length", "100000"), "", 400, CodeInvalidOption},
		{"boolean", srv.URL, studyParts(s, "attention", "maybe"), "", 400, CodeInvalidOption},
		{"unknown option", srv.URL, studyParts(s, "temperature", "2"), "", 400, CodeInvalidOption},
		{"long field", srv.URL, studyParts(s, "study_id", strings.Repeat("x", 2000)), "", 400, CodeBadRequest},
		{"study uid", srv.URL, studyParts(s, "fhir", "1", "study_uid", "not-a-uid"), "", 400, CodeInvalidOption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := multipartBody(t, c.parts...)
			if c.ct != "" {
				ct = c.ct
			}
			resp, err := http.Post(c.srv+"/v1/reports", ct, body)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || decodeError(t, b).Error.Code != c.code {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, c.status, c.code)
			}
			if strings.Contains(string(b), "memtrans:") || strings.Contains(string(b), "vision:") || strings.Contains(string(b), "/") && c.code != CodeUnsupportedMedia {
				t.Errorf("the message shows internals: %s", b)
			}
		})
	}
	// A malformed multipart body.
	resp, err := http.Post(srv.URL+"/v1/reports", "multipart/form-data; boundary=xyz", strings.NewReader("--xyz\r\nContent-Disposition: form-data; name=\"view\"; filename=\"a.png\"\r\n\r\n\x89PNG"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || decodeError(t, b).Error.Code != CodeBadRequest {
		t.Errorf("truncated multipart: %d %s", resp.StatusCode, b)
	}
}

func TestOptions(t *testing.T) {
	m := tinyFixture(t).model
	for i, o := range []Option{WithMaxUploadBytes(0), WithMaxPixels(-1), WithMaxViews(0), WithTimeout(0), WithQueue(0),
		WithConcurrency(0), WithBatching(0, time.Millisecond), WithBatching(4, -1), WithMaxBeamSize(0), WithBearerToken(),
		WithBearerToken(""), WithLogger(nil), WithModelName("")} {
		if _, err := New(m, o); !errors.Is(err, ErrOption) {
			t.Errorf("option %d: %v", i, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, ErrOption) {
		t.Errorf("nil model: %v", err)
	}
}

func TestAuth(t *testing.T) {
	f := tinyFixture(t)
	srv := server(t, newHandler(t, WithBearerToken("s3cret", "other")))
	do := func(method, path, token string) (int, []byte, http.Header) {
		var body io.Reader
		var ct string
		if method == http.MethodPost {
			var b *bytes.Buffer
			b, ct = multipartBody(t, studyParts(f.studies[0])...)
			body = b
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	for _, p := range []struct{ method, path string }{{"POST", "/v1/reports"}, {"GET", "/v1/model"}, {"GET", "/metrics"}} {
		for _, tok := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret", "Bearer s3cret2"} {
			code, b, hdr := do(p.method, p.path, tok)
			if code != 401 || decodeError(t, b).Error.Code != CodeUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %q: %d %s", p.method, p.path, tok, code, b)
			}
		}
		for _, tok := range []string{"Bearer s3cret", "Bearer other"} {
			if code, b, _ := do(p.method, p.path, tok); code != 200 {
				t.Errorf("%s %s with %q: %d %s", p.method, p.path, tok, code, b)
			}
		}
	}
	for _, p := range []string{"/healthz", "/", "/web/app.js"} {
		if code, _, _ := do("GET", p, ""); code != 200 {
			t.Errorf("%s needs no token: %d", p, code)
		}
	}
}

// gate makes the handler's Generate calls wait until it is opened, and
// records the contexts and batch sizes they got.
type gate struct {
	open    chan struct{}
	entered chan int // batch size of every call, as it starts
	mu      sync.Mutex
	ctxs    []context.Context
}

func newGate(h *Handler) *gate {
	g := &gate{open: make(chan struct{}), entered: make(chan int, 64)}
	real := h.gen
	h.gen = func(ctx context.Context, s []memtrans.Study, o ...memtrans.GenerateOption) ([]memtrans.Report, error) {
		g.mu.Lock()
		g.ctxs = append(g.ctxs, ctx)
		g.mu.Unlock()
		g.entered <- len(s)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return real(ctx, s, o...)
	}
	return g
}

// waitFor polls cond until it holds (the test's own deadline bounds it).
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

func TestTimeout(t *testing.T) {
	f := tinyFixture(t)
	// The deadline reaches Generate, which stops: the request gets 504.
	h := newHandler(t, WithTimeout(200*time.Millisecond))
	g := newGate(h)
	srv := server(t, h)
	before := time.Now()
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0])...)
	if resp.StatusCode != 504 || decodeError(t, b).Error.Code != CodeTimeout {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	g.mu.Lock()
	dl, ok := g.ctxs[0].Deadline()
	err := g.ctxs[0].Err()
	g.mu.Unlock()
	if !ok || dl.Before(before.Add(200*time.Millisecond)) || dl.After(time.Now()) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate's context: deadline %v (%v), err %v", dl, ok, err)
	}

	// The real Generate with a deadline already past when it would start.
	srv2 := server(t, newHandler(t, WithTimeout(time.Nanosecond)))
	resp, b = post(t, srv2.Client(), srv2.URL+"/v1/reports", nil, studyParts(f.studies[0])...)
	if resp.StatusCode != 504 || decodeError(t, b).Error.Code != CodeTimeout {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestQueueFull fills the queue while the only worker is held, and checks
// that the next request is refused at once with 429 and Retry-After, and
// that the admitted ones are then answered.
func TestQueueFull(t *testing.T) {
	f := tinyFixture(t)
	for _, batching := range []bool{true, false} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			opts := []Option{WithQueue(3)}
			if !batching {
				opts = append(opts, WithoutBatching())
			}
			h := newHandler(t, opts...)
			g := newGate(h)
			srv := server(t, h)
			codes := make(chan int, 3)
			for i := range 3 {
				go func() {
					resp, _ := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[i])...)
					codes <- resp.StatusCode
				}()
			}
			<-g.entered
			waitFor(func() bool { return h.m.admitted.Load() == 3 && h.decoding.Load() == 0 })
			for range 2 {
				resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[3])...)
				ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if resp.StatusCode != 429 || decodeError(t, b).Error.Code != CodeOverloaded || err != nil || ra < 1 || ra > 60 {
					t.Errorf("full queue: %d %s, Retry-After %q", resp.StatusCode, b, resp.Header.Get("Retry-After"))
				}
			}
			if q, f := metricValue(t, h, "radgen_queue_length"), metricValue(t, h, "radgen_in_flight"); q+f != 3 || f < 1 {
				t.Errorf("queue length %v and %v in flight while full", q, f)
			}
			close(g.open)
			for range 3 {
				if c := <-codes; c != 200 {
					t.Errorf("admitted request: %d", c)
				}
			}
			if got := metricValue(t, h, `radgen_requests_total{route="/v1/reports",outcome="overloaded"}`); got != 2 {
				t.Errorf("overloaded count %v", got)
			}
			// Room again.
			if resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[3])...); resp.StatusCode != 200 {
				t.Errorf("after the queue drained: %d %s", resp.StatusCode, b)
			}
		})
	}
}

func metricValue(t *testing.T, h *Handler, name string) float64 {
	t.Helper()
	var b strings.Builder
	h.m.write(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestConcurrentMatchesSequential sends every fixture study at once and
// compares the answers with one Generate call per study. The first two
// calls are held until every other request waits in the queue: batched,
// the freed workers take the rest in at most two calls; unbatched, each
// study has its own call and the reports are bit for bit those of
// sequential calls.
func TestConcurrentMatchesSequential(t *testing.T) {
	f := tinyFixture(t)
	want := sequential(t, memtrans.WithAttention())
	for _, batching := range []bool{true, false} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			opts := []Option{WithBatching(16, 5*time.Millisecond), WithConcurrency(2)}
			if !batching {
				opts = []Option{WithoutBatching(), WithConcurrency(2)}
			}
			h := newHandler(t, opts...)
			g := newGate(h)
			srv := server(t, h)
			got := make([]*reportResponse, len(f.studies))
			var wg sync.WaitGroup
			for i, s := range f.studies {
				wg.Go(func() {
					resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(s, "attention", "1", "study_id", s.id)...)
					if resp.StatusCode != 200 {
						t.Errorf("study %d: %d %s", i, resp.StatusCode, b)
						return
					}
					got[i] = decodeReport(t, b)
				})
			}
			// Both workers hold a call; the other studies wait in the queue.
			<-g.entered
			<-g.entered
			waitFor(func() bool { return h.m.admitted.Load() == int64(len(f.studies)) && h.decoding.Load() == 0 })
			close(g.open)
			wg.Wait()
			if t.Failed() {
				return
			}
			sizes := map[int]int{}
			for i, r := range got {
				if r.StudyID != f.studies[i].id {
					t.Fatalf("answer %d is for %q", i, r.StudyID)
				}
				// Batched decoding runs the same arithmetic in a different
				// order inside the matrix products: the words are the same,
				// the log-probabilities within float32 rounding.
				tol := 0.0
				if batching {
					tol = 1e-4
				}
				sameReport(t, r, want[i], tol)
				sizes[r.Timings.Batch]++
			}
			if batching {
				// The studies that waited while both workers were held went
				// to the freed workers in at most two calls: four calls in
				// all, whatever the two held ones took (a burst of uploads
				// may fill them with several studies each). A call of n
				// studies gives n answers of batch size n.
				calls := 0
				for n, answers := range sizes {
					calls += answers / n
				}
				if calls > 4 {
					t.Errorf("%d calls, batch sizes %v", calls, sizes)
				}
			} else if sizes[1] != len(f.studies) {
				t.Errorf("batch sizes %v without batching", sizes)
			}
		})
	}
}

func TestClose(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t)
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server(t, h)
	if !h.Ready() {
		t.Fatal("not ready after warm-up")
	}
	h.Close()
	h.Close()
	if h.Ready() {
		t.Error("ready after Close")
	}
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0])...)
	if resp.StatusCode != 503 || decodeError(t, b).Error.Code != CodeUnavailable {
		t.Errorf("after Close: %d %s", resp.StatusCode, b)
	}
}

// FuzzReadUpload feeds arbitrary bodies to the upload parser: it never
// panics, and what it accepts respects the limits.
func FuzzReadUpload(f *testing.F) {
	fx := tinyFixture(f)
	b, _ := multipartBody(f, studyParts(fx.studies[0], "beam_size", "2", "attention", "1")...)
	f.Add(b.Bytes())
	b, _ = multipartBody(f, part{field: "view", name: "x.dcm", body: append(make([]byte, 128), "DICM"...)})
	f.Add(b.Bytes())
	f.Add([]byte("--B\r\n\r\n--B--\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		// The writer's boundary is random; take it from the body.
		boundary := "B"
		if i := bytes.Index(body, []byte("\r\n")); i > 2 && body[0] == '-' && body[1] == '-' {
			boundary = string(body[2:i])
		}
		lim := limits{maxViews: 2, maxPixels: 128 * 128, maxBeam: 4, maxLen: 60}
		u, e := readUpload(context.Background(), "multipart/form-data; boundary=\""+strings.ReplaceAll(boundary, `"`, "")+"\"", nil, bytes.NewReader(body), lim, nil)
		if e == nil {
			e = u.decode(context.Background(), 0, lim.maxPixels, false, nil, context.Background())
			if e != nil {
				u = nil
			}
		}
		if (u == nil) == (e == nil) {
			t.Fatalf("upload %v, error %v", u, e)
		}
		if e != nil {
			if e.status < 400 || e.code == "" || e.message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if len(u.views) == 0 || len(u.views) > lim.maxViews || u.beam > lim.maxBeam || u.maxLen > lim.maxLen {
			t.Fatalf("accepted %d views, beam %d, max length %d", len(u.views), u.beam, u.maxLen)
		}
		for _, px := range u.views {
			if int64(px.W)*int64(px.H) > lim.maxPixels || len(px.Pix) != px.W*px.H*px.C {
				t.Fatalf("view %dx%dx%d, %d bytes", px.W, px.H, px.C, len(px.Pix))
			}
		}
	})
}
