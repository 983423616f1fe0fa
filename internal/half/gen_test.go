package half

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGenerated regenerates the assembly and its Go declarations and
// requires them to match the files in the tree.
func TestGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	s, g := filepath.Join(dir, "half_amd64.s"), filepath.Join(dir, "half_asm_amd64.go")
	out, err := exec.Command(gobin, "run", "./_gen", "-o", s, "-go", g).CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./_gen: %v\n%s", err, out)
	}
	for _, f := range []string{s, g} {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is stale: run go generate in internal/half", filepath.Base(f))
		}
	}
}
