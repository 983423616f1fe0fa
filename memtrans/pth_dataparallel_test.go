package memtrans

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

var updateCLIFixture = flag.Bool("update-cli-fixture", false, "rewrite memtrans/cli/testdata's model_best.pth and annotation.json")

// cliFixtureDir holds the R2Gen checkpoint memtrans/cli's tests read,
// written by TestLoadR2GenDataParallel with -update-cli-fixture.
const cliFixtureDir = "cli/testdata"

// dataParallelFixture returns the annotation, its tokenizer and the
// weights of a tiny R2Gen saved from a DataParallel model: every name
// starts with "module.". The extractor's weights are constant per output
// channel, so that its 19 MB deflate to a few kilobytes; the encoder–decoder's are
// multiples of 1/16 drawn from a fixed seed.
func dataParallelFixture(t *testing.T) (*data.Annotation, *data.Tokenizer, []pth.Tensor) {
	t.Helper()
	reports := []string{
		"the heart is normal in size. the lungs are clear.",
		"the heart is enlarged. there is a small left pleural effusion.",
		"the lungs are clear. no pleural effusion or pneumothorax.",
		"the heart is normal in size. there is no pneumothorax.",
		"there is a small right pleural effusion. the lungs are clear.",
		"the heart is enlarged. no pneumothorax.",
	}
	splits := map[string][]data.Study{}
	for i, r := range reports {
		id := string(rune('a' + i))
		splits["train"] = append(splits["train"], data.Study{ID: id, Report: r, ImagePath: []string{id + "/0.png", id + "/1.png"}, Split: "train"})
	}
	for _, id := range []string{"x", "y"} {
		splits["test"] = append(splits["test"], data.Study{ID: id, Report: reports[0], ImagePath: []string{id + "/0.png", id + "/1.png"}, Split: "test"})
	}
	ann := data.NewAnnotation(splits)
	tok, err := data.BuildTokenizer(data.IUXray, data.IUXray.Threshold(), reports)
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(c *r2gen.Config) { c.DModel, c.DFF, c.Layers, c.Heads, c.MemoryHeads = 16, 16, 1, 2, 2 })
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(29, 2))
	var ts []pth.Tensor
	for _, p := range radgen.Params(m) {
		shape := p.Tensor.Shape()
		v := make([]float32, p.Tensor.Len())
		switch {
		case strings.HasSuffix(p.Name, "running_var"):
			for i := range v {
				v[i] = 1
			}
		case strings.HasSuffix(p.Name, "running_mean"):
		case strings.HasPrefix(p.Name, "visual_extractor."):
			if len(shape) == 1 { // batch norm: weight 1, bias in [0, 0.04]
				for i := range v {
					v[i] = 0.01 * float32(i%5)
					if strings.HasSuffix(p.Name, "weight") {
						v[i] = 1
					}
				}
				break
			}
			// A convolution: one value per output channel, of a
			// zero-mean pattern of period 7, at He's scale for the
			// fan-in (long runs of one value deflate best).
			fanIn := p.Tensor.Len() / shape[0]
			amp := float32(math.Sqrt(2 / float64(fanIn)))
			for i := range v {
				v[i] = amp * float32(i/fanIn%7-3) / 2
			}
		default:
			for i := range v {
				v[i] = float32(rng.IntN(17)-8) / 16
			}
		}
		ts = append(ts, pth.Tensor{Name: "module." + p.Name, Shape: slices.Clone(shape), Data: v})
		if strings.HasSuffix(p.Name, "running_var") {
			ts = append(ts, pth.Tensor{Name: "module." + strings.TrimSuffix(p.Name, "running_var") + "num_batches_tracked", Shape: []int{}, Data: []float32{100}})
		}
	}
	return ann, tok, ts
}

// deflatedPth writes ts as R2Gen's checkpoint with its zip records
// deflated (torch.save stores them; a re-zipped file deflates them, and
// the reader takes both).
func deflatedPth(t *testing.T, ts []pth.Tensor) []byte {
	t.Helper()
	var stored bytes.Buffer
	if err := pth.Write(&stored, ts, &pth.Meta{Epoch: 12, MonitorBest: 0.125}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(stored.Bytes()), int64(stored.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestLoadR2GenDataParallel loads a checkpoint saved from a DataParallel
// model (every name under "module.") and requires every parameter bit for
// bit; the fixture memtrans/cli's tests read holds the same tensors
// (rewrite it with -update-cli-fixture).
func TestLoadR2GenDataParallel(t *testing.T) {
	ann, tok, ts := dataParallelFixture(t)
	file := deflatedPth(t, ts)
	path := filepath.Join(t.TempDir(), "model_best.pth")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadR2GenFile(path, tok, 2, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := map[string]pth.Tensor{}
	for _, x := range ts {
		want[x.Name] = x
	}
	n := 0
	for _, p := range radgen.Params(m) {
		w, ok := want["module."+p.Name]
		if !ok {
			t.Fatalf("parameter %q: no module.%s in the file", p.Name, p.Name)
		}
		if !slices.Equal(p.Tensor.Shape(), w.Shape) || !slices.Equal(p.Tensor.Data(), w.Data) {
			t.Fatalf("parameter %q differs after loading", p.Name)
		}
		n++
	}
	t.Logf("%d parameters identical from %d module.-named tensors (%d bytes deflated)", n, len(ts), len(file))

	if *updateCLIFixture {
		b, err := json.MarshalIndent(ann, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cliFixtureDir, "annotation.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cliFixtureDir, "model_best.pth"), file, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", cliFixtureDir)
		return
	}
	// The committed fixture holds the same tensors (its zip bytes may
	// differ with the Go release that deflated them).
	b, err := os.ReadFile(filepath.Join(cliFixtureDir, "model_best.pth"))
	if err != nil {
		t.Fatalf("%v (write it with go test ./memtrans -run DataParallel -update-cli-fixture)", err)
	}
	f, err := pth.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); len(got) != len(ts) {
		t.Fatalf("the fixture has %d tensors, want %d (rewrite it with -update-cli-fixture)", len(got), len(ts))
	}
	for _, x := range ts {
		v, shape, err := f.Float32(x.Name)
		if err != nil || !slices.Equal(shape, x.Shape) || !slices.Equal(v, x.Data) {
			t.Fatalf("fixture tensor %q differs (%v); rewrite it with -update-cli-fixture", x.Name, err)
		}
	}
	a, err := data.OpenAnnotation(filepath.Join(cliFixtureDir, "annotation.json"))
	if err != nil {
		t.Fatal(err)
	}
	fixtureReports, _ := a.Reports("train")
	wantReports, _ := ann.Reports("train")
	if !slices.Equal(fixtureReports, wantReports) {
		t.Errorf("the fixture's annotation differs; rewrite it with -update-cli-fixture")
	}
}
