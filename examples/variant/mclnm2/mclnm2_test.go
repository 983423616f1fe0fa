package mclnm2_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/examples/variant/mclnm2"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/memtrans/serve"
	"github.com/radgen/radgen/vision"
)

// An architecture the library does not have goes through the whole library
// from outside it: Trainer, Save, Load, Generate, the service and the FHIR
// writer.
func TestVariantThroughTheLibrary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ann, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: 24, Val: 4, Test: 4, Width: 64, Height: 64, Seed: 3})
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
	c := mclnm2.Tiny(tok.Len()+1, cfg.Vision.OutChannels())
	cfg.EncoderDecoder = c
	if got := cfg.Architecture(); got != mclnm2.Name {
		t.Fatalf("architecture %q", got)
	}
	model, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()

	// Trainer: the loss falls.
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: dir + "/images"})
	if err != nil {
		t.Fatal(err)
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(8), data.WithShuffle(true), data.WithSeed(1), data.WithTransform(vision.TestTransform(cfg.ImageSize)))
	if err != nil {
		t.Fatal(err)
	}
	tc := memtrans.TrainConfig{Epochs: 6, LR: 2e-3, AMSGrad: true, ClipValue: 0.1, StepSize: 10, Gamma: 0.5, Seed: 1, FreezeExtractor: true, CalibrateBatches: 2}
	tr, err := memtrans.NewTrainer(model, tc, loader)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h := tr.History()
	first, last := h[0].Loss, h[len(h)-1].Loss
	t.Logf("loss %.3f → %.3f over %d epochs", first, last, len(h))
	if !(last < 0.8*first) {
		t.Fatalf("the loss did not fall: %.3f → %.3f", first, last)
	}

	// Save and Load into fresh state.
	var buf bytes.Buffer
	if err := model.Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved := buf.Bytes()
	loaded, err := memtrans.Load(bytes.NewReader(saved))
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	if got, ok := loaded.Config().EncoderDecoder.(mclnm2.Config); !ok || got != c {
		t.Fatalf("loaded %+v", loaded.Config().EncoderDecoder)
	}

	// Generate with beam 3; the incremental decoding equals teacher forcing.
	test, _ := ann.Split("test")
	var studies []memtrans.Study
	for _, s := range test {
		st, err := loaded.StudyFromAnnotation(s, dir+"/images")
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, st)
	}
	reps, err := loaded.Generate(ctx, studies, memtrans.WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	before, err := model.Generate(ctx, studies, memtrans.WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	feats, err := loaded.Features(ctx, studies)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		if r.Text != before[i].Text || r.LogProb != before[i].LogProb {
			t.Fatalf("study %d after loading: %q (%v), before %q (%v)", i, r.Text, r.LogProb, before[i].Text, before[i].LogProb)
		}
		if len(r.Tokens) == 0 {
			t.Fatalf("study %d: empty report", i)
		}
	}
	// The library's check: every beam hypothesis of every study, reordered
	// at each step, against teacher forcing.
	worst, tokens, err := arch.TeacherForcingGap(ctx, loaded.EncoderDecoder(), feats, 3, 60)
	if err != nil {
		t.Fatal(err)
	}
	if tokens < len(reps) {
		t.Fatalf("the check compared %d tokens", tokens)
	}
	// Half weights for an architecture that names no step matrices: all
	// its matrices, read in half precision, move the log-probabilities a
	// little, never not at all.
	half, err := memtrans.Load(bytes.NewReader(saved), memtrans.WithModelOptions(memtrans.WithHalfWeights()))
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	hreps, err := half.Generate(ctx, studies[:1], memtrans.WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	moved := 0.0
	for p := range min(len(hreps[0].Tokens), len(reps[0].Tokens)) {
		if hreps[0].Tokens[p] != reps[0].Tokens[p] {
			break
		}
		moved = max(moved, math.Abs(float64(hreps[0].TokenLogProbs[p]-reps[0].TokenLogProbs[p])))
	}
	t.Logf("half weights: max |Δ log p| = %.2g", moved)
	if moved == 0 || moved > 1e-2 {
		t.Fatalf("half weights moved the log-probabilities by %g", moved)
	}

	// The comparison can fail: another study's features give other
	// log-probabilities.
	{
		r := reps[0]
		in := append([]int{0}, r.Tokens[:len(r.Tokens)-1]...)
		g := radgen.NoGrad()
		lp, err := loaded.EncoderDecoder().LogProbs(g, g.IndexSelect(feats, 0, []int{1}), in, 1, len(in))
		if err != nil {
			t.Fatal(err)
		}
		v, d, other := lp.Dim(2), lp.To(radgen.CPU).Data(), 0.0
		for p, id := range r.Tokens {
			other = max(other, math.Abs(float64(d[p*v+id]-r.TokenLogProbs[p])))
		}
		if other < 1e-4 {
			t.Fatalf("another study's features give the same log-probabilities (%g)", other)
		}
	}
	t.Logf("beam 3: %q; incremental vs teacher forcing: max |Δ log p| = %.2g over %d tokens", reps[0].Text, worst, tokens)
	if worst > 1e-4 {
		t.Fatalf("incremental decoding differs from teacher forcing by %g", worst)
	}

	// The FHIR writer.
	dr, err := fhir.NewDiagnosticReport(reps[0], fhir.Study{InstanceUID: "2.25.1234", Reference: "Patient/1"}, fhir.Model{Name: mclnm2.Name, Version: "test"}, time.Unix(0, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(dr)
	if !bytes.Contains(js, []byte(`"DiagnosticReport"`)) {
		t.Fatalf("FHIR report %s", js)
	}

	// The service answers a report.
	hd, err := serve.New(loaded, serve.WithModelName("variant"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	defer srv.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for v := range 2 {
		w, _ := mw.CreateFormFile("view", test[0].ID+string(rune('a'+v))+".png")
		b, err := os.ReadFile(filepath.Join(dir, "images", test[0].ImagePath[v]))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	mw.WriteField("beam_size", "3")
	mw.Close()
	resp, err := http.Post(srv.URL+"/v1/reports", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("service: %d %v", resp.StatusCode, err)
	}
	if out.Text != reps[0].Text {
		t.Fatalf("service wrote %q, Generate %q", out.Text, reps[0].Text)
	}
}
