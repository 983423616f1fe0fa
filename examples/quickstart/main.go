// Command quickstart is radgen's first run: on a fresh machine, with nothing
// downloaded, it writes a set of synthetic chest films with known findings,
// trains a tiny memory-driven Transformer (R2Gen) on them, writes reports for
// the held-out films, prints their scores and a sample, and saves attention
// maps of the sample's words over its frontal view.
//
//	go run ./examples/quickstart [-out dir] [-epochs n]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/synth"
)

func main() {
	o := synth.Defaults
	out := flag.String("out", "", "working directory (default: a new temporary directory)")
	flag.IntVar(&o.Epochs, "epochs", o.Epochs, "training epochs")
	flag.IntVar(&o.Train, "train", o.Train, "synthetic training studies")
	flag.IntVar(&o.Test, "test", o.Test, "synthetic test studies")
	flag.IntVar(&o.Size, "size", o.Size, "film size in pixels")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the data set and the model")
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string, o synth.Options) error {
	start := time.Now()
	if dir == "" {
		d, err := os.MkdirTemp("", "radgen-quickstart-")
		if err != nil {
			return err
		}
		dir = d
	}
	fmt.Printf("radgen quickstart: %d synthetic studies (two %d×%d films each) in %s\n", o.Train+o.Test+max(1, o.Test/2), o.Size, o.Size, dir)
	bar := newBar(os.Stderr)
	o.Dir, o.AttentionExample = dir, true
	o.Progress = func(p memtrans.Progress) {
		bar.set(p.Epoch*p.Batches+p.Batch, p.Epochs*p.Batches, fmt.Sprintf("epoch %d/%d loss %.3f", p.Epoch+1, p.Epochs, p.Loss))
	}
	res, err := synth.Run(ctx, o)
	if err != nil {
		return err
	}
	bar.done()
	defer res.Model.Close()
	sc, ce := res.Scores, res.Efficacy
	fmt.Printf("trained %d parameters in %s; final training loss %.3f\n", res.Params, res.TrainTime.Round(time.Second), res.History[len(res.History)-1].Loss)
	fmt.Printf("\nheld-out scores (%d studies, beam 3):\n", len(res.Reports))
	fmt.Printf("  BLEU-1 %.3f  BLEU-2 %.3f  BLEU-3 %.3f  BLEU-4 %.3f\n", sc.BLEU[0], sc.BLEU[1], sc.BLEU[2], sc.BLEU[3])
	fmt.Printf("  ROUGE-L %.3f  CIDEr-D %.3f  %s %.3f\n", sc.ROUGEL, sc.CIDErD, sc.METEORName, sc.METEOR)
	fmt.Printf("  clinical efficacy (labeler on the reports vs the films' findings): micro P %.3f R %.3f F1 %.3f\n",
		ce.Micro.Precision, ce.Micro.Recall, ce.Micro.F1)
	for obs := chexpert.Observation(0); obs < chexpert.NumObservations; obs++ {
		if ce.Support[obs] > 0 {
			fmt.Printf("    %-20s support %3d  F1 %.3f\n", obs, ce.Support[obs], ce.PerObservation[obs].F1)
		}
	}
	r := res.Reports[0]
	fmt.Printf("\nsample (%s):\n  reference: %s\n  generated: %s\n", r.StudyID, res.References[0], r.Text)

	attDir := filepath.Join(dir, "attention")
	if err := os.MkdirAll(attDir, 0o755); err != nil {
		return err
	}
	n := 0
	for t, w := range strings.Fields(r.Text) {
		if w == "." || n == 8 {
			continue
		}
		f, err := os.Create(filepath.Join(attDir, fmt.Sprintf("%02d_%s.png", t, w)))
		if err != nil {
			return err
		}
		err = memtrans.WriteAttentionPNG(f, res.Studies[0].Views[0], r, t, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n++
	}
	fmt.Printf("\nattention maps of %d words over the frontal view: %s\n", n, attDir)
	fmt.Printf("done in %s\n", time.Since(start).Round(time.Second))
	return nil
}
