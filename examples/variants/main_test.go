package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/synthrun"
)

// The command prints one table with a row per configuration run.
func TestRunPrintsTable(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four models; skipped with -short")
	}
	o := synthrun.Options{Train: 24, Test: 6, Size: 64, Epochs: 3, BatchSize: 8, Seed: 3}
	var out bytes.Buffer
	if err := run(context.Background(), &out, t.TempDir(), "multi-view GCA (continued),M²,METransformer", o); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{"BLEU-4", "ROUGE-L", "CE F1", "parameters", "BASE+RM+MCLN (R2Gen)", "multi-view GCA (continued)", "M²", "METransformer"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "Mem2Mem  ") || strings.Contains(text, "  BASE  ") {
		t.Error("rows outside -only ran")
	}
}
