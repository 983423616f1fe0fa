package data

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/vision"
)

// synthDir is a small synthetic IU-style data set, written once per test
// binary by the first test that needs it and removed by TestMain.
var (
	synthDir  string
	synthOnce = sync.OnceValue(func() error {
		dir, err := os.MkdirTemp("", "radgen-synth-")
		if err != nil {
			return err
		}
		synthDir = dir
		_, err = WriteSynthetic(context.Background(), dir, SynthConfig{Train: 21, Val: 3, Test: 5, Width: 72, Height: 80, Seed: 9})
		return err
	})
)

func TestMain(m *testing.M) {
	code := m.Run()
	if synthDir != "" {
		os.RemoveAll(synthDir)
	}
	os.Exit(code)
}

func synthSplit(t testing.TB, split string) (*Dataset, string) {
	t.Helper()
	if err := synthOnce(); err != nil {
		t.Fatal(err)
	}
	dir := synthDir
	ann, err := LoadAnnotation(filepath.Join(dir, "annotation.json"))
	if err != nil {
		t.Fatal(err)
	}
	reports, _ := ann.Reports("train")
	tok, err := BuildTokenizer(IUXray, 3, reports)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDataset(ann, split, tok, DatasetConfig{ImageDir: filepath.Join(dir, "images")})
	if err != nil {
		t.Fatal(err)
	}
	return ds, dir
}

