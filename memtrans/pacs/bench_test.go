package pacs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/pacs"
)

// BenchmarkTransport measures what the PACS transport costs: studies per
// minute from one folder of DICOM files, reported two ways on the same
// model and options —
//
//	generate: what `cli generate -sr dir folder` does, in process: read the
//	          folder (StudiesFromDICOMDir), Generate in chunks of 16, build
//	          each SR;
//	orthanc:  the folder stored in Orthanc beforehand (not timed), then a
//	          worker's RunOnce: QIDO-RS, WADO-RS, the same views and
//	          generation one study at a time, STOW-RS of each SR.
//
// The folder is $RADGEN_BENCH_DICOM (any folder StudiesFromDICOMDir reads)
// or, by default, the real films of $RADGEN_REAL_DICOM made one-view
// studies as the acceptance test makes them (dcmtk needed). The model is
// $RADGEN_BENCH_MODEL (a .radgen checkpoint) or the tiny untrained one;
// $RADGEN_BENCH_BEAM sets the beam (default 3, as the CLI's). Each
// iteration of "orthanc" names the model with another checksum, so its SRs
// get new UIDs and every study is reported again rather than found
// reported. Run it on a quiet machine, binaries in turns:
//
//	go test ./memtrans/pacs -run '^$' -bench Transport -benchtime 3x -count 6 | tee transport.txt
//	benchstat -col /path transport.txt
//
// and compare the studies/min of the two.
func BenchmarkTransport(b *testing.B) {
	dir := os.Getenv("RADGEN_BENCH_DICOM")
	if dir == "" {
		real := testutil.Dir(b, "RADGEN_REAL_DICOM", "real/dicom")
		dir = benchFolder(b, real)
	}
	var model *memtrans.Model
	if p := os.Getenv("RADGEN_BENCH_MODEL"); p != "" {
		m, err := memtrans.LoadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		model = m
	} else {
		model, _ = tinyModel(b, 1)
	}
	beam := 3
	if s := os.Getenv("RADGEN_BENCH_BEAM"); s != "" {
		var err error
		if beam, err = strconv.Atoi(s); err != nil || beam < 1 {
			b.Fatalf("RADGEN_BENCH_BEAM=%q", s)
		}
	}
	gen := []memtrans.GenerateOption{memtrans.WithBeamSize(beam)}
	if beam == 1 {
		gen = []memtrans.GenerateOption{memtrans.WithGreedy(false)}
	}
	ctx := context.Background()
	views := model.Config().Views
	studies, err := memtrans.StudiesFromDICOMDir(ctx, dir, views)
	if len(studies) == 0 {
		b.Fatalf("no studies in %s: %v", dir, err)
	}
	n := len(studies)
	b.Logf("%d studies of %d views in %s (left out: %v)", n, views, dir, err)
	info := dicomsr.Model{Name: "radgen benchmark", Version: "0"}

	b.Run("path=generate", func(b *testing.B) {
		for b.Loop() {
			studies, _ := memtrans.StudiesFromDICOMDir(ctx, dir, views)
			for i := 0; i < len(studies); i += 16 {
				part := studies[i:min(i+16, len(studies))]
				reps, err := model.Generate(ctx, part, gen...)
				if err != nil {
					b.Fatal(err)
				}
				for j, r := range reps {
					if _, err := dicomsr.New(r, part[j].DICOM, info, time.Now()); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Minutes(), "studies/min")
	})

	b.Run("path=orthanc", func(b *testing.B) {
		srv := orthanctest.Start(b)
		c := client(b, srv.URL)
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = c.Store(ctx, "", data)
			return err
		})
		if err != nil {
			b.Fatalf("storing %s: %v", dir, err)
		}
		iter := 0
		for b.Loop() {
			iter++
			mi := info
			mi.Checksum = fmt.Sprintf("bench-%d", iter) // new SR UIDs: every study is reported again
			w, err := pacs.New(pacs.Config{PACS: c, Model: model, ModelInfo: mi, Immediate: true, Generate: gen, TempDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.RunOnce(ctx); err != nil {
				b.Fatal(err)
			}
			if st := w.Stats(); st.Reported != n {
				b.Fatalf("reported %d of %d studies (%+v)", st.Reported, n, w.DeadLetters())
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Minutes(), "studies/min")
	})
}

// benchFolder writes the real films as one-view studies into a folder.
func benchFolder(b *testing.B, real string) string {
	singles, _ := realStudies(b, real)
	out := b.TempDir()
	for _, s := range singles {
		for _, f := range s.files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return out
}
