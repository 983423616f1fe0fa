package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/radgen/radgen/internal/boundedio"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// limits are the input limits every command takes as flags: the size
// budget of a model, and the bytes and pixels of every file read.
type limits struct {
	maxParams, maxActivations   *int64
	maxModelBytes, maxAnnBytes  *int64
	maxReportBytes, maxImgBytes *int64
	maxPixels                   *int64
	nonRegular                  *bool
}

// maxReportsBytes is the default limit of eval's -reports file.
const maxReportsBytes = 256 << 20

func limitFlags(fs *flag.FlagSet) *limits {
	return &limits{
		maxParams:      fs.Int64("max-params", memtrans.DefaultBudget().MaxParams, "largest model to build or load, in parameters"),
		maxActivations: fs.Int64("max-activations", memtrans.DefaultBudget().MaxActivations, "largest activations per study of a model, in float32 values"),
		maxModelBytes:  fs.Int64("max-model-bytes", memtrans.DefaultBudget().MaxCheckpointBytes, "largest decompressed checkpoint"),
		maxAnnBytes:    fs.Int64("max-ann-bytes", data.DefaultMaxAnnotationBytes, "largest annotation.json"),
		maxReportBytes: fs.Int64("max-reports-bytes", maxReportsBytes, "largest reports.json (eval)"),
		maxImgBytes:    fs.Int64("max-image-bytes", vision.DefaultMaxFileBytes, "largest image file"),
		maxPixels:      fs.Int64("max-pixels", vision.DefaultMaxPixels, "largest image, in pixels"),
		nonRegular:     fs.Bool("allow-nonregular", false, "read FIFOs and devices given as files (refused by default: a FIFO without a writer blocks)"),
	}
}

func (l *limits) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"-max-params", *l.maxParams}, {"-max-activations", *l.maxActivations}, {"-max-model-bytes", *l.maxModelBytes},
		{"-max-ann-bytes", *l.maxAnnBytes}, {"-max-reports-bytes", *l.maxReportBytes}, {"-max-image-bytes", *l.maxImgBytes},
		{"-max-pixels", *l.maxPixels}} {
		if f.v <= 0 {
			return fmt.Errorf("%s %d: must be positive", f.name, f.v)
		}
	}
	return nil
}

func (l *limits) budget() memtrans.Budget {
	return memtrans.Budget{MaxParams: *l.maxParams, MaxActivations: *l.maxActivations, MaxCheckpointBytes: *l.maxModelBytes}
}

// modelOptions are the model options the limits set.
func (l *limits) modelOptions() []memtrans.Option {
	return []memtrans.Option{memtrans.WithBudget(l.budget()), memtrans.WithMaxPixels(*l.maxPixels), memtrans.WithImageOptions(l.imageOptions()...)}
}

func (l *limits) imageOptions() []vision.Option {
	opts := []vision.Option{vision.WithMaxPixels(*l.maxPixels), vision.WithMaxFileBytes(*l.maxImgBytes)}
	if *l.nonRegular {
		opts = append(opts, vision.WithNonRegularFiles())
	}
	return opts
}

// loadOptions are the checkpoint options, with the model's.
func (l *limits) loadOptions(model ...memtrans.Option) []memtrans.LoadOption {
	opts := []memtrans.LoadOption{memtrans.WithModelOptions(append(l.modelOptions(), model...)...)}
	if *l.nonRegular {
		opts = append(opts, memtrans.WithNonRegularCheckpoint())
	}
	return opts
}

func (l *limits) annotation(path string) (*data.Annotation, error) {
	if path == "" {
		return nil, errors.New("-ann is required")
	}
	opts := []data.FileOption{data.WithMaxFileBytes(*l.maxAnnBytes)}
	if *l.nonRegular {
		opts = append(opts, data.WithNonRegularFiles())
	}
	return data.OpenAnnotation(path, opts...)
}

// open opens an input file (a checkpoint to resume, a manifest) as the
// limits allow.
func (l *limits) open(path string) (*os.File, error) {
	return boundedio.Open(path, *l.nonRegular)
}

// readReports reads eval's -reports file.
func (l *limits) readReports(path string) ([]generated, error) {
	if path == "" {
		return nil, errors.New("-reports is required (the reports.json written by radgen generate -o)")
	}
	b, err := boundedio.ReadFile(path, *l.maxReportBytes, *l.nonRegular)
	if err != nil {
		return nil, err
	}
	var gens []generated
	if err := json.Unmarshal(b, &gens); err != nil {
		return nil, fmt.Errorf("%s: not a reports.json of radgen generate: %w", path, err)
	}
	return gens, nil
}

// parseArgs parses flags wherever they are among the arguments (Go's flag
// package stops at the first non-flag, which would read "img.png -beam 1"
// as two more file names); "--" ends the flags. The flag set's messages
// and usage go to the command's stderr.
func (c *command) parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(c.stderr)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		// fs stopped at a positional argument: keep it, parse on.
		rest = append(rest, left[0])
		args = left[1:]
	}
}
