package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// resealed rewrites the configuration inside a native checkpoint and seals
// it again with a valid checksum, as a forger would.
func resealed(t *testing.T, file []byte, edit func(*memtrans.ModelConfig)) []byte {
	t.Helper()
	return resealedMeta(t, file, func(md map[string]string) {
		var cfg memtrans.ModelConfig
		json.Unmarshal([]byte(md["radgen.config"]), &cfg)
		edit(&cfg)
		b, _ := json.Marshal(cfg)
		md["radgen.config"] = string(b)
	})
}

// resealedMeta rewrites the metadata inside a native checkpoint and seals
// it again with a valid checksum.
func resealedMeta(t *testing.T, file []byte, edit func(map[string]string)) []byte {
	t.Helper()
	const hdr = 8 + 8 + sha256.Size
	dec, err := zstd.NewReader(bytes.NewReader(file[hdr:]))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(dec)
	dec.Close()
	if err != nil {
		t.Fatal(err)
	}
	w, err := radgen.OpenWeights(bytes.NewReader(payload), int64(len(payload)))
	if err != nil {
		t.Fatal(err)
	}
	md := w.Metadata()
	edit(md)
	var p bytes.Buffer
	if err := radgen.SaveWeights(&p, weightsModule{w}, md); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p.Bytes())
	var out bytes.Buffer
	out.Write(file[:8])
	binary.Write(&out, binary.LittleEndian, uint64(p.Len()))
	out.Write(sum[:])
	enc, _ := zstd.NewWriter(&out)
	enc.Write(p.Bytes())
	enc.Close()
	return out.Bytes()
}

// weightsModule serves an open weights file's tensors as a module's, to
// write them again.
type weightsModule struct{ w *radgen.Weights }

func (m weightsModule) VisitParams(visit func(string, *radgen.Tensor)) {
	for _, n := range m.w.Names() {
		v, shape, err := m.w.Float32(n)
		if err != nil {
			panic(err)
		}
		visit(n, radgen.FromFloat32(v, shape...))
	}
}

// bomb is a native header declaring a payload of n bytes over a zstd
// stream of zeros that long (a few hundred bytes on disk).
func bomb(t *testing.T, n int) []byte {
	var out bytes.Buffer
	out.WriteString("RADGENv1")
	binary.Write(&out, binary.LittleEndian, uint64(n))
	out.Write(make([]byte, sha256.Size))
	enc, _ := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	enc.Write(make([]byte, n))
	enc.Close()
	return out.Bytes()
}

