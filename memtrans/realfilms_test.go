package memtrans

import (
	"context"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/data"
)

// realFilmModel is an untrained tiny generator taking views views; real
// films have no trained weights here, so the tests assert behaviour
// (native sizes accepted, determinism), not report quality.
func realFilmModel(t *testing.T, views int) *Model {
	t.Helper()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal in size. The lungs are clear.", "No pneumothorax or pleural effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	cfg.Views = views
	m, err := New(cfg, tok, 11)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// realStudies groups the image files of dir into studies by the prefix of
// their names before the first "_" (IU X-Ray names its files
// <study>_IM-<series>-<view>.dcm.png), files in name order.
func realStudies(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("real films not available: %v", err)
	}
	groups := map[string][]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(e.Name()), ".png") {
			continue
		}
		id, _, _ := strings.Cut(e.Name(), "_")
		groups[id] = append(groups[id], filepath.Join(dir, e.Name()))
	}
	for _, g := range groups {
		sort.Strings(g)
	}
	return groups
}

// nativeSize reads an image file's size from its header.
func nativeSize(t *testing.T, path string) image.Point {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _, err := image.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return image.Pt(c.Width, c.Height)
}

// generateTwice runs StudyFromFiles → Generate twice on the same files and
// requires the same report; it checks the views arrive at their native
// sizes.
func generateTwice(t *testing.T, m *Model, id string, paths []string) Report {
	t.Helper()
	var reps [2]Report
	for run := range reps {
		s, err := StudyFromFiles(id, paths...)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range s.Views {
			if got, want := v.Bounds().Size(), nativeSize(t, paths[i]); got != want {
				t.Fatalf("%s view %d: decoded %v, the file is %v", id, i, got, want)
			}
		}
		out, err := m.Generate(context.Background(), []Study{s}, WithBeamSize(3))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		reps[run] = out[0]
	}
	a, b := reps[0], reps[1]
	if a.Text != b.Text || a.LogProb != b.LogProb || !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.TokenLogProbs, b.TokenLogProbs) {
		t.Fatalf("%s: two runs differ:\n%q (%v)\n%q (%v)", id, a.Text, a.LogProb, b.Text, b.LogProb)
	}
	if len(a.Tokens) == 0 || a.StudyID != id {
		t.Fatalf("%s: empty report %+v", id, a)
	}
	return a
}

// TestRealFilmsIUXray: the IU X-Ray study with two or more views in
// $RADGEN_REAL/films/iu_xray goes through StudyFromFiles → Generate with a
// tiny two-view model at the films' native sizes, twice, with equal
// reports.
func TestRealFilmsIUXray(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes full-size films")
	}
	dir := filepath.Join(testutil.Dir(t, "RADGEN_REAL", "real"), "films", "iu_xray")
	groups := realStudies(t, dir)
	m := realFilmModel(t, 2)
	ran := 0
	for id, paths := range groups {
		if len(paths) < 2 {
			continue
		}
		// The model takes two views: the first two files (IU X-Ray numbers
		// the frontal view before the lateral one).
		rep := generateTwice(t, m, id, paths[:2])
		t.Logf("IU X-Ray study %s (%v, %v): %d tokens, log p %.4f", id, nativeSize(t, paths[0]), nativeSize(t, paths[1]), len(rep.Tokens), rep.LogProb)
		ran++
	}
	if ran == 0 {
		t.Skipf("no study with two views in %s", dir)
	}
}

// TestRealFilmsNIH: each NIH ChestX-ray14 film is a one-view study for a
// tiny one-view model, at its native size, deterministic.
func TestRealFilmsNIH(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes full-size films")
	}
	dir := filepath.Join(testutil.Dir(t, "RADGEN_REAL", "real"), "films", "nih_cxr14")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("NIH films not available: %v", err)
	}
	m := realFilmModel(t, 1)
	ran := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(e.Name()), ".png") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		rep := generateTwice(t, m, strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), []string{p})
		t.Logf("NIH %s (%v): %d tokens, log p %.4f", e.Name(), nativeSize(t, p), len(rep.Tokens), rep.LogProb)
		ran++
	}
	if ran == 0 {
		t.Skipf("no films in %s", dir)
	}
}