func collect(t *testing.T, l *Loader, epoch int) []*Batch {
	t.Helper()
	var out []*Batch
	for b, err := range l.Epoch(context.Background(), epoch) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestLoaderBatches(t *testing.T) {
	ds, _ := synthSplit(t, "train")
	tr := vision.TrainTransform(40, 32)
	l, err := NewLoader(ds, WithBatchSize(4), WithTransform(tr), WithSeed(5), WithWorkers(3))
	if err != nil {
		t.Fatal(err)
	}
	bs := collect(t, l, 0)
	if len(bs) != 6 || l.Len() != 6 {
		t.Fatalf("%d batches (Len %d), want 6 for 21 studies of 4", len(bs), l.Len())
	}
	seen := map[string]bool{}
	for k, b := range bs {
		B := b.Size()
		if want := min(4, 21-4*k); B != want {
			t.Fatalf("batch %d has %d studies", k, B)
		}
		if b.Views != 2 || b.Height != 32 || b.Width != 32 || len(b.Images) != B*2*3*32*32 {
			t.Fatalf("images %d×%d×%d, %d floats", b.Views, b.Height, b.Width, len(b.Images))
		}
		for i, e := range b.Examples {
			seen[e.ID] = true
			if b.Lengths[i] != len(e.IDs) || !slices.Equal(b.Target(i)[:len(e.IDs)], e.IDs) {
				t.Fatalf("targets of %s", e.ID)
			}
			for j := range b.SeqLen {
				m, tg := b.Masks[i*b.SeqLen+j], b.Targets[i*b.SeqLen+j]
				if (j < len(e.IDs)) != (m == 1) || j >= len(e.IDs) && (m != 0 || tg != 0) {
					t.Fatalf("%s position %d: mask %v target %d", e.ID, j, m, tg)
				}
			}
		}
		// Normalised values of an 8-bit image lie in [−2.2, 2.7].
		for _, v := range b.Images {
			if v < -2.2 || v > 2.7 {
				t.Fatalf("image value %v", v)
			}
		}
	}
	if len(seen) != 21 {
		t.Errorf("%d distinct studies in an epoch", len(seen))
	}

	// Reproducible: same seed and epoch, same batches, whatever the
	// scheduling; another epoch, another order and other crops.
	l2, _ := NewLoader(ds, WithBatchSize(4), WithTransform(tr), WithSeed(5), WithWorkers(1), WithPrefetch(0))
	again := collect(t, l2, 0)
	for k := range bs {
		if !slices.Equal(bs[k].IDs(), again[k].IDs()) || !slices.Equal(bs[k].Images, again[k].Images) {
			t.Fatalf("batch %d differs between identical runs", k)
		}
	}
	other := collect(t, l, 1)
	if slices.Equal(bs[0].IDs(), other[0].IDs()) && slices.Equal(bs[1].IDs(), other[1].IDs()) {
		t.Error("epochs 0 and 1 have the same order")
	}
}

// The evaluation loader equals the vision pipeline run by hand on each file.
func TestLoaderMatchesVision(t *testing.T) {
	ds, _ := synthSplit(t, "test")
	l, err := NewLoader(ds, WithBatchSize(2), WithTransform(vision.TestTransform(24)))
	if err != nil {
		t.Fatal(err)
	}
	bs := collect(t, l, 0)
	if bs[0].Examples[0].ID != ds.Examples[0].ID {
		t.Fatal("test split shuffled")
	}
	n := 3 * 24 * 24
	for k, b := range bs {
		for i := range b.Examples {
			for v := range 2 {
				px, err := vision.DecodeFile(ds.ImagePath(2*k+i, v))
				if err != nil {
					t.Fatal(err)
				}
				want, _ := vision.TestTransform(24).Apply(nil, px, nil)
				off := (i*2 + v) * n
				if !slices.Equal(b.Images[off:off+n], want.Pix) {
					t.Fatalf("batch %d study %d view %d differs", k, i, v)
				}
			}
		}
	}
}

func TestLoaderErrors(t *testing.T) {
	ds, dir := synthSplit(t, "val")
	if _, err := NewLoader(ds, WithTransform(vision.Transform{Shorter: 30, Std: vision.ImageNetStd})); err == nil {
		t.Error("a transform of variable output size accepted")
	}
	if _, err := NewLoader(ds, WithBatchSize(0)); err == nil {
		t.Error("batch size 0 accepted")
	}
	short := *ds
	short.Examples = slices.Clone(ds.Examples)
	short.Examples[2].Images = short.Examples[2].Images[:1]
	if _, err := NewLoader(&short); !errors.Is(err, ErrBadStudy) || !strings.Contains(err.Error(), short.Examples[2].ID) {
		t.Errorf("an example with one view: %v", err)
	}
	// A missing and a corrupt image: the error names the study.
	bad := *ds
	bad.Examples = slices.Clone(ds.Examples)
	bad.Examples[1].Images = []string{bad.Examples[1].Images[0], "nowhere/1.png"}
	corrupt := filepath.Join(dir, "images", "corrupt.png")
	if err := os.WriteFile(corrupt, []byte("\x89PNG\r\n\x1a\nnot really"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad.Examples[2].Images = []string{"corrupt.png", bad.Examples[2].Images[1]}
	for i, id := range []string{bad.Examples[1].ID, bad.Examples[2].ID} {
		one := bad
		one.Examples = bad.Examples[i+1 : i+2]
		l, err := NewLoader(&one, WithTransform(vision.TestTransform(16)))
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for _, err := range l.Epoch(context.Background(), 0) {
			got = err
		}
		if !errors.Is(got, ErrImage) || !strings.Contains(got.Error(), fmt.Sprintf("%q", id)) {
			t.Errorf("error %v, want ErrImage naming %q", got, id)
		}
	}
	// A pixel limit below the film size.
	l, _ := NewLoader(ds, WithTransform(vision.TestTransform(16)), WithDecodeOptions(vision.WithMaxPixels(100)))
	for _, err := range l.Epoch(context.Background(), 0) {
		if !errors.Is(err, vision.ErrTooLarge) {
			t.Errorf("error %v, want ErrTooLarge", err)
		}
	}
}

// Cancelling or breaking out stops the background work.
func TestLoaderStops(t *testing.T) {
	ds, _ := synthSplit(t, "train")
	before := runtime.NumGoroutine()
	l, _ := NewLoader(ds, WithBatchSize(2), WithTransform(vision.TestTransform(16)), WithPrefetch(3))
	for range l.Epoch(context.Background(), 0) {
		break
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	n := 0
	for _, err := range l.Epoch(ctx, 0) {
		n++
		cancel()
		last = err
	}
	if !errors.Is(last, context.Canceled) || n > 5 {
		t.Errorf("after cancel: %d results, last error %v", n, last)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines left, %d before", g, before)
	}
}

func TestCollateTextOnly(t *testing.T) {
	ds, _ := synthSplit(t, "val")
	l, err := NewLoader(ds, WithoutImages(), WithBatchSize(8))
	if err != nil {
		t.Fatal(err)
	}
	bs := collect(t, l, 0)
	if len(bs) != 1 || bs[0].Images != nil || bs[0].Size() != 3 {
		t.Fatalf("text-only batches: %d", len(bs))
	}
	exs := []*Example{{IDs: []int{0, 5, 6, 0}}, {IDs: []int{0, 7}}}
	b := Collate(exs)
	if b.SeqLen != 4 || !slices.Equal(b.Targets, []int{0, 5, 6, 0, 0, 7, 0, 0}) || !slices.Equal(b.Masks, []float32{1, 1, 1, 1, 1, 1, 0, 0}) {
		t.Errorf("Collate: T %d targets %v masks %v", b.SeqLen, b.Targets, b.Masks)
	}
}

// BenchmarkLoader measures images decoded and transformed per second on
// synthetic 512×512 PNG films (about IU X-Ray's size), one batch of 16
// two-view studies per iteration, against a baseline of plain sequential
// png.Decode of the same files.
func BenchmarkLoader(b *testing.B) {
	dir := b.TempDir()
	if _, err := WriteSynthetic(context.Background(), dir, SynthConfig{Train: 16, Val: 1, Test: 16, Width: 512, Height: 512}); err != nil {
		b.Fatal(err)
	}
	ann, _ := LoadAnnotation(filepath.Join(dir, "annotation.json"))
	reports, _ := ann.Reports("train")
	tok, _ := BuildTokenizer(IUXray, 3, reports)
	// Baseline: the same files through image/png alone, one at a time.
	test, _ := NewDataset(ann, "test", tok, DatasetConfig{ImageDir: filepath.Join(dir, "images")})
	b.Run("baseline/png.Decode-sequential", func(b *testing.B) {
		images := 0
		for b.Loop() {
			for i := range test.Examples {
				for v := range test.Views {
					f, err := os.Open(test.ImagePath(i, v))
					if err != nil {
						b.Fatal(err)
					}
					_, err = png.Decode(bufio.NewReader(f))
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
					images++
				}
			}
		}
		b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "images/s")
	})
	for _, split := range []string{"test", "train"} {
		ds, err := NewDataset(ann, split, tok, DatasetConfig{ImageDir: filepath.Join(dir, "images")})
		if err != nil {
			b.Fatal(err)
		}
		l, _ := NewLoader(ds, WithBatchSize(16))
		b.Run(split+"/"+l.transform.String(), func(b *testing.B) {
			images := 0
			for b.Loop() {
				for bt, err := range l.Epoch(context.Background(), images) {
					if err != nil {
						b.Fatal(err)
					}
					images += bt.Size() * bt.Views
				}
			}
			b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "images/s")
		})
	}
}
