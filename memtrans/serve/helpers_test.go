package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// testStudy is a synthetic study as files.
type testStudy struct {
	id    string
	names []string
	files [][]byte // PNG
	paths []string // the same files on disk
}

type fixture struct {
	model   *memtrans.Model
	studies []testStudy
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
	fixDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix != nil {
		fix.model.Close()
	}
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

// fixtureStudies is how many synthetic studies the tests share.
const fixtureStudies = 16

// tinyFixture returns a tiny R2Gen model with random weights (TinyConfig:
// two 64² views, d_model 64) over a vocabulary from synthetic reports, and
// synthetic studies as PNG files. It is built once per test binary.
func tinyFixture(tb testing.TB) *fixture {
	fixOnce.Do(func() { fix, fixErr = newFixture() })
	if fixErr != nil {
		tb.Fatal(fixErr)
	}
	return fix
}

func newFixture() (*fixture, error) {
	dir, err := os.MkdirTemp("", "radgen-serve-test-")
	if err != nil {
		return nil, err
	}
	fixDir = dir
	cfg := data.SynthConfig{Train: fixtureStudies, Width: 64, Height: 64, Seed: 7}
	f := &fixture{}
	var reports []string
	for i := range fixtureStudies {
		s, err := data.GenerateStudy(cfg, "train", i)
		if err != nil {
			return nil, err
		}
		reports = append(reports, s.Study.Report)
		ts := testStudy{id: s.Study.ID}
		for v, film := range s.Films {
			var b bytes.Buffer
			if err := png.Encode(&b, film); err != nil {
				return nil, err
			}
			name := fmt.Sprintf("%d.png", v)
			p := filepath.Join(dir, s.Study.ID, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
				return nil, err
			}
			ts.names, ts.files, ts.paths = append(ts.names, name), append(ts.files, b.Bytes()), append(ts.paths, p)
		}
		f.studies = append(f.studies, ts)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 1, reports)
	if err != nil {
		return nil, err
	}
	mc := memtrans.R2GenTiny(tok.Len() + 1)
	mc.ImageSize, mc.ResizeTo = 64, 64
	f.model, err = memtrans.New(mc, tok, 3)
	return f, err
}

// part is one part of a multipart body: a file when name is set.
type part struct {
	field, name string
	body        []byte
}

// multipartBody encodes parts; it returns the body and its content type.
func multipartBody(tb testing.TB, parts ...part) (*bytes.Buffer, string) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		var pw io.Writer
		var err error
		if p.name != "" {
			pw, err = w.CreateFormFile(p.field, p.name)
		} else {
			pw, err = w.CreateFormField(p.field)
		}
		if err != nil {
			tb.Fatal(err)
		}
		pw.Write(p.body)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return &b, w.FormDataContentType()
}

// studyParts returns a study's files as parts, followed by option fields
// given as name, value pairs.
func studyParts(s testStudy, fields ...string) []part {
	var ps []part
	for i := range s.files {
		ps = append(ps, part{field: "view", name: s.names[i], body: s.files[i]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		ps = append(ps, part{field: fields[i], body: []byte(fields[i+1])})
	}
	return ps
}

// post sends a report request and decodes the answer into out (a
// *reportResponse or *errorBody).
func post(tb testing.TB, client *http.Client, url string, hdr http.Header, parts ...part) (*http.Response, []byte) {
	tb.Helper()
	body, ct := multipartBody(tb, parts...)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}

// server starts h on a loopback test server.
func server(tb testing.TB, h *Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	return srv
}

// newHandler builds a handler over the fixture's model.
func newHandler(tb testing.TB, opts ...Option) *Handler {
	h, err := New(tinyFixture(tb).model, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func decodeReport(tb testing.TB, b []byte) *reportResponse {
	tb.Helper()
	var r reportResponse
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatalf("%v: %s", err, b)
	}
	return &r
}

func decodeError(tb testing.TB, b []byte) errorBody {
	tb.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		tb.Fatalf("not a JSON error (%v): %s", err, b)
	}
	return e
}
