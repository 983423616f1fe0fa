// Command variant trains, checks, saves, loads, decodes and serves a report
// generator that the radgen library does not have: package mclnm2 beside
// this file, R2Gen's MCLN decoder layers attending through the
// Meshed-Memory Transformer's memory-augmented attention. Everything but
// the model is the library's: memtrans.Trainer, Save and Load, Generate,
// serve.New.
//
//	go run ./examples/variant             # synthetic films in a temporary directory
//	go run ./examples/variant -serve :8080 # then serve the model until interrupted
//
// examples/variant/radgen is the radgen command for the variant: its main
// imports mclnm2 and calls memtrans/cli's Main, and then generates from,
// converts, evaluates and serves the variant's checkpoints.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/radgen/radgen/examples/variant/mclnm2"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/serve"
	"github.com/radgen/radgen/vision"
)

func main() {
	epochs := flag.Int("epochs", 6, "training epochs")
	studies := flag.Int("studies", 24, "synthetic training studies")
	addr := flag.String("serve", "", "serve the trained model on this address until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *epochs, *studies, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "variant:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, epochs, studies int, addr string) error {
	dir, err := os.MkdirTemp("", "radgen-variant-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// Synthetic films with known findings, and R2Gen's tokenizer.
	ann, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: studies, Val: 4, Test: 4, Width: 64, Height: 64, Seed: 3})
	if err != nil {
		return err
	}
	texts, err := ann.Reports("train")
	if err != nil {
		return err
	}
	tok, err := data.BuildTokenizer(data.IUXray, 1, texts)
	if err != nil {
		return err
	}

	// The library's tiny extractor and images, the variant as the
	// encoder–decoder.
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	cfg.EncoderDecoder = mclnm2.Tiny(tok.Len()+1, cfg.Vision.OutChannels())
	model, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		return err
	}
	defer model.Close()

	// Train with a frozen extractor.
	images := filepath.Join(dir, "images")
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: images})
	if err != nil {
		return err
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(8), data.WithShuffle(true), data.WithSeed(1), data.WithTransform(vision.TestTransform(cfg.ImageSize)))
	if err != nil {
		return err
	}
	tc := memtrans.TrainConfig{Epochs: epochs, LR: 2e-3, AMSGrad: true, ClipValue: 0.1, StepSize: 10, Gamma: 0.5, Seed: 1, FreezeExtractor: true, CalibrateBatches: 2}
	trainer, err := memtrans.NewTrainer(model, tc, loader, memtrans.WithProgress(func(p memtrans.Progress) {
		if p.Batch == p.Batches {
			fmt.Printf("epoch %d/%d: loss %.3f\n", p.Epoch+1, p.Epochs, p.EpochLoss)
		}
	}))
	if err != nil {
		return err
	}
	if err := trainer.Run(ctx); err != nil {
		return err
	}
	h := trainer.History()
	fmt.Printf("%s (%s): loss %.3f → %.3f\n", mclnm2.Name, "memtrans.Trainer", h[0].Loss, h[len(h)-1].Loss)

	// Save, and load into a fresh model.
	path := filepath.Join(dir, "variant.radgen")
	if err := model.SaveFile(path); err != nil {
		return err
	}
	loaded, err := memtrans.LoadFile(path)
	if err != nil {
		return err
	}
	defer loaded.Close()

	// Beam search through the incremental decoding, checked against
	// teacher forcing over each report.
	test, _ := ann.Split("test")
	var held []memtrans.Study
	for _, s := range test {
		st, err := loaded.StudyFromAnnotation(s, images)
		if err != nil {
			return err
		}
		held = append(held, st)
	}
	reports, err := loaded.Generate(ctx, held, memtrans.WithBeamSize(3))
	if err != nil {
		return err
	}
	feats, err := loaded.Features(ctx, held)
	if err != nil {
		return err
	}
	worst, n, err := arch.TeacherForcingGap(ctx, loaded.EncoderDecoder(), feats, 3, 60)
	if err != nil {
		return err
	}
	fmt.Printf("decoding check: incremental beam-3 log-probabilities vs teacher forcing, max |Δ| = %.2g over %d tokens of %d studies\n", worst, n, len(held))
	if worst > 1e-4 {
		return fmt.Errorf("incremental decoding differs from teacher forcing by %g", worst)
	}
	fmt.Printf("report for %s: %s\n", reports[0].StudyID, reports[0].Text)

	// The report service, as a hospital's client would call it.
	h2, err := serve.New(loaded, serve.WithModelName(mclnm2.Name))
	if err != nil {
		return err
	}
	text, err := askService(h2, filepath.Join(images, test[0].ImagePath[0]), filepath.Join(images, test[0].ImagePath[1]))
	if err != nil {
		return err
	}
	fmt.Printf("service: %s\n", text)
	if addr == "" {
		return nil
	}
	srv := &http.Server{Addr: addr, Handler: h2}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Printf("serving on %s\n", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// askService posts a study's two views to the handler's /v1/reports.
func askService(h http.Handler, views ...string) (string, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, v := range views {
		b, err := os.ReadFile(v)
		if err != nil {
			return "", err
		}
		w, _ := mw.CreateFormFile("view", filepath.Base(filepath.Dir(v))+"-"+filepath.Base(v))
		w.Write(b)
	}
	mw.Close()
	resp, err := http.Post(srv.URL+"/v1/reports", mw.FormDataContentType(), &body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("service answered %s", resp.Status)
	}
	return out.Text, nil
}
