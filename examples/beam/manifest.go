package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// maxManifestLine bounds one manifest line.
const maxManifestLine = 1 << 20

// readManifest adds the manifest reader to s: the studies of the files
// matching glob, keyed by their batch: the batch-th run of batch
// consecutive valid studies of a file, as examples/radgen generate -manifest
// groups them. Generating batch by batch makes every study's report
// independent of how a runner splits the work, and equal to radgen's.
// Malformed lines are dead letters.
func readManifest(s beam.Scope, glob string, batch int) (studies, dead beam.PCollection) {
	s = s.Scope("ReadManifest")
	return beam.ParDo2(s, &ReadManifestFn{Glob: glob, Batch: batch}, beam.Impulse(s))
}

// ReadManifestFn reads the manifests matching Glob.
type ReadManifestFn struct {
	Glob  string
	Batch int
}

// ProcessElement emits (batch key, study) for every valid line and a dead
// letter for every malformed one.
func (f *ReadManifestFn) ProcessElement(ctx context.Context, _ []byte, emit func(string, Study), dead func(string)) error {
	files, err := listFiles(ctx, f.Glob)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no manifest matches %s", f.Glob)
	}
	for _, file := range files {
		if err := f.readFile(ctx, file, emit, dead); err != nil {
			return err
		}
	}
	return nil
}

func (f *ReadManifestFn) readFile(ctx context.Context, file string, emit func(string, Study), dead func(string)) error {
	var r io.ReadCloser
	if isRemote(file) {
		fs, err := filesystem.New(ctx, file)
		if err != nil {
			return err
		}
		defer fs.Close()
		if r, err = fs.OpenRead(ctx, file); err != nil {
			return err
		}
	} else {
		fh, err := os.Open(file)
		if err != nil {
			return err
		}
		r = fh
	}
	defer r.Close()
	base := dirOf(file)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxManifestLine)
	seq := 0
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		st, err := parseStudy(text, base)
		if err != nil {
			studiesFailed.Inc(ctx, 1)
			dead(DeadLetter{ID: st.ID, File: file, Error: fmt.Sprintf("line %d: %v", line, err)}.line())
			continue
		}
		st.Seq = seq
		emit(fmt.Sprintf("%s#%d", file, seq/max(1, f.Batch)), st)
		seq++
	}
	if err := sc.Err(); err != nil {
		// A line beyond the limit ends the file: the rest is one dead letter.
		studiesFailed.Inc(ctx, 1)
		dead(DeadLetter{File: file, Error: fmt.Sprintf("after study %d: %v", seq, err)}.line())
	}
	return nil
}

// listFiles expands a glob on its file system, sorted.
func listFiles(ctx context.Context, glob string) ([]string, error) {
	if !isRemote(glob) {
		files, err := filepath.Glob(glob)
		slices.Sort(files)
		return files, err
	}
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	files, err := fs.List(ctx, glob)
	slices.Sort(files)
	return files, err
}

// batchOf returns the studies of one batch in manifest order.
func batchOf(studies func(*Study) bool) []Study {
	var out []Study
	var st Study
	for studies(&st) {
		out = append(out, st)
		st = Study{}
	}
	slices.SortFunc(out, func(a, b Study) int { return a.Seq - b.Seq })
	return out
}
