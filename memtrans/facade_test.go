package memtrans

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// r2genSource presents the golden files as one R2Gen state_dict.
type r2genSource struct{ ed, ext *safetensors.File }

func (s r2genSource) Names() []string {
	var out []string
	for _, n := range s.ed.Names() {
		out = append(out, "encoder_decoder."+n)
	}
	for _, n := range s.ext.Names() {
		if strings.HasPrefix(n, "visual_extractor.") {
			out = append(out, n)
		}
	}
	return out
}

func (s r2genSource) Float32(name string) ([]float32, []int, error) {
	if rest, ok := strings.CutPrefix(name, "encoder_decoder."); ok {
		return s.ed.Float32(rest)
	}
	return s.ext.Float32(name)
}

// goldenModel loads the shared golden through the facade, with the
// tokenizer rebuilt from the IU X-Ray annotation as R2Gen does.
func goldenModel(t *testing.T, opts ...Option) (*Model, *golden) {
	g := loadGolden(t)
	ext := openSafetensors(t, filepath.Join(g.Dir, "extractor.safetensors"))
	annPath := testutil.File(t, "RADGEN_IU_ANNOTATION", "data/iu_xray/annotation.json")
	ann, err := data.LoadAnnotation(annPath)
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	train, err := ann.Split("train")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range train {
		reports = append(reports, s.Report)
	}
	tok, err := data.BuildTokenizer(data.IUXray, g.IntConfig(t, "threshold"), reports)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadR2Gen(r2genSource{g.Weights, ext}, tok, 2, g.IntConfig(t, "num_heads"), g.IntConfig(t, "rm_num_heads"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func TestFacadeReproducesGoldenBeam3(t *testing.T) {
	m, g := goldenModel(t)
	defer m.Close()
	feats := g.Tensor(t, "att_feats")
	seq, shape := g.Ints(t, "beam3_seq")
	ids := []string{"a", "b", "c", "d"}[:shape[0]]
	reps, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		want := m.Tokenizer().Decode(seq[i*shape[1] : (i+1)*shape[1]])
		if r.Text != want {
			t.Errorf("study %d:\n got %q\nwant %q", i, r.Text, want)
		}
	}
	t.Logf("first golden report: %q", reps[0].Text)

	// Concurrent callers get the same reports as sequential ones.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := m.GenerateFeatures(context.Background(), ids, feats, WithBeamSize(3))
			if err != nil {
				errs <- err
				return
			}
			for i := range got {
				if got[i].Text != reps[i].Text {
					errs <- errors.New("concurrent report differs: " + got[i].Text)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	skipUnderRace(t)
	m, g := goldenModel(t)
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("native checkpoint: %d bytes", buf.Len())
	m2, err := Load(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	a, b := radgen.Params(m), radgen.Params(m2)
	if len(a) != len(b) {
		t.Fatalf("%d tensors saved, %d loaded", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			t.Fatalf("tensor %d: %s vs %s", i, a[i].Name, b[i].Name)
		}
		x, y := a[i].Tensor.Float64s(), b[i].Tensor.Float64s()
		for j := range x {
			if x[j] != y[j] {
				t.Fatalf("%s differs after the round trip", a[i].Name)
			}
		}
	}
	feats := g.Tensor(t, "att_feats")
	ids := make([]string, feats.Dim(0))
	r1, err := m.GenerateFeatures(context.Background(), ids, feats, WithGreedy(false))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m2.GenerateFeatures(context.Background(), ids, feats, WithGreedy(false))
	if err != nil {
		t.Fatal(err)
	}
	for i := range r1 {
		if r1[i].Text != r2[i].Text {
			t.Errorf("report %d differs after reload", i)
		}
	}

	// Atomic file save and load.
	path := filepath.Join(t.TempDir(), "model.radgen")
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err != nil {
		t.Fatal(err)
	}

	// Every truncation and a flipped byte are errors naming the problem.
	full := buf.Bytes()
	for _, n := range []int{0, 7, 20, 48, len(full) / 2, len(full) - 1} {
		if _, err := Load(bytes.NewReader(full[:n])); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("truncated to %d bytes: %v", n, err)
		}
	}
	bad := append([]byte(nil), full...)
	bad[len(bad)/2] ^= 0x40
	if _, err := Load(bytes.NewReader(bad)); err == nil {
		t.Error("corrupted checkpoint loaded")
	}
	if _, err := Load(bytes.NewReader(full), WithModelOptions(WithBudget(Budget{MaxCheckpointBytes: 1000}))); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("size limit: %v", err)
	}
	if m.Close() != nil || m.Close() != nil {
		t.Error("Close failed")
	}
	if _, err := m.GenerateFeatures(context.Background(), ids, feats); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	_ = os.Remove(path)
}

func FuzzLoad(f *testing.F) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal."})
	if err != nil {
		f.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(t *r2gen.Config) { t.DModel, t.DFF, t.Layers = 8, 8, 1 })
	editR2(&cfg, func(t *r2gen.Config) { t.Heads, t.MemoryHeads = 2, 2 })
	m, err := New(cfg, tok, 1)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(checkpointMagic))
	f.Add(append([]byte(checkpointMagic), make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Load(bytes.NewReader(b), WithModelOptions(WithBudget(Budget{MaxCheckpointBytes: 64 << 20})))
		if err == nil && m == nil {
			t.Fatal("nil model without error")
		}
	})
}
