package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
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
//     every start, and so does -vocab here; -heads and -memory-heads are
//     R2Gen's num_heads and rm_num_heads.
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
	path        *string
	vocab       *string
	corpus      *string
	views       *int
	heads       *int
	memoryHeads *int
}

func (c *command) newModelFlags(fs *flag.FlagSet) *modelFlags {
	return &modelFlags{
		cmd:         c,
		path:        fs.String("model", "", "model: a radgen checkpoint (.radgen), or R2Gen weights (PyTorch .pth or safetensors; then -vocab)"),
		vocab:       fs.String("vocab", "", "R2Gen weights: the annotation.json R2Gen trained on, whose train split gives the vocabulary (default: -ann)"),
		corpus:      fs.String("corpus", "iu_xray", "R2Gen weights: the corpus they were trained on (tokenizer, views): iu_xray or mimic_cxr"),
		views:       fs.Int("views", 0, "R2Gen weights: images per study (default: the corpus's, 2 for iu_xray and 1 for mimic_cxr)"),
		heads:       fs.Int("heads", 8, "R2Gen weights: attention heads (R2Gen's num_heads)"),
		memoryHeads: fs.Int("memory-heads", 8, "R2Gen weights: relational-memory heads (R2Gen's rm_num_heads)"),
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
	loadOpts := lim.loadOptions(opts...)
	switch kind := sniffModel(head, size); kind {
	case kindNative:
		// Read on from the same file: a pipe cannot be opened twice.
		m, err := memtrans.Load(io.MultiReader(bytes.NewReader(head), file), loadOpts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return m, nil
	case kindPyTorch, kindSafetensors:
		if size < 0 {
			return nil, fmt.Errorf("%s (%s): must be a regular file (R2Gen weights are read at offsets)", path, kind)
		}
		vocab := *f.vocab
		if vocab == "" {
			vocab = ann
		}
		if vocab == "" {
			return nil, fmt.Errorf("%s (%s): R2Gen weights carry no vocabulary: give -vocab, the annotation.json they were trained on", path, kind)
		}
		a, err := lim.annotation(vocab)
		if err != nil {
			return nil, err
		}
		c := data.Corpus(*f.corpus)
		if c != data.IUXray && c != data.MIMICCXR {
			return nil, fmt.Errorf("unknown -corpus %q (iu_xray or mimic_cxr)", c)
		}
		tok, err := trainTokenizer(a, c, 0)
		if err != nil {
			return nil, fmt.Errorf("-vocab %s: %w", vocab, err)
		}
		views := *f.views
		if views == 0 {
			views = c.Views()
		}
		return memtrans.LoadR2GenFile(path, tok, views, *f.heads, *f.memoryHeads, loadOpts...)
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
	fmt.Fprintf(c.stdout, "wrote %s: %s, %d views, a vocabulary of %d tokens\n", *out, cfg.Architecture(), cfg.Views, m.Tokenizer().Len())
	return nil
}
