package pacs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/memtrans/pacs"
	"github.com/radgen/radgen/vision"
)

var modelInfo = dicomsr.Model{Name: "radgen R2Gen tiny (test)", Version: "0.0.1", Checksum: "sha256:0123456789abcdef", Manufacturer: "radgen"}

// models caches the tiny models by their views: building one takes
// seconds under the race detector, and a model is safe for concurrent use.
var models struct {
	sync.Mutex
	dir    string
	byView map[int]*memtrans.Model
}

// tinyModel returns an untrained tiny generator reading views views (1:
// frontal, 2: frontal and lateral), saved at the returned path too. The
// test binary keeps it for the other tests.
func tinyModel(t testing.TB, views int) (*memtrans.Model, string) {
	t.Helper()
	models.Lock()
	defer models.Unlock()
	if models.dir == "" {
		d, err := os.MkdirTemp("", "radgen-pacs-test-")
		if err != nil {
			t.Fatal(err)
		}
		models.dir, models.byView = d, map[int]*memtrans.Model{}
	}
	p := filepath.Join(models.dir, fmt.Sprintf("tiny-%d.radgen", views))
	if m := models.byView[views]; m != nil {
		return m, p
	}
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal. The lungs are clear.", "No pneumothorax or effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	cfg.Views = views
	m, err := memtrans.New(cfg, tok, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(p); err != nil {
		t.Fatal(err)
	}
	models.byView[views] = m
	return m, p
}

// genOpts decode greedily and briefly: the tests check transport, not
// reports.
var genOpts = []memtrans.GenerateOption{memtrans.WithGreedy(false), memtrans.WithMaxLength(12)}

func client(t testing.TB, url string) *dicomweb.Client {
	t.Helper()
	c, err := dicomweb.New(url, dicomweb.WithBasicAuth(orthanctest.User, orthanctest.Password),
		dicomweb.WithRetry(dicomweb.Retry{Attempts: 2, Base: 10 * time.Millisecond, Max: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// store uploads instances by STOW-RS.
func store(t testing.TB, c *dicomweb.Client, files ...[]byte) {
	t.Helper()
	for _, f := range files {
		if _, err := c.Store(context.Background(), "", f); err != nil {
			t.Fatal(err)
		}
	}
}

// twoView returns a study's PA and lateral films.
func twoView(study string, modality string) [][]byte {
	return [][]byte{
		orthanctest.Film{Study: study, Series: study + ".1", SOP: study + ".1.1", ViewPosition: "PA", Modality: modality, Rows: 72, Columns: 64}.Bytes(),
		orthanctest.Film{Study: study, Series: study + ".2", SOP: study + ".2.1", ViewPosition: "LL", Modality: modality, Rows: 64, Columns: 72}.Bytes(),
	}
}

// srSeries lists a study's radgen SR series (QIDO-RS) and returns the
// SR instances' bytes (WADO-RS).
func srSeries(t testing.TB, c *dicomweb.Client, study string) (series []string, files [][]byte) {
	t.Helper()
	ctx := context.Background()
	all, err := c.SearchSeries(ctx, study, dicomweb.Query{Modalities: []string{"SR"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		uid := s.String(dicomweb.TagSeriesInstanceUID)
		series = append(series, uid)
		err := c.Retrieve(ctx, study, uid, "", func(p dicomweb.Part) error {
			b, err := io.ReadAll(p.Body)
			files = append(files, b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return series, files
}

// checkSR checks an SR retrieved from the PACS: it is radgen's, of the
// study, references the source instances, and dciodvfy (when installed)
// finds no error in it.
func checkSR(t testing.TB, study string, b []byte, sources []string) {
	t.Helper()
	info, err := vision.ReadDICOMInfo(strings.NewReader(string(b)), int64(len(b)))
	if err != nil {
		t.Fatalf("SR of %s: %v", study, err)
	}
	wantSeries, wantSOP := dicomsr.StudyUIDs(study, modelInfo)
	if info.Modality != "SR" || info.StudyInstanceUID != study || info.SeriesInstanceUID != wantSeries || info.SOPInstanceUID != wantSOP {
		t.Errorf("SR of %s: %+v", study, info)
	}
	for _, s := range sources {
		if !strings.Contains(string(b), s) {
			t.Errorf("SR of %s does not reference %s", study, s)
		}
	}
	dciodvfy, err := exec.LookPath("dciodvfy")
	if err != nil {
		t.Logf("dciodvfy is not installed (apt-get install dicom3tools): the SR of %s is not verified by it", study)
		return
	}
	p := filepath.Join(t.TempDir(), "sr.dcm")
	os.WriteFile(p, b, 0o644)
	out, _ := exec.Command(dciodvfy, p).CombinedOutput()
	if !strings.Contains(string(out), "BasicTextSR") {
		t.Errorf("dciodvfy did not recognise the SR of %s:\n%s", study, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "E:") || strings.HasPrefix(line, "Error") {
			t.Errorf("dciodvfy, SR of %s: %s", study, line)
		}
	}
}

// mllpListener acknowledges every HL7 message with AA and keeps them.
type mllpListener struct {
	ln  net.Listener
	mu  sync.Mutex
	got [][]byte
}

func listenMLLP(t testing.TB) *mllpListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &mllpListener{ln: ln}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			msg, err := hl7.ReadFrame(bufio.NewReader(c), 1<<20)
			if err == nil {
				l.mu.Lock()
				l.got = append(l.got, msg)
				l.mu.Unlock()
				ack, _ := hl7.NewACK(msg, "AA", "", time.Now())
				hl7.WriteFrame(c, ack)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return l
}

func (l *mllpListener) messages() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.got...)
}

func newWorker(t testing.TB, cfg pacs.Config) *pacs.Worker {
	t.Helper()
	if cfg.ModelInfo.Name == "" {
		cfg.ModelInfo = modelInfo
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.Backoff.Base == 0 {
		cfg.Backoff = dicomweb.Retry{Attempts: 1, Base: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	}
	cfg.Generate = genOpts
	cfg.TempDir = t.TempDir()
	if cfg.MLLP != nil && cfg.JournalFile == "" {
		cfg.JournalFile = filepath.Join(cfg.TempDir, "hl7-journal.jsonl")
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := pacs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func uid(n int) string { return fmt.Sprintf("1.2.826.0.1.3680043.8.498.%d", n) }
