package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/radgen/radgen/memtrans"
)

// What -model may name, recognised from the file's first bytes (never its
// name):
//
//   - a native checkpoint (memtrans.Model.SaveFile, "RADGENv1"): the
//     architecture, the vocabulary and the weights, nothing else needed;
//   - R2Gen weights: a PyTorch checkpoint as R2Gen's trainer saves it
//     (model_best.pth: a zip, or a legacy pickle), DataParallel's "module."
//     names included, or a safetensors file of the same state_dict names.
//     They carry neither the vocabulary nor the head counts: R2Gen
//     rebuilds its tokenizer from the annotation.json it trained on at
//     every start, and so does -vocab here (with -threshold and -corpus);
//     -heads and -memory-heads are R2Gen's num_heads and rm_num_heads,
//     -max-seq-length its max_seq_length (see r2gen.go).
type modelKind int

const (
	kindUnknown modelKind = iota
	kindNative
	kindPyTorch
	kindSafetensors
)

func (k modelKind) String() string {
	return [...]string{"unknown", "radgen checkpoint", "PyTorch checkpoint", "safetensors weights"}[k]
}

// sniffModel recognises a model file from its first bytes and the file's
// size: the native magic, a zip (PyTorch since 1.6), a pickle's PROTO
// opcode (legacy PyTorch), or a safetensors header (a little-endian length
// that fits the file, then "{"). size is -1 when unknown (a pipe).
func sniffModel(head []byte, size int64) modelKind {
	switch {
	case bytes.HasPrefix(head, []byte("RADGENv1")):
		return kindNative
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return kindPyTorch
	case len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5:
		return kindPyTorch
	case len(head) >= 9 && head[8] == '{':
		if n := binary.LittleEndian.Uint64(head[:8]); n >= 2 && (size < 0 || (size >= 10 && n <= uint64(size-8))) {
			return kindSafetensors
		}
	}
	return kindUnknown
}

// modelFlags are the flags that say how to read -model.
type modelFlags struct {
	cmd         *command
	fs          *flag.FlagSet
	path        *string
	vocab       *string
	corpus      *string
	threshold   *int
	maxSeqLen   *int
	views       *int
	heads       *int
	memoryHeads *int
}

// r2genFlags are the flags that say how to read R2Gen weights, which a
// radgen checkpoint does not need.
var r2genFlags = []string{"vocab", "corpus", "threshold", "max-seq-length", "views", "heads", "memory-heads"}

func (c *command) newModelFlags(fs *flag.FlagSet) *modelFlags {
	return &modelFlags{
		cmd:         c,
		fs:          fs,
		path:        fs.String("model", "", "model: a radgen checkpoint (.radgen), or R2Gen weights (PyTorch .pth or safetensors; then -vocab)"),
		vocab:       fs.String("vocab", "", "R2Gen weights: the annotation.json R2Gen trained on (its --ann_path), whose train split gives the vocabulary (generate: default -ann, which is then logged)"),
		corpus:      fs.String("corpus", "iu_xray", "R2Gen weights: the corpus they were trained on (R2Gen's --dataset_name: the report cleaner, the views and the run script's defaults): iu_xray or mimic_cxr"),
		threshold:   fs.Int("threshold", 0, "R2Gen weights: R2Gen's --threshold, the fewest occurrences in -vocab's train split for a word to enter the vocabulary (default: the corpus's run script, 3 for iu_xray and 10 for mimic_cxr)"),
		maxSeqLen:   fs.Int("max-seq-length", 0, "R2Gen weights: R2Gen's --max_seq_length, the longest report in tokens (default: the corpus's run script, 60 for iu_xray and 100 for mimic_cxr); at most the rows of the weights' positional table"),
		views:       fs.Int("views", 0, "R2Gen weights: images per study (default: the corpus's, 2 for iu_xray and 1 for mimic_cxr); the weights cannot tell it"),
		heads:       fs.Int("heads", 8, "R2Gen weights: attention heads (R2Gen's --num_heads); the weights' shapes cannot tell it, only that it divides d_model"),
		memoryHeads: fs.Int("memory-heads", 8, "R2Gen weights: relational-memory heads (R2Gen's --rm_num_heads); the weights' shapes cannot tell it, only that it divides d_model"),
	}
}

// load reads -model as its first bytes say. ann is the command's -ann, the
// default of -vocab.
func (f *modelFlags) load(lim *limits, ann string, opts ...memtrans.Option) (*memtrans.Model, error) {
	path := *f.path
	if path == "" {
		return nil, errors.New("-model is required")
	}
	file, err := lim.open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	head := make([]byte, 16)
	n, err := io.ReadFull(file, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	head = head[:n]
	size := int64(-1)
	if st, err := file.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	switch kind := sniffModel(head, size); kind {
	case kindNative:
		var ignored []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(r2genFlags, fl.Name) {
				ignored = append(ignored, "-"+fl.Name)
			}
		})
		if len(ignored) > 0 {
			f.cmd.log.Warn("ignored: a radgen checkpoint carries its configuration and vocabulary", "flags", strings.Join(ignored, " "), "model", path)
		}
		// Read on from the same file: a pipe cannot be opened twice.
		m, err := memtrans.Load(io.MultiReader(bytes.NewReader(head), file), lim.loadOptions(opts...)...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return m, nil
	case kindPyTorch, kindSafetensors:
		if size < 0 {
			return nil, fmt.Errorf("%s (%s): must be a regular file (R2Gen weights are read at offsets)", path, kind)
		}
		return f.loadR2Gen(lim, file, size, kind, ann, opts)
	}
	return nil, fmt.Errorf("%s: not a radgen checkpoint, a PyTorch checkpoint (.pth) or a safetensors file", path)
}

// convert reads -model (any kind load reads) and writes it as a native
// checkpoint to -out.
func (c *command) convert(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	mf := c.newModelFlags(fs)
	out := fs.String("out", "", "the radgen checkpoint to write (.radgen)")
	lim := limitFlags(fs)
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (convert takes flags only)", rest[0])
	}
	if err := lim.check(); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	m, err := mf.load(lim, "")
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.SaveFile(*out); err != nil {
		return err
	}
	cfg := m.Config()
	fmt.Fprintf(c.stdout, "wrote %s: %s, %d views, a vocabulary of %d tokens, reports of up to %d tokens\n", *out, cfg.Architecture(), cfg.Views, m.Tokenizer().Len(), cfg.MaxSeqLen())
	return nil
}
