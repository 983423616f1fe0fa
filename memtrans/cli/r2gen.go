package cli

// R2Gen's own weights (model_best.pth, or safetensors of its state_dict
// names) hold the encoder–decoder's sizes in their shapes, and nothing
// else: the vocabulary, the head counts, the views and the longest report
// are R2Gen's command-line arguments, which the flags here stand for. Each
// flag is checked against what the weights do tell, before they are
// loaded, and an error names the flag; the settings used are logged, with
// every one that differs from R2Gen's run script for the corpus.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// r2genSettings are the R2Gen arguments a model is built with.
type r2genSettings struct {
	corpus      data.Corpus
	threshold   int
	maxSeqLen   int
	views       int
	heads       int
	memoryHeads int
}

// settings reads the R2Gen flags, the corpus's run-script values where
// they are left at 0, and checks their ranges.
func (f *modelFlags) settings() (r2genSettings, error) {
	s := r2genSettings{corpus: data.Corpus(*f.corpus), threshold: *f.threshold, maxSeqLen: *f.maxSeqLen,
		views: *f.views, heads: *f.heads, memoryHeads: *f.memoryHeads}
	if s.corpus != data.IUXray && s.corpus != data.MIMICCXR {
		return s, fmt.Errorf("unknown -corpus %q (iu_xray or mimic_cxr)", s.corpus)
	}
	for _, v := range []struct {
		flag   string
		value  int
		lo, hi int
	}{{"-threshold", s.threshold, 0, 1 << 30}, {"-max-seq-length", s.maxSeqLen, 0, 1 << 20},
		{"-views", s.views, 0, 16}, {"-heads", s.heads, 1, 1 << 20}, {"-memory-heads", s.memoryHeads, 1, 1 << 20}} {
		if v.value < v.lo || v.value > v.hi {
			return s, fmt.Errorf("%s %d: outside [%d, %d]", v.flag, v.value, v.lo, v.hi)
		}
	}
	if s.threshold == 0 {
		s.threshold = s.corpus.Threshold()
	}
	if s.maxSeqLen == 0 {
		s.maxSeqLen = s.corpus.MaxSeqLen()
	}
	if s.views == 0 {
		s.views = s.corpus.Views()
	}
	return s, nil
}

// flagName names a flag as an error should: "-heads 3", or
// "-max-seq-length (default 100 for -corpus mimic_cxr)" when it was not
// given.
func (f *modelFlags) flagName(name string, value int) string {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	switch {
	case set:
		return fmt.Sprintf("-%s %d", name, value)
	case name == "threshold" || name == "max-seq-length" || name == "views":
		return fmt.Sprintf("-%s (default %d for -corpus %s)", name, value, *f.corpus)
	}
	return fmt.Sprintf("-%s (default %d)", name, value)
}

