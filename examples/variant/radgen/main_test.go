package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/examples/variant/mclnm2"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/cli"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// trainVariant trains the variant for one epoch on a few synthetic films
// and saves it; it returns the model, the checkpoint's path, the
// annotation and the image folder.
func trainVariant(t *testing.T, dir string) (*memtrans.Model, string, *data.Annotation, string) {
	t.Helper()
	ctx := context.Background()
	ann, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: 8, Test: 2, Width: 64, Height: 64, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	texts, err := ann.Reports("train")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 1, texts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1) // its extractor and images
	cfg.EncoderDecoder = mclnm2.Tiny(tok.Len()+1, cfg.Vision.OutChannels())
	model, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	images := filepath.Join(dir, "images")
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: images})
	if err != nil {
		t.Fatal(err)
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(8), data.WithSeed(1), data.WithTransform(vision.TestTransform(cfg.ImageSize)))
	if err != nil {
		t.Fatal(err)
	}
	tc := memtrans.TrainConfig{Epochs: 1, LR: 2e-3, AMSGrad: true, ClipValue: 0.1, StepSize: 10, Gamma: 0.5, Seed: 1, FreezeExtractor: true, CalibrateBatches: 1}
	tr, err := memtrans.NewTrainer(model, tc, loader)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "variant.radgen")
	if err := model.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	return model, path, ann, images
}

// logBuffer is a writer the service logs to while the test reads it (an
// example imports only public packages, so not internal/testutil's).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The variant's radgen — this package's main, cli.Main with mclnm2
// imported — generates from a checkpoint of the variant the reports the
// trained model writes, and serves it: radgen serve on a loopback port
// answers a study with the same report.
func TestVariantRadgen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model, ckpt, ann, images := trainVariant(t, dir)

	// radgen generate, as main runs it.
	out := filepath.Join(dir, "reports.json")
	var stdout, stderr bytes.Buffer
	if code := cli.Main(ctx, []string{"generate", "-model", ckpt, "-ann", filepath.Join(dir, "annotation.json"), "-images", images, "-beam", "2", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("radgen generate: status %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID     string  `json:"id"`
		Report string  `json:"report"`
		LogP   float64 `json:"log_prob"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	test, _ := ann.Split("test")
	var studies []memtrans.Study
	for _, s := range test {
		st, err := model.StudyFromAnnotation(s, images)
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, st)
	}
	want, err := model.Generate(ctx, studies, memtrans.WithBeamSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 2 {
		t.Fatalf("%d reports from radgen generate, %d from the model", len(got), len(want))
	}
	for i, w := range want {
		if got[i].ID != w.StudyID || got[i].Report != w.Text || got[i].LogP != w.LogProb || w.Text == "" {
			t.Errorf("study %s: radgen wrote %q (%v), the model %q (%v)", w.StudyID, got[i].Report, got[i].LogP, w.Text, w.LogProb)
		}
	}
	t.Logf("%s: %q", got[0].ID, got[0].Report)

	// radgen serve on a loopback port.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	logs := &logBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(sctx, []string{"serve", "-model", ckpt, "-addr", "127.0.0.1:0"}, io.Discard, logs)
	}()
	listening := regexp.MustCompile(`addr=(http://127\.0\.0\.1:[0-9]+)`)
	var base string
	for deadline := time.Now().Add(2 * time.Minute); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("radgen serve ended with status %d:\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("radgen serve is not listening after 2 minutes:\n%s", logs.String())
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("radgen serve is not ready after 2 minutes:\n%s", logs.String())
		}
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for v, p := range test[0].ImagePath {
		film, err := os.ReadFile(filepath.Join(images, p))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := mw.CreateFormFile("view", test[0].ID+"-"+string(rune('a'+v))+".png")
		w.Write(film)
	}
	mw.WriteField("beam_size", "2")
	mw.Close()
	resp, err := http.Post(base+"/v1/reports", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Text string `json:"text"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || answer.Text != want[0].Text {
		t.Errorf("radgen serve: %d %v %q, want %q", resp.StatusCode, err, answer.Text, want[0].Text)
	}
	stop()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("radgen serve: status %d after a requested stop\n%s", code, logs.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("radgen serve still running 2 minutes after its stop:\n%s", logs.String())
	}
}

// The stock radgen, built without mclnm2, refuses the variant's checkpoint
// and says which architecture it lacks and what to build.
func TestStockRadgenLacksTheVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds examples/radgen")
	}
	dir := t.TempDir()
	_, ckpt, ann, images := trainVariant(t, dir)
	bin := filepath.Join(dir, "bin")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin+string(filepath.Separator), "github.com/radgen/radgen/examples/radgen")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/radgen: %v\n%s", err, out)
	}
	test, _ := ann.Split("test")
	cmd := exec.Command(filepath.Join(bin, "radgen"), "generate", "-model", ckpt,
		filepath.Join(images, test[0].ImagePath[0]), filepath.Join(images, test[0].ImagePath[1]))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("the stock radgen: %v\n%s", err, out)
	}
	for _, want := range []string{`unregistered architecture "mcln-m2"`, "import the package that registers it",
		"build a radgen whose main imports the architecture's package and calls cli.Main"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the stock radgen's error lacks %q:\n%s", want, out)
		}
	}
}
