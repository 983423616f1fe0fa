// The README's example builds the paper's ResNet-101 and runs it on one
// goroutine: it runs without the race detector, whose instrumentation makes
// it slow (the normal test run has it).

//go:build !race

package memtrans_test

import (
	"context"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// The README's "Using it from Go", as it is written there, over two films
// made up here and a tokenizer of three reports: the paper's IU X-Ray
// generator, untrained, writes one report for the study.
func Example_readme() {
	dir, err := os.MkdirTemp("", "radgen-readme")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	frontal, lateral := filepath.Join(dir, "frontal.png"), filepath.Join(dir, "lateral.png")
	for view, path := range []string{frontal, lateral} {
		if err := writeFilm(path, data.View(view)); err != nil {
			panic(err)
		}
	}
	trainReports := []string{"the heart is normal in size.", "the lungs are clear.", "no pleural effusion."}
	ctx := context.Background()

	// The README's lines.
	tok, _ := data.BuildTokenizer(data.IUXray, 1, trainReports)         // R2Gen's tokenizer
	model, _ := memtrans.New(memtrans.R2GenIUXray(tok.Len()+1), tok, 1) // or memtrans.LoadFile("model.radgen")
	study, _ := memtrans.StudyFromFiles("CXR1", frontal, lateral)
	reports, _ := model.Generate(ctx, []memtrans.Study{study}, memtrans.WithBeamSize(3), memtrans.WithAttention())
	text := reports[0].Text // words joined by spaces
	fmt.Println(reports[0].StudyID, len(reports[0].Attention) == len(reports[0].Tokens), text == strings.TrimSpace(text))
	// Output: CXR1 true true
}

// writeFilm writes a synthetic 256² film of a normal chest (data.RenderFilm)
// as a PNG.
func writeFilm(path string, view data.View) error {
	img := data.RenderFilm(data.Findings{CTR: 0.42}, view, 256, 256, rand.New(rand.NewPCG(1, uint64(view))))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The README's "Using it from Go" is the code Example_readme runs: each
// line of the README's first Go block is a line of this file.
func TestReadmeUsingItFromGo(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := strings.SplitN(string(readme), "## Using it from Go", 2)
	if len(section) != 2 {
		t.Fatal(`README has no "## Using it from Go" section`)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section[1])
	if block == nil {
		t.Fatal(`README's "Using it from Go" has no Go block`)
	}
	self, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]bool{}
	for _, l := range strings.Split(string(self), "\n") {
		code[normalize(l)] = true
	}
	lines := 0
	for _, l := range strings.Split(block[1], "\n") {
		if n := normalize(l); n != "" {
			lines++
			if !code[n] {
				t.Errorf("README line %q is not in Example_readme", strings.TrimSpace(l))
			}
		}
	}
	if lines < 4 {
		t.Fatalf("README's Go block has %d lines", lines)
	}
}

// normalize drops a line's comment and its spaces.
func normalize(l string) string {
	if i := strings.Index(l, "//"); i >= 0 {
		l = l[:i]
	}
	return strings.Join(strings.Fields(l), "")
}
