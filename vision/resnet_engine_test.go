package vision

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/radgen/radgen"
)

// TestEngineMatchesGraph compares a float32 NoGrad forward, which the CPU
// engine runs deferred (batch norms folded, channels last, fused products,
// Winograd), with a recording graph's (explicit batch norms, channels
// first, im2col) on odd image sizes, where the tiles, the windows and the
// pooling have ragged edges, for both block kinds.
func TestEngineMatchesGraph(t *testing.T) {
	for _, cfg := range []ResNetConfig{tinyBasic, tinyBottleneck} {
		r := newRandom(t, cfg, 41)
		for _, hw := range [][2]int{{1, 1}, {5, 9}, {33, 17}, {40, 40}} {
			t.Run(fmt.Sprintf("%v/%dx%d", cfg.Block, hw[0], hw[1]), func(t *testing.T) {
				x := randImages(42, 3, 3, hw[0], hw[1])
				got := r.Trunk(radgen.NoGrad(), x)
				want := r.Trunk(radgen.NewGraph(), x)
				if d, scale := maxDiff(got, want), maxAbs(want); d > 1e-5*scale {
					t.Errorf("engine and graph differ by %g (scale %g)", d, scale)
				}
				// Each image alone gives the same features, bit for bit.
				one := r.Trunk(radgen.NoGrad(), radgen.FromFloat32(x.Data()[3*hw[0]*hw[1]:6*hw[0]*hw[1]], 1, 3, hw[0], hw[1]))
				n := one.Len()
				for i, v := range one.Data() {
					if got.Data()[n+i] != v {
						t.Fatalf("image 1 alone: feature %d = %v, in the batch %v", i, v, got.Data()[n+i])
					}
				}
			})
		}
	}
}

// TestFoldedResultOwnsStorage runs a NoGrad forward twice on images whose
// feature map is a 1×1 grid (where a permute of the channels-last map is a
// view) and requires the first result to be untouched by the second
// forward, which reuses the engine's buffers.
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
	if _, err := r.trunk(ctx, radgen.NoGrad(), randImages(23, 2, 3, 32, 32)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Data(), want) {
		t.Error("a later forward overwrote an earlier result")
	}
}

// TestInferenceReusesBuffers measures the bytes a warm NoGrad forward
// allocates: the engine takes the buffers of the activations it no longer
// reads for the next ones, within a forward and from the forward before,
// so a forward allocates far less than its activations (which a recording
// forward allocates, each once at least).
func TestInferenceReusesBuffers(t *testing.T) {
	r := newRandom(t, tinyBottleneck, 31)
	x := randImages(32, 2, 3, 64, 64)
	allocated := func(g func() *radgen.Graph) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 3 {
			r.Trunk(g(), x).Data()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 3
	}
	for range 2 { // weights prepared, buffers in use
		r.Trunk(radgen.NoGrad(), x).Data()
	}
	inference := allocated(func() *radgen.Graph { return radgen.NoGrad() })
	recording := allocated(func() *radgen.Graph { return radgen.NewGraph() })
	t.Logf("bytes a forward: NoGrad %d, recording %d", inference, recording)
	if inference > recording/8 {
		t.Errorf("a NoGrad forward allocates %d bytes, a recording one %d", inference, recording)
	}
}
