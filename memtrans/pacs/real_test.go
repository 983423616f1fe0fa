package pacs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/pacs"
)

// realStudy is a study built from real files for the acceptance test.
type realStudy struct {
	uid     string
	sources []string // SOP Instance UIDs the SR must reference
	files   []string
}

// realStudies copies every file of the manifest in dir into studies of
// their own: each file alone (Modality kept, CR), and pairs of files as
// two-view studies (a PA and a lateral, Modality DX). Each copy gets new
// UIDs — the five TCIA encodings share one SOP Instance UID, which a PACS
// keeps once — and a View Position when it states none (the TCIA film
// states none, and a study without a frontal view is dead-lettered, as
// TestWorker shows). dcmtk's dcmconv and dcmodify rewrite the files (and
// turn the UN attributes of the GDCM-written JPEG 2000 file, which Orthanc
// refuses, into their real VRs).
func realStudies(t testing.TB, dir string) (singles, pairs []realStudy) {
	t.Helper()
	for _, tool := range []string{"dcmconv", "dcmodify"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install dcmtk; .ci/run does): the real films cannot be given study UIDs of their own", tool)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Skipf("no manifest in %s: %v", dir, err)
	}
	var manifest []struct{ File string }
	if err := json.Unmarshal(b, &manifest); err != nil || len(manifest) == 0 {
		t.Fatalf("manifest of %s: %v", dir, err)
	}
	out := t.TempDir()
	rewrite := func(src, dst, study, series, sop, patient, view, modality string) {
		t.Helper()
		if o, err := exec.Command("dcmconv", "+uc", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("dcmconv %s: %v\n%s", src, err, o)
		}
		args := []string{"-nb", "-i", "(0020,000d)=" + study, "-i", "(0020,000e)=" + series, "-i", "(0008,0018)=" + sop,
			"-i", "(0018,5101)=" + view, "-i", "(0010,0020)=" + patient}
		if modality != "" {
			args = append(args, "-i", "(0008,0060)="+modality)
		}
		if o, err := exec.Command("dcmodify", append(args, dst)...).CombinedOutput(); err != nil {
			t.Fatalf("dcmodify %s: %v\n%s", src, err, o)
		}
	}
	for i, m := range manifest {
		s := realStudy{uid: uid(700 + i)}
		sop := s.uid + ".1.1"
		dst := filepath.Join(out, m.File)
		rewrite(filepath.Join(dir, m.File), dst, s.uid, s.uid+".1", sop, "REAL-"+s.uid[len(s.uid)-3:], "PA", "")
		s.sources, s.files = []string{sop}, []string{dst}
		singles = append(singles, s)
	}
	for i := 0; i+1 < len(manifest); i += 2 {
		s := realStudy{uid: uid(800 + i/2)}
		for j, view := range []string{"PA", "LL"} {
			m := manifest[i+j]
			series := s.uid + "." + string(rune('1'+j))
			dst := filepath.Join(out, "pair-"+s.uid+"-"+m.File)
			rewrite(filepath.Join(dir, m.File), dst, s.uid, series, series+".1", "PAIR-"+s.uid[len(s.uid)-3:], view, "DX")
			s.sources = append(s.sources, series+".1")
			s.files = append(s.files, dst)
		}
		pairs = append(pairs, s)
	}
	return singles, pairs
}

// TestAcceptanceRealDICOM is the end-to-end check: every file of
// $RADGEN_REAL_DICOM (default ../shared/real/dicom, found through its
// manifest) and two-view studies built from them are stored in Orthanc by
// STOW-RS; a one-view worker (CR) and a two-view worker (DX) report on
// them; then each study has exactly one radgen SR series (QIDO-RS), whose
// SR, retrieved by WADO-RS, passes dciodvfy and references the source
// instances.
func TestAcceptanceRealDICOM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) covers it")
	}
	dir := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
	singles, pairs := realStudies(t, dir)
	pacsSrv := orthanctest.Start(t)
	c := client(t, pacsSrv.URL)
	for _, s := range append(append([]realStudy(nil), singles...), pairs...) {
		for _, f := range s.files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			store(t, c, b)
		}
	}
	oneView, _ := tinyModel(t, 1)
	twoViews, _ := tinyModel(t, 2)
	ctx := context.Background()
	for _, w := range []*pacs.Worker{
		newWorker(t, pacs.Config{PACS: c, Model: oneView, Modalities: []string{"CR"}, Immediate: true}),
		newWorker(t, pacs.Config{PACS: c, Model: twoViews, Modalities: []string{"DX"}, Immediate: true}),
	} {
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("stats %+v, dead letters %+v", w.Stats(), w.DeadLetters())
		if len(w.DeadLetters()) != 0 {
			t.Errorf("dead letters: %+v", w.DeadLetters())
		}
	}
	for _, s := range append(singles, pairs...) {
		series, files := srSeries(t, c, s.uid)
		if len(series) != 1 || len(files) != 1 {
			t.Errorf("study %s (%s): %d SR series, %d SR instances, want 1", s.uid, filepath.Base(s.files[0]), len(series), len(files))
			continue
		}
		checkSR(t, s.uid, files[0], s.sources)
	}
	t.Logf("%d one-view and %d two-view studies from %s, each with one SR", len(singles), len(pairs), dir)
}
