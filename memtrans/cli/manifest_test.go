package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen/memtrans/data"
)

// A manifest's studies decode from paths relative to its folder, keeping
// the model's number of views; malformed lines are errors with their line.
func TestManifestStudies(t *testing.T) {
	dir := t.TempDir()
	ann, err := data.WriteSynthetic(context.Background(), dir, data.SynthConfig{Train: 2, Width: 32, Height: 32, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	train, err := ann.Split("train")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range train {
		lines = append(lines, `{"id": "`+s.ID+`", "images": ["images/`+s.ImagePath[0]+`", "images/`+s.ImagePath[1]+`"]}`)
	}
	path := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	studies, err := manifestStudies(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(studies) != 2 || studies[1].ID != train[1].ID || len(studies[0].Views) != 1 || studies[0].Views[0].Bounds().Dx() != 32 {
		t.Fatalf("studies %+v", studies)
	}
	for _, bad := range []string{`{"id": "x", "images": []}`, `{"id": "x"`, `{"id": "x", "images": ["missing.png"]}`} {
		if err := os.WriteFile(path, []byte(lines[0]+"\n"+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := manifestStudies(path, 2); err == nil || !strings.Contains(err.Error(), ":2:") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
