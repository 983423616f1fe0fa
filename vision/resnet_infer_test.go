package vision

import (
	"context"
	"slices"
	"testing"

	"github.com/radgen/radgen"
)

// TestFoldedResultOwnsStorage runs the inference path twice on images whose
// feature map is a 1×1 grid (where a permute of the channels-last map is a
// view) and requires the first result to be untouched by the second
// forward, which reuses the pooled arena.
func TestFoldedResultOwnsStorage(t *testing.T) {
	r := newRandom(t, tinyBasic, 21)
	ctx := context.Background()
	a, err := r.trunk(ctx, radgen.NoGrad(), randImages(22, 2, 3, 32, 32))
	if err != nil {
		t.Fatal(err)
	}
	if a.Dim(2) != 1 || a.Dim(3) != 1 {
		t.Fatalf("feature map %v, want a 1×1 grid", a.Shape())
	}
	want := slices.Clone(a.Data())
	for seed := range uint64(3) {
		if _, err := r.trunk(ctx, radgen.NoGrad(), randImages(23+seed, 2, 3, 32, 32)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(a.Data(), want) {
		t.Error("a later forward overwrote an earlier result")
	}
}
