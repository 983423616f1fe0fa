package cli

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// The command serves a saved model and, on shutdown, finishes the request
// in flight before it returns.
func TestServeAndShutdown(t *testing.T) {
	path, st := tinyCheckpoint(t), tinyStudy(t)

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := serverConfig{model: path, addr: "127.0.0.1:0", queue: 4, concurrency: 1, maxBatch: 4, batchWait: time.Millisecond,
		timeout: time.Minute, maxUpload: 1 << 20, maxPixels: 1 << 20, token: "t0ken"}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runServer(ctx, c, log, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	base := "http://" + addr

	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()

	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for v, film := range st.Films {
		f, _ := w.CreateFormFile("view", fmt.Sprintf("%d.png", v))
		png.Encode(f, film)
	}
	w.WriteField("beam_size", "8") // a long generation: 8 beams of up to max_length tokens
	w.Close()
	type answer struct {
		status int
		body   string
		err    error
	}
	// send posts the study and returns where its answer will arrive.
	send := func() chan answer {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/reports", bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", w.FormDataContentType())
		req.Header.Set("Authorization", "Bearer t0ken")
		answers := make(chan answer, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{status: resp.StatusCode, body: string(b)}
		}()
		return answers
	}
	// Shut down once a request is being served. A fast machine may answer
	// one before a poll of the metrics sees it in flight: then the test
	// checks that answer and sends the study again.
	answers := send()
	for tries := 1; ; {
		select {
		case a := <-answers:
			if a.err != nil || a.status != 200 {
				t.Fatalf("request before shutdown: %d %v %.200s", a.status, a.err, a.body)
			}
			if tries++; tries > 100 {
				t.Fatal("no request seen in flight in 100 tries")
			}
			answers = send()
		default:
		}
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 401 {
			req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer t0ken")
			if resp, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if strings.Contains(string(b), "radgen_in_flight 1\n") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	a := <-answers
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"text"`) {
		t.Errorf("request in flight during shutdown: %d %v %.200s", a.status, a.err, a.body)
	}
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
	for _, want := range []string{"model loaded", "listening", "model ready", "shutting down", "level=INFO msg=report", "stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// A shutdown with an upload stalled halfway cuts it at once: run returns
// within the grace, without "context deadline exceeded", although the
// upload's own deadline is minutes away.
func TestShutdownCutsStalledUpload(t *testing.T) {
	path := tinyCheckpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := serverConfig{model: path, addr: "127.0.0.1:0", queue: 4, concurrency: 1, maxBatch: 4, batchWait: time.Millisecond,
		timeout: 10 * time.Minute, maxUpload: 16 << 20, maxPixels: 1 << 20, upload: 10 * time.Minute, shutdown: 5 * time.Second}
	var logs bytes.Buffer
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runServer(ctx, c, slog.New(slog.NewTextHandler(&logs, nil)), ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n", 10<<20)
	fmt.Fprintf(conn, "--B\r\nContent-Disposition: form-data; name=\"view\"; filename=\"0.png\"\r\n\r\n\x89PNG\r\n\x1a\n")
	// Wait until the handler reads the body.
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "radgen_uploads 1\n") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	// The stalled client got an answer (503) or a closed connection.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	b, _ := io.ReadAll(conn)
	if len(b) > 0 && !strings.Contains(string(b), " 503 ") {
		t.Errorf("the stalled upload got %.200q", b)
	}
}

// tinyStudy returns the synthetic study tinyCheckpoint's vocabulary comes
// from: two 64² films and a report.
func tinyStudy(t *testing.T) data.SynthStudy {
	st, err := data.GenerateStudy(data.SynthConfig{Train: 1, Width: 64, Height: 64, Seed: 2}, "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tinyCheckpoint saves a tiny random R2Gen model and returns its path.
func tinyCheckpoint(t *testing.T) string {
	st := tinyStudy(t)
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{st.Study.Report})
	if err != nil {
		t.Fatal(err)
	}
	mc := memtrans.R2GenTiny(tok.Len() + 1)
	mc.ImageSize, mc.ResizeTo = 64, 64
	m, err := memtrans.New(mc, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(t.TempDir(), "tiny.radgen")
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The PACS flags: credentials need -pacs, one kind at a time, and -pacs a
// DICOMweb URL; all is checked before a model is loaded or trained.
func TestPACSFlags(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range []serverConfig{
		{pacsUser: "radgen"},
		{pacsToken: true},
		{pacs: "http://127.0.0.1:8042/dicom-web", pacsUser: "radgen", pacsToken: true},
		{pacs: "ftp://pacs/dicom-web"},
	} {
		if err := runServer(context.Background(), c, log, nil); err == nil || !strings.Contains(err.Error(), "-pacs") {
			t.Errorf("%+v: %v", c, err)
		}
	}
	t.Setenv("RADGEN_PACS_TOKEN", "s3cret")
	cl, err := pacsClient(serverConfig{pacs: "http://127.0.0.1:8042/dicom-web/", pacsToken: true}, log)
	if err != nil || cl.URL() != "http://127.0.0.1:8042/dicom-web" {
		t.Errorf("%v %v", cl, err)
	}
}

// ServerMain's exit status: 0 for -h, 2 for a bad flag or an argument,
// 1 (logged) when the service fails; radgen serve reports the same through
// Main. Nothing is served: -pacs-user without -pacs fails first.
func TestServerMainStatus(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "-shutdown-grace"},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"model.radgen"}, 2, `unexpected argument "model.radgen"`},
		{[]string{"-pacs-user", "radgen"}, 1, "-pacs-user and -pacs-token need -pacs"},
	} {
		var stdout, stderr bytes.Buffer
		if code := ServerMain(ctx, c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("%q: status %d, want %d; stdout %q, stderr %q (want %q)", c.args, code, c.code, stdout.String(), stderr.String(), c.want)
		}
	}
	var stderr bytes.Buffer
	if code := Main(ctx, []string{"serve", "-pacs-token"}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "radgen serve: -pacs-user and -pacs-token need -pacs") {
		t.Errorf("radgen serve -pacs-token: status %d, %q", code, stderr.String())
	}
}