// loadR2Gen builds a model from R2Gen weights in file, an open regular
// file of the given size.
func (f *modelFlags) loadR2Gen(lim *limits, file *os.File, size int64, kind modelKind, ann string, opts []memtrans.Option) (*memtrans.Model, error) {
	path, log := *f.path, f.cmd.log
	s, err := f.settings()
	if err != nil {
		return nil, err
	}
	vocab := *f.vocab
	if vocab == "" {
		if ann == "" {
			return nil, fmt.Errorf("%s (%s): R2Gen weights carry no vocabulary: give -vocab, the annotation.json they were trained on", path, kind)
		}
		vocab = ann
		log.Info("R2Gen weights carry no vocabulary: -vocab defaults to -ann, whose train split gives it", "vocab", vocab)
	}

	// What the shapes tell, checked against the flags before anything is
	// built.
	shape, err := r2genShape(file, size, kind, *lim.maxModelBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if shape.DModel%s.heads != 0 {
		return nil, fmt.Errorf("%s: R2Gen's num_heads must divide d_model, which is %d in %s; the shapes cannot tell the head count: give the --num_heads the weights were trained with",
			f.flagName("heads", s.heads), shape.DModel, path)
	}
	if hasRelationalMemory(shape) && shape.DModel%s.memoryHeads != 0 {
		return nil, fmt.Errorf("%s: R2Gen's rm_num_heads must divide the memory's width, d_model, which is %d in %s; the shapes cannot tell the head count: give the --rm_num_heads the weights were trained with",
			f.flagName("memory-heads", s.memoryHeads), shape.DModel, path)
	}
	if s.maxSeqLen > shape.PositionLen {
		return nil, fmt.Errorf("%s: longer than the %d rows of the positional table in %s (model.tgt_embed.1.pe), the longest report its weights can write",
			f.flagName("max-seq-length", s.maxSeqLen), shape.PositionLen, path)
	}

	a, err := lim.annotation(vocab)
	if err != nil {
		return nil, fmt.Errorf("-vocab %s: %w", vocab, err)
	}
	tok, err := trainTokenizer(a, s.corpus, s.threshold)
	if err != nil {
		return nil, fmt.Errorf("-vocab %s: %w", vocab, err)
	}
	if got := tok.Len() + 1; got != shape.Vocab {
		return nil, f.vocabError(a, vocab, s, got, shape.Vocab)
	}

	// memtrans builds the model for the corpus's max_seq_length; another
	// is a copy with that length (on the CPU first: the copy is placed).
	first := lim.loadOptions(append(opts[:len(opts):len(opts)], memtrans.WithLogger(log))...)
	other := s.maxSeqLen != s.corpus.MaxSeqLen()
	if other {
		first = lim.loadOptions(memtrans.WithLogger(log))
	}
	m, err := memtrans.LoadR2GenFile(path, tok, s.views, s.heads, s.memoryHeads, first...)
	if err != nil {
		return nil, err
	}
	if other {
		long, err := withMaxSeqLen(m, s.maxSeqLen, append(lim.modelOptions(), opts...))
		m.Close()
		if err != nil {
			return nil, fmt.Errorf("-max-seq-length %d: %w", s.maxSeqLen, err)
		}
		m = long
	}
	f.logSettings(m, s)
	return m, nil
}

// vocabError says that the tokenizer the flags rebuild does not fit the
// weights' output, and which -threshold would, when one does.
func (f *modelFlags) vocabError(a *data.Annotation, vocab string, s r2genSettings, got, want int) error {
	src := "-vocab " + vocab
	if *f.vocab == "" {
		src = "-vocab (default -ann) " + vocab
	}
	hint := ""
	if t, ok := matchingThreshold(a, s.corpus, want); ok {
		hint = fmt.Sprintf(" (-threshold %d gives %d)", t, want)
	}
	return fmt.Errorf("%s: its train split gives a vocabulary of %d tokens at %s and -corpus %s, an output of %d ids, but the weights' logit layer has %d%s: give the annotation.json, -threshold and -corpus the weights were trained with (R2Gen's --ann_path, --threshold and --dataset_name)",
		src, got-1, f.flagName("threshold", s.threshold), s.corpus, got, want, hint)
}

// matchingThreshold looks for the threshold whose vocabulary has want ids,
// by bisection (a higher threshold keeps fewer words), on a train split of
// IU X-Ray's size at most: each try rebuilds the tokenizer.
func matchingThreshold(a *data.Annotation, c data.Corpus, want int) (int, bool) {
	train, err := a.Split("train")
	if err != nil || len(train) > 10000 {
		return 0, false
	}
	reports := make([]string, len(train))
	for i, s := range train {
		reports[i] = s.Report
	}
	size := func(t int) int {
		tok, err := data.BuildTokenizer(c, t, reports)
		if err != nil {
			return -1
		}
		return tok.Len() + 1
	}
	lo, hi := 1, 1<<20 // size(lo) ≥ want > size(hi) once narrowed
	if size(lo) < want {
		return 0, false
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if size(mid) >= want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, size(lo) == want
}

// hasRelationalMemory reports whether the weights have R2Gen's relational
// memory, whose heads -memory-heads counts.
func hasRelationalMemory(c r2gen.Config) bool {
	return c.Variant != r2gen.VariantBase && c.Memory == r2gen.MemoryRelational
}

// r2genShape reads the encoder–decoder's sizes from the header of R2Gen
// weights (no tensor is read): d_model, d_ff, the layers, the vocabulary,
// the memory slots and the rows of the positional table. The shapes hold no
// head count; the result's are 1.
func r2genShape(r io.ReaderAt, size int64, kind modelKind, maxBytes int64) (r2gen.Config, error) {
	var src interface {
		Names() []string
		Shape(string) ([]int, bool)
	}
	switch kind {
	case kindPyTorch:
		p, err := pth.Open(r, size, pth.WithMaxBytes(maxBytes))
		if err != nil {
			return r2gen.Config{}, fmt.Errorf("%w: %w", memtrans.ErrCheckpoint, err)
		}
		src = p
	case kindSafetensors:
		s, err := safetensors.Open(r, size)
		if err != nil {
			return r2gen.Config{}, fmt.Errorf("%w: %w", memtrans.ErrCheckpoint, err)
		}
		src = s
	default:
		return r2gen.Config{}, errors.New("not R2Gen weights")
	}
	// DataParallel's "module." before every name, when every name has it.
	names, prefix := src.Names(), "module."
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			prefix = ""
			break
		}
	}
	shapes := map[string][]int{}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, prefix+"encoder_decoder."); ok {
			if shapes[rest], ok = src.Shape(n); !ok {
				return r2gen.Config{}, fmt.Errorf("%w: no shape for %q", memtrans.ErrCheckpoint, n)
			}
		}
	}
	return r2gen.InferConfig(shapes, 1, 1, 0)
}

