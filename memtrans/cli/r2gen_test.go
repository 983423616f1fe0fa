package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// The R2Gen checkpoint of testdata: model_best.pth as R2Gen's trainer saves
// it ({'epoch', 'state_dict', 'monitor_best'}) from a DataParallel model
// (every name under "module."), for a tiny configuration (d_model 16, one
// layer, 2 heads and 2 memory heads) and the vocabulary of
// testdata/annotation.json's train split. memtrans's
// TestLoadR2GenDataParallel writes it and checks it holds what it should.
const (
	fixturePth = "testdata/model_best.pth"
	fixtureAnn = "testdata/annotation.json"
)

// writeFilms writes the two views of the annotation's test studies x and y
// under dir: gradients that differ per study and view.
func writeFilms(t *testing.T, dir string) {
	t.Helper()
	for s, id := range []string{"x", "y"} {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		for v := range 2 {
			g := image.NewGray(image.Rect(0, 0, 64, 64))
			for y := range 64 {
				for x := range 64 {
					g.SetGray(x, y, color.Gray{uint8((x*(s+1) + y*(v+2)*3) % 256)})
				}
			}
			f, err := os.Create(filepath.Join(dir, id, []string{"0.png", "1.png"}[v]))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, g); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}

func readGenerated(t *testing.T, path string) []generated {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []generated
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// radgen generate reads R2Gen's model_best.pth (a zip of deflated records,
// DataParallel names, the vocabulary rebuilt from -ann's train split);
// radgen convert writes it as a radgen checkpoint, and a bare state_dict as
// torch.save stores it (stored records, no "module.") and safetensors
// weights of the same names load too: all four write the same reports with
// the same log-probabilities.
func TestGenerateR2GenCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	writeFilms(t, images)
	p := func(name string) string { return filepath.Join(dir, name) }
	r2gen := []string{"-heads", "2", "-memory-heads", "2"}
	gen := func(model, out string, extra ...string) []generated {
		t.Helper()
		args := append([]string{"-model", model, "-ann", fixtureAnn, "-images", images, "-o", out}, extra...)
		if err := generate(ctx, args); err != nil {
			t.Fatalf("generate -model %s: %v", model, err)
		}
		return readGenerated(t, out)
	}
	fromPth := gen(fixturePth, p("pth.json"), r2gen...)
	if len(fromPth) != 2 || fromPth[0].ID != "x" || fromPth[1].ID != "y" {
		t.Fatalf("reports from the .pth: %+v", fromPth)
	}
	for _, r := range fromPth {
		t.Logf("%s: %q (log p %.4f)", r.ID, r.Report, r.LogP)
	}

	if err := convert(append([]string{"-model", fixturePth, "-vocab", fixtureAnn, "-out", p("model.radgen")}, r2gen...)); err != nil {
		t.Fatal(err)
	}
	m, err := memtrans.LoadFile(p("model.radgen"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := m.Config(); cfg.Architecture() != memtrans.ArchR2Gen || cfg.Views != 2 {
		t.Errorf("converted: %s, %d views", cfg.Architecture(), cfg.Views)
	}
	// Safetensors of the same state_dict names, under a name that says
	// nothing: the kind is read from the bytes.
	err = radgen.SaveWeightsFile(p("weights.bin"), m, nil)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	writeStateDict(t, fixturePth, p("state_dict.pth"))
	fromNative := gen(p("model.radgen"), p("native.json"))
	fromSafetensors := gen(p("weights.bin"), p("safetensors.json"), r2gen...)
	fromStateDict := gen(p("state_dict.pth"), p("state_dict.json"), r2gen...)
	for i, want := range fromPth {
		for kind, got := range map[string][]generated{"radgen checkpoint": fromNative, "safetensors": fromSafetensors, "bare state_dict": fromStateDict} {
			if got[i] != want {
				t.Errorf("%s: %+v, from the .pth %+v", kind, got[i], want)
			}
		}
	}
}

// writeStateDict writes the state_dict of the R2Gen checkpoint src to dst
// as torch.save(model.state_dict()) writes it: a bare OrderedDict in a zip
// of stored records, without DataParallel's "module.".
func writeStateDict(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pth.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var ts []pth.Tensor
	for _, n := range f.Names() {
		v, shape, err := f.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, pth.Tensor{Name: strings.TrimPrefix(n, "module."), Shape: shape, Data: v})
	}
	var out bytes.Buffer
	if err := pth.Write(&out, ts, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out.Bytes(), []byte("PK\x03\x04")) || bytes.Equal(out.Bytes(), b) {
		t.Fatal("the state_dict is not a new zip")
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs the command as a program does, and returns its exit status, its
// output and its log.
func run(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The R2Gen settings used are logged in R2Gen's names, with those that
// differ from the run script of the corpus and where each comes from; an
// -ann standing in for -vocab is said.
func TestR2GenSettingsLogged(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	writeFilms(t, images)
	code, out, log := run("generate", "-model", fixturePth, "-ann", fixtureAnn, "-images", images, "-heads", "2", "-memory-heads", "2", "-beam", "1")
	if code != 0 {
		t.Fatalf("status %d: %s", code, log)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("%d reports printed:\n%s", n, out)
	}
	for _, want := range []string{
		`-vocab defaults to -ann, whose train split gives it" vocab=` + fixtureAnn,
		`msg="R2Gen settings" dataset_name=iu_xray d_model=16 d_ff=16 num_layers=1 num_heads=2 rm_num_slots=3 rm_num_heads=2 views=2 threshold=3 max_seq_length=60 beam_size=1 vocab=14`,
		`msg="R2Gen settings that differ from run_iu_xray.sh" settings="d_model 16 from the weights (run_iu_xray.sh: 512), d_ff 16 from the weights (run_iu_xray.sh: 512), num_layers 1 from the weights (run_iu_xray.sh: 3), num_heads 2 from -heads (run_iu_xray.sh: 8), rm_num_heads 2 from -memory-heads (run_iu_xray.sh: 8), beam_size 1 from -beam (run_iu_xray.sh: 3)"`,
		"epoch=12 monitor_best=0.125",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	// With -vocab given, convert says nothing of -ann; MIMIC-CXR's script
	// is the reference for -corpus mimic_cxr.
	code, out, log = run("convert", "-model", fixturePth, "-vocab", fixtureAnn, "-corpus", "mimic_cxr", "-threshold", "3", "-max-seq-length", "100",
		"-heads", "2", "-memory-heads", "2", "-out", filepath.Join(dir, "m.radgen"))
	if code != 0 || !strings.Contains(out, "r2gen, 1 views, a vocabulary of 13 tokens, reports of up to 100 tokens") {
		t.Fatalf("convert: status %d, %q\n%s", code, out, log)
	}
	if strings.Contains(log, "-ann") || !strings.Contains(log, "dataset_name=mimic_cxr") || !strings.Contains(log, "threshold 3 from -threshold (run_mimic_cxr.sh: 10)") ||
		strings.Contains(log, "max_seq_length 100") || strings.Contains(log, "views 1") {
		t.Errorf("convert's log:\n%s", log)
	}
}

// -max-seq-length bounds the reports (eos included) and is what convert
// records; greedy decoding writes a prefix of the longer report.
func TestR2GenMaxSeqLength(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	writeFilms(t, images)
	p := func(name string) string { return filepath.Join(dir, name) }
	flags := []string{"-ann", fixtureAnn, "-images", images, "-heads", "2", "-memory-heads", "2", "-beam", "1"}
	gen := func(model, out string, extra ...string) []generated {
		t.Helper()
		if code, _, log := run(append(append([]string{"generate", "-model", model, "-o", out}, flags...), extra...)...); code != 0 {
			t.Fatalf("generate %v: %s", extra, log)
		}
		return readGenerated(t, out)
	}
	long := gen(fixturePth, p("long.json"))
	short := gen(fixturePth, p("short.json"), "-max-seq-length", "8")
	if code, _, log := run("convert", "-model", fixturePth, "-vocab", fixtureAnn, "-heads", "2", "-memory-heads", "2", "-max-seq-length", "8", "-out", p("short.radgen")); code != 0 {
		t.Fatal(log)
	}
	m, err := memtrans.LoadFile(p("short.radgen"))
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Config().MaxSeqLen(); n != 8 {
		t.Errorf("converted with -max-seq-length 8: max_seq_length %d", n)
	}
	m.Close()
	converted := gen(p("short.radgen"), p("converted.json"))
	for i := range long {
		words := strings.Fields(short[i].Report)
		if len(words) == 0 || len(words) > 8 || !strings.HasPrefix(long[i].Report, short[i].Report+" ") {
			t.Errorf("%s: -max-seq-length 8 wrote %q; 60 wrote %q", short[i].ID, short[i].Report, long[i].Report)
		}
		if converted[i] != short[i] {
			t.Errorf("%s: converted %+v, from the .pth %+v", short[i].ID, converted[i], short[i])
		}
	}
}

// Weights trained with another -threshold load with it, and write the
// reports of the model they were saved from; without it the error names
// the flags, both sizes and the threshold that fits.
func TestR2GenThreshold(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	writeFilms(t, images)
	ann, err := data.OpenAnnotation(fixtureAnn)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := trainTokenizer(ann, data.IUXray, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	cfg.ImageSize, cfg.ResizeTo = 224, 256 // as R2Gen's weights are read
	m, err := memtrans.New(cfg, tok, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	weights := filepath.Join(dir, "weights.safetensors")
	if err := radgen.SaveWeightsFile(weights, m, nil); err != nil {
		t.Fatal(err)
	}
	test, err := ann.Split("test")
	if err != nil {
		t.Fatal(err)
	}
	var studies []memtrans.Study
	for _, s := range test {
		st, err := m.StudyFromAnnotation(s, images)
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, st)
	}
	want, err := m.Generate(context.Background(), studies)
	if err != nil {
		t.Fatal(err)
	}

	args := []string{"generate", "-model", weights, "-ann", fixtureAnn, "-images", images, "-heads", "4", "-memory-heads", "4", "-o", filepath.Join(dir, "r.json")}
	code, _, log := run(args...)
	for _, w := range []string{"radgen generate: -vocab (default -ann) " + fixtureAnn, "a vocabulary of 13 tokens at -threshold (default 3 for -corpus iu_xray) and -corpus iu_xray, an output of 14 ids",
		"the weights' logit layer has 23 (-threshold 1 gives 23)"} {
		if code != 1 || !strings.Contains(log, w) {
			t.Errorf("without -threshold: status %d, log lacks %q:\n%s", code, w, log)
		}
	}
	if code, _, log = run(append(args, "-threshold", "1")...); code != 0 {
		t.Fatalf("-threshold 1: %s", log)
	}
	got := readGenerated(t, filepath.Join(dir, "r.json"))
	for i, r := range want {
		if got[i].ID != r.StudyID || got[i].Report != r.Text || got[i].LogP != r.LogProb {
			t.Errorf("%s: %q (%v), the model saved wrote %q (%v)", r.StudyID, got[i].Report, got[i].LogP, r.Text, r.LogProb)
		}
	}
}

// The stock command, given a checkpoint of an architecture it does not
// register, says what to build: a radgen that imports its package.
func TestUnregisteredArchitecture(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	good, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(dir, "variant.radgen")
	os.WriteFile(forged, resealedMeta(t, good, func(md map[string]string) {
		md["radgen.config"] = strings.Replace(md["radgen.config"], `"architecture":"r2gen"`, `"architecture":"mcln-m2"`, 1)
	}), 0o644)
	writePNG(t, filepath.Join(dir, "0.png"), 64, 64)
	writePNG(t, filepath.Join(dir, "1.png"), 64, 64)
	want := []string{`unregistered architecture "mcln-m2"`, "import the package that registers it", "build a radgen whose main imports the architecture's package and calls cli.Main"}
	code, _, log := run("generate", "-model", forged, filepath.Join(dir, "0.png"), filepath.Join(dir, "1.png"))
	for _, w := range append(want, "radgen generate: ") {
		if code != 1 || !strings.Contains(log, w) {
			t.Errorf("generate: status %d, log lacks %q:\n%s", code, w, log)
		}
	}
	var stderr bytes.Buffer
	code = ServerMain(context.Background(), []string{"-model", forged, "-addr", "127.0.0.1:0"}, &bytes.Buffer{}, &stderr)
	for _, w := range append(want, "server stopped") {
		if w = strings.ReplaceAll(w, `"`, `\"`); code != 1 || !strings.Contains(stderr.String(), w) { // quoted in the log
			t.Errorf("server: status %d, log lacks %q:\n%s", code, w, stderr.String())
		}
	}
}

// r2genShape never panics on a hostile header, and what it accepts has
// positive sizes. The seeds are small (the fixture's deflated records take
// long to check): R2Gen's names with tiny shapes, under DataParallel's
// prefix and without it.
func FuzzR2GenShape(f *testing.F) {
	tensor := func(name string, shape ...int) pth.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return pth.Tensor{Name: name, Shape: shape, Data: make([]float32, n)}
	}
	for _, prefix := range []string{"", "module."} {
		p := prefix + "encoder_decoder."
		ts := []pth.Tensor{tensor(p+"att_embed.0.weight", 4, 6), tensor(p+"logit.weight", 5, 4), tensor(p+"model.tgt_embed.1.pe", 1, 8, 4),
			tensor(p+"model.encoder.layers.0.feed_forward.w_1.weight", 4, 4), tensor(p+"model.decoder.layers.0.feed_forward.w_1.weight", 4, 4),
			tensor(p+"model.decoder.layers.0.sublayer.0.norm.mlp_gamma.0.weight", 4, 12)}
		var b bytes.Buffer
		if err := pth.Write(&b, ts, &pth.Meta{Epoch: 1}); err != nil {
			f.Fatal(err)
		}
		if _, err := r2genShape(bytes.NewReader(b.Bytes()), int64(b.Len()), kindPyTorch, 1<<20); err != nil {
			f.Fatalf("seed: %v", err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		kind := sniffModel(b[:min(len(b), 16)], int64(len(b)))
		if kind != kindPyTorch && kind != kindSafetensors {
			return
		}
		c, err := r2genShape(bytes.NewReader(b), int64(len(b)), kind, 1<<20)
		if err == nil && (c.DModel <= 0 || c.Vocab <= 0 || c.PositionLen <= 0 || c.Layers <= 0) {
			t.Errorf("accepted %+v", c)
		}
	})
}

// sniffModel never panics, and never takes a header that does not fit the
// file for safetensors.
func FuzzSniffModel(f *testing.F) {
	head, err := os.ReadFile(fixturePth)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(head[:16], int64(len(head)))
	f.Add([]byte("RADGENv1\x00\x00"), int64(10))
	f.Add([]byte("\x80\x02}q\x00"), int64(5))
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}"), int64(24))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff{"), int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		if sniffModel(b, size) != kindSafetensors {
			return
		}
		if len(b) < 9 || b[8] != '{' {
			t.Fatalf("%q read as safetensors", b)
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if n < 2 || (size >= 0 && (size < 10 || n > uint64(size)-8)) {
			t.Errorf("a header of %d bytes in a file of %d read as safetensors", n, size)
		}
	})
}

// The R2Gen flags given with a radgen checkpoint, which carries what they
// say, are named as ignored.
func TestR2GenFlagsIgnored(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	writePNG(t, filepath.Join(dir, "0.png"), 64, 64)
	writePNG(t, filepath.Join(dir, "1.png"), 64, 64)
	code, out, log := run("generate", "-model", model, "-beam", "1", "-threshold", "5", "-heads", "2", filepath.Join(dir, "0.png"), filepath.Join(dir, "1.png"))
	if code != 0 || !strings.HasPrefix(out, "0.png\t") {
		t.Fatalf("status %d, %q\n%s", code, out, log)
	}
	if want := `level=WARN msg="ignored: a radgen checkpoint carries its configuration and vocabulary" flags="-heads -threshold"`; !strings.Contains(log, want) {
		t.Errorf("the log lacks %s:\n%s", want, log)
	}
	if strings.Contains(log, "R2Gen settings") {
		t.Errorf("R2Gen settings logged for a radgen checkpoint:\n%s", log)
	}
}