func writePNG(t *testing.T, path string, w, h int) {
	t.Helper()
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The commands' messages for bad flags, bad inputs and hostile files: each
// is an error (never a panic, never a hang on a FIFO) that says what is
// wrong.
func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }

	// A tiny model, an annotation whose test split is empty, images.
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	r2 := cfg.EncoderDecoder.(r2gen.Config)
	r2.DModel, r2.DFF, r2.Layers = 16, 16, 1
	r2.Heads, r2.MemoryHeads = 2, 2
	cfg.EncoderDecoder = r2
	m, err := memtrans.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(p("model.radgen")); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(p("model.radgen"))
	os.WriteFile(p("layers.radgen"), resealed(t, good, func(c *memtrans.ModelConfig) {
		r2 := c.EncoderDecoder.(r2gen.Config)
		r2.Layers = 1 << 20
		c.EncoderDecoder = r2
	}), 0o644)
	os.WriteFile(p("width.radgen"), resealed(t, good, func(c *memtrans.ModelConfig) {
		r2 := c.EncoderDecoder.(r2gen.Config)
		r2.DModel = 1 << 20
		c.EncoderDecoder = r2
	}), 0o644)
	os.WriteFile(p("bomb.radgen"), bomb(t, 64<<20), 0o644)
	os.WriteFile(p("truncated.radgen"), good[:len(good)/2], 0o644)
	os.WriteFile(p("garbage.radgen"), bytes.Repeat([]byte("x"), 1000), 0o644)
	os.WriteFile(p("empty.pth"), nil, 0o644)
	writePNG(t, p("0.png"), 64, 64)
	writePNG(t, p("1.png"), 64, 64)
	writePNG(t, p("big.png"), 300, 300)
	os.WriteFile(p("notimage.png"), []byte("not an image at all"), 0o644)
	ann := `{"train": [{"id": "a", "report": "the heart is normal.", "image_path": ["0.png", "1.png"], "split": "train"}], "test": []}`
	os.WriteFile(p("ann.json"), []byte(ann), 0o644)
	os.WriteFile(p("bad.json"), []byte(`{"train": [{"id": "a"}]}`), 0o644)
	os.WriteFile(p("reports.json"), []byte(`[{"id": "a", "report": "x", "log_prob": -1}]`), 0o644)
	os.WriteFile(p("notreports.json"), []byte(`{"a": 1}`), 0o644)
	os.WriteFile(p("existing.json"), []byte("keep me"), 0o644)
	fifo := p("fifo")
	haveFIFO := syscall.Mkfifo(fifo, 0o644) == nil

	type cmd func(context.Context, []string) error
	convert := func(_ context.Context, args []string) error { return convert(args) }
	cases := []struct {
		name string
		run  cmd
		args []string
		want string
		fifo bool
	}{
		{"train unknown arch", train, []string{"-ann", p("ann.json"), "-images", dir, "-out", p("run"), "-arch", "foo"}, `unknown -arch "foo"`, false},
		{"train unknown config", train, []string{"-ann", p("ann.json"), "-images", dir, "-out", p("run"), "-config", "huge"}, `unknown -config "huge"`, false},
		{"train without -images", train, []string{"-ann", p("ann.json")}, "-images and -out are required", false},
		{"train stray argument", train, []string{"-ann", p("ann.json"), "extra"}, `unexpected argument "extra"`, false},
		{"train annotation FIFO", train, []string{"-ann", fifo, "-images", dir, "-out", p("run")}, "not a regular file", true},
		{"train huge model", train, []string{"-ann", p("ann.json"), "-images", dir, "-out", p("run"), "-max-params", "1000"}, "budget of 1000", false},
		{"unknown flag", generate, []string{"-model", p("model.radgen"), "-bogus"}, "flag provided but not defined: -bogus", false},
		{"negative limit", generate, []string{"-model", p("model.radgen"), "-max-pixels", "-1"}, "-max-pixels -1: must be positive", false},
		{"generate without -model", generate, []string{p("0.png")}, "-model is required", false},
		{"generate no inputs", generate, []string{"-model", p("model.radgen")}, "give -ann, -manifest, image files or DICOM folders", false},
		{"model missing", generate, []string{"-model", p("none.radgen"), p("0.png")}, "no such file", false},
		{"model FIFO", generate, []string{"-model", fifo, p("0.png")}, "not a regular file", true},
		{"model /dev/zero", generate, []string{"-model", "/dev/zero", p("0.png")}, "not a regular file", false},
		{"model num_layers 2^20", generate, []string{"-model", p("layers.radgen"), p("0.png")}, "num_layers = 1048576", false},
		{"model d_model 2^20", generate, []string{"-model", p("width.radgen"), p("0.png")}, "d_model = 1048576", false},
		{"model zstd bomb", generate, []string{"-model", p("bomb.radgen"), p("0.png")}, "tensor header of 0 bytes", false},
		{"model truncated", generate, []string{"-model", p("truncated.radgen"), p("0.png")}, "bad checkpoint", false},
		{"model not a checkpoint", generate, []string{"-model", p("garbage.radgen"), p("0.png")}, "not a radgen checkpoint, a PyTorch checkpoint (.pth) or a safetensors file", false},
		{"model empty", generate, []string{"-model", p("empty.pth"), p("0.png")}, "not a radgen checkpoint", false},
		{"R2Gen weights without -vocab", generate, []string{"-model", fixturePth, p("0.png"), p("1.png")}, "carry no vocabulary: give -vocab", false},
		{"R2Gen weights, -vocab not an annotation", generate, []string{"-model", fixturePth, "-vocab", p("bad.json"), p("0.png"), p("1.png")}, "bad study", false},
		{"R2Gen weights, heads that do not divide d_model", generate, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-heads", "3", p("0.png"), p("1.png")}, "-heads 3: R2Gen's num_heads must divide d_model, which is 16 in " + fixturePth, false},
		{"R2Gen weights, heads that divide no d_model", generate, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-heads", "32", p("0.png"), p("1.png")}, "-heads 32: R2Gen's num_heads must divide d_model", false},
		{"R2Gen weights, memory heads that do not divide d_model", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-heads", "2", "-memory-heads", "3", "-out", p("out.radgen")}, "-memory-heads 3: R2Gen's rm_num_heads must divide the memory's width, d_model, which is 16", false},
		{"R2Gen weights, another threshold", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-threshold", "1", "-heads", "2", "-memory-heads", "2", "-out", p("out.radgen")},
			"-vocab " + fixtureAnn + ": its train split gives a vocabulary of 22 tokens at -threshold 1 and -corpus iu_xray, an output of 23 ids, but the weights' logit layer has 14 (-threshold 3 gives 14)", false},
		{"R2Gen weights, another corpus", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-corpus", "mimic_cxr", "-heads", "2", "-memory-heads", "2", "-out", p("out.radgen")},
			"at -threshold (default 10 for -corpus mimic_cxr) and -corpus mimic_cxr, an output of 3 ids, but the weights' logit layer has 14 (-threshold 3 gives 14)", false},
		{"R2Gen weights, -vocab defaulting to -ann", generate, []string{"-model", fixturePth, "-ann", p("ann.json"), "-heads", "2", "-memory-heads", "2"}, "-vocab (default -ann) " + p("ann.json") + ": its train split gives a vocabulary of 1 tokens at -threshold (default 3 for -corpus iu_xray) and -corpus iu_xray, an output of 2 ids, but the weights' logit layer has 14", false},
		{"R2Gen weights, reports longer than the positional table", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-max-seq-length", "513", "-heads", "2", "-memory-heads", "2", "-out", p("out.radgen")},
			"-max-seq-length 513: longer than the 512 rows of the positional table in " + fixturePth, false},
		{"R2Gen weights, negative threshold", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-threshold", "-1", "-out", p("out.radgen")}, "-threshold -1: outside [0, ", false},
		{"R2Gen weights, 17 views", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-views", "17", "-out", p("out.radgen")}, "-views 17: outside [0, 16]", false},
		{"R2Gen weights, no heads", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-memory-heads", "0", "-out", p("out.radgen")}, "-memory-heads 0: outside [1, ", false},
		{"R2Gen weights, unknown corpus", generate, []string{"-model", fixturePth, "-vocab", fixtureAnn, "-corpus", "chexpert", p("0.png"), p("1.png")}, `unknown -corpus "chexpert"`, false},
		{"convert without -out", convert, []string{"-model", fixturePth, "-vocab", fixtureAnn}, "-out is required", false},
		{"convert without -model", convert, []string{"-out", p("out.radgen")}, "-model is required", false},
		{"convert stray argument", convert, []string{"-model", fixturePth, "-out", p("out.radgen"), "extra"}, `unexpected argument "extra"`, false},
		{"model over -max-model-bytes", generate, []string{"-model", p("model.radgen"), "-max-model-bytes", "1000", p("0.png")}, "exceeds the limit of 1000", false},
		{"empty split", generate, []string{"-model", p("model.radgen"), "-ann", p("ann.json"), "-images", dir}, `split "test" has no studies`, false},
		{"missing split", generate, []string{"-model", p("model.radgen"), "-ann", p("ann.json"), "-images", dir, "-split", "val"}, `split missing`, false},
		{"bad annotation", generate, []string{"-model", p("model.radgen"), "-ann", p("bad.json"), "-images", dir}, `bad study`, false},
		{"annotation over -max-ann-bytes", generate, []string{"-model", p("model.radgen"), "-ann", p("ann.json"), "-max-ann-bytes", "10"}, "exceeds its size limit", false},
		{"flags after the files", generate, []string{"-model", p("model.radgen"), p("0.png"), p("1.png"), "-beam", "0"}, "beam size 0", false},
		{"image not an image", generate, []string{"-model", p("model.radgen"), p("notimage.png"), p("1.png")}, "notimage.png", false},
		{"image FIFO", generate, []string{"-model", p("model.radgen"), fifo, p("1.png")}, "not a regular file", true},
		{"image over -max-pixels", generate, []string{"-model", p("model.radgen"), "-max-pixels", "10000", p("big.png"), p("1.png")}, "pixel limit", false},
		{"image over -max-image-bytes", generate, []string{"-model", p("model.radgen"), "-max-image-bytes", "20", p("0.png"), p("1.png")}, "exceeds its size limit", false},
		{"one view for two", generate, []string{"-model", p("model.radgen"), p("0.png")}, "1 views, the model takes 2", false},
		{"failed generate keeps -o", generate, []string{"-model", p("model.radgen"), "-o", p("existing.json"), p("0.png")}, "1 views", false},
		{"eval without -reports", eval, []string{"-ann", p("ann.json")}, "-reports is required", false},
		{"eval reports missing", eval, []string{"-ann", p("ann.json"), "-reports", p("none.json")}, "no such file", false},
		{"eval reports FIFO", eval, []string{"-ann", p("ann.json"), "-reports", fifo}, "not a regular file", true},
		{"eval reports not reports", eval, []string{"-ann", p("ann.json"), "-reports", p("notreports.json")}, "not a reports.json", false},
		{"eval reports over the limit", eval, []string{"-ann", p("ann.json"), "-reports", p("reports.json"), "-max-reports-bytes", "5"}, "exceeds its size limit", false},
		{"eval without -ann", eval, []string{"-reports", p("reports.json")}, "-ann is required", false},
		{"eval report not in split", eval, []string{"-ann", p("ann.json"), "-reports", p("reports.json")}, `"a", which is not in split "test"`, false},
		{"eval negative -max-seq-length", eval, []string{"-ann", p("ann.json"), "-reports", p("reports.json"), "-max-seq-length", "-2"}, "-max-seq-length -2: 0 (the corpus's) or more", false},
	}
	for _, c := range cases {
		if c.fifo && !haveFIFO {
			continue
		}
		err := c.run(context.Background(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n\twant an error containing %q", c.name, err, c.want)
		}
	}
	// R2Gen weights are read at offsets: from a pipe (allowed), the
	// command says so once it has seen their first bytes.
	if haveFIFO {
		head, err := os.ReadFile(fixturePth)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Write(head[:64])
				w.Close()
			}
		}()
		err = generate(context.Background(), []string{"-model", fifo, "-allow-nonregular", p("0.png")})
		if err == nil || !strings.Contains(err.Error(), "must be a regular file") {
			t.Errorf("R2Gen weights from a FIFO: %v", err)
		}
	}
	if b, _ := os.ReadFile(p("existing.json")); string(b) != "keep me" {
		t.Errorf("a failed generate changed -o's file: %q", b)
	}
}