// withMaxSeqLen returns a copy of the R2Gen model m whose configuration
// says reports of up to n tokens, with the model options opts.
func withMaxSeqLen(m *memtrans.Model, n int, opts []memtrans.Option) (*memtrans.Model, error) {
	cfg := m.Config()
	r2, ok := cfg.EncoderDecoder.(r2gen.Config)
	if !ok {
		return nil, fmt.Errorf("not an R2Gen model (%s)", cfg.Architecture())
	}
	r2.MaxSeqLen = n
	cfg.EncoderDecoder = r2
	out, err := memtrans.New(cfg, m.Tokenizer(), 0, opts...)
	if err != nil {
		return nil, err
	}
	if err := radgen.LoadParams(out, radgen.StateDict(m, ""), ""); err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}

// logSettings logs the R2Gen settings m was built with (R2Gen's argument
// names), and those that differ from R2Gen's run script for the corpus:
// main.py's model defaults, the script's threshold and max_seq_length, the
// corpus's views, and beam search of width 3.
func (f *modelFlags) logSettings(m *memtrans.Model, s r2genSettings) {
	r2, ok := m.Config().EncoderDecoder.(r2gen.Config)
	if !ok {
		return
	}
	script, ref := "run_iu_xray.sh", r2gen.IUXray(0)
	if s.corpus == data.MIMICCXR {
		script, ref = "run_mimic_cxr.sh", r2gen.MIMICCXR(0)
	}
	type setting struct {
		name       string
		value, ref int
		from       string
	}
	settings := []setting{
		{"d_model", r2.DModel, ref.DModel, "the weights"},
		{"d_ff", r2.DFF, ref.DFF, "the weights"},
		{"num_layers", r2.Layers, ref.Layers, "the weights"},
		{"num_heads", r2.Heads, ref.Heads, "-heads"},
	}
	if hasRelationalMemory(r2) {
		settings = append(settings,
			setting{"rm_num_slots", r2.MemorySlots, ref.MemorySlots, "the weights"},
			setting{"rm_num_heads", r2.MemoryHeads, ref.MemoryHeads, "-memory-heads"})
	}
	settings = append(settings,
		setting{"views", m.Config().Views, s.corpus.Views(), "-views"},
		setting{"threshold", s.threshold, s.corpus.Threshold(), "-threshold"},
		setting{"max_seq_length", r2.MaxSeqLen, s.corpus.MaxSeqLen(), "-max-seq-length"})
	if fl := f.fs.Lookup("beam"); fl != nil {
		if beam, err := strconv.Atoi(fl.Value.String()); err == nil {
			settings = append(settings, setting{"beam_size", beam, 3, "-beam"})
		}
	}
	attrs := []any{"dataset_name", string(s.corpus)}
	var diffs []string
	for _, st := range settings {
		attrs = append(attrs, st.name, st.value)
		if st.value != st.ref {
			diffs = append(diffs, fmt.Sprintf("%s %d from %s (%s: %d)", st.name, st.value, st.from, script, st.ref))
		}
	}
	attrs = append(attrs, "vocab", r2.Vocab)
	f.cmd.log.Info("R2Gen settings", attrs...)
	if len(diffs) > 0 {
		f.cmd.log.Info("R2Gen settings that differ from "+script, "settings", strings.Join(diffs, ", "))
	}
}
