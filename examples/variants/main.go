// Command variants trains the memory-driven Transformer's variants on the
// same synthetic chest films with the same budget and prints one table:
// BLEU-4, ROUGE-L, clinical-efficacy F1 and parameters per configuration
// (issue 9's comparison).
//
//	go run ./examples/variants [-out dir] [-epochs n] [-train n] [-test n]
//
// The rows are R2Gen's ablations BASE, BASE+RM and BASE+RM+MCLN (R2Gen),
// layer-wise multi-view decoding with GCA (soft integration from scratch,
// and continued from the trained R2Gen row for a third more epochs, the
// paper's recipe), R2Gen with Mem2Mem in place of the relational memory,
// the Meshed-Memory Transformer and METransformer (its report chosen by
// expert voting).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/radgen/radgen/memtrans/synth"
)

func main() {
	o := synth.Defaults
	out := flag.String("out", "", "working directory (default: a new temporary directory)")
	flag.IntVar(&o.Epochs, "epochs", o.Epochs, "training epochs of a run from scratch")
	flag.IntVar(&o.Train, "train", o.Train, "synthetic training studies")
	flag.IntVar(&o.Test, "test", o.Test, "synthetic test studies")
	flag.IntVar(&o.Size, "size", o.Size, "film size in pixels")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the data set and the models")
	only := flag.String("only", "", "comma-separated row names to run (default: all)")
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *out, *only, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, dir, only string, o synth.Options) error {
	start := time.Now()
	if dir == "" {
		d, err := os.MkdirTemp("", "radgen-variants-")
		if err != nil {
			return err
		}
		dir = d
	}
	o.Dir = dir
	specs := specs(o.Epochs)
	if only != "" {
		keep := map[string]bool{}
		for _, n := range strings.Split(only, ",") {
			keep[strings.TrimSpace(n)] = true
		}
		var sel []spec
		for _, s := range specs {
			// A continued row needs the row it continues.
			if keep[s.Name] || (s.ContinueFrom == "" && wantedBy(specs, keep, s.Name)) {
				sel = append(sel, s)
			}
		}
		specs = sel
	}
	fmt.Fprintf(w, "radgen variants: %d training and %d test studies (%d×%d films) in %s, %d epochs from scratch\n",
		o.Train, o.Test, o.Size, o.Size, dir, o.Epochs)
	rows, err := compare(ctx, o, specs, func(r row) {
		fmt.Fprintf(os.Stderr, "%s: loss %.3f → %.3f, BLEU-4 %.3f (%s)\n", r.Name, r.FirstLoss, r.LastLoss, r.BLEU4, r.TrainTime.Round(time.Second))
	})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tepochs\tparameters\tBLEU-4\tROUGE-L\tCE F1\tfinal loss\ttrain time\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n", r.Name, r.Epochs, r.Params, r.BLEU4, r.ROUGEL, r.CEF1, r.LastLoss, r.TrainTime.Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "CE F1: micro F1 of the CheXpert-style labeler on the reports against the films' findings. Done in %s.\n", time.Since(start).Round(time.Second))
	return nil
}

// wantedBy reports whether a kept row continues the row named name.
func wantedBy(specs []spec, keep map[string]bool, name string) bool {
	for _, s := range specs {
		if keep[s.Name] && s.ContinueFrom == name {
			return true
		}
	}
	return false
}
