package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The temporary files of killed saves (left as a kill leaves them) are
// removed by the next save of the same target; other files stay.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "last.radgen")
	for _, n := range []string{".last.radgen.tmp123", ".last.radgen.tmp456", ".best.radgen.tmp9", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(target, []byte("model"), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	got := strings.Join(names, " ")
	if want := ".best.radgen.tmp9 .last.radgen.lock keep.txt last.radgen"; got != want {
		t.Errorf("directory holds %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(target); string(b) != "model" {
		t.Errorf("target holds %q", b)
	}
}

// A failed write leaves the existing target as it was and no temporary
// file.
func TestFailedWriteKeepsTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "reports.json")
	os.WriteFile(target, []byte("old"), 0o644)
	boom := errors.New("boom")
	err := Write(target, 0o644, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target holds %q after a failed write", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// Concurrent saves of one target never remove each other's temporary file:
// every save succeeds and the target holds one whole content.
func TestConcurrentSaves(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "x")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- WriteFile(target, []byte(strings.Repeat(string(rune('a'+i)), 1<<16)), 0o644)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	b, _ := os.ReadFile(target)
	if len(b) != 1<<16 || strings.Count(string(b), string(b[0])) != len(b) {
		t.Errorf("target of %d bytes, mixed content", len(b))
	}
}
