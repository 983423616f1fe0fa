package radgen_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/radgen/radgen"
)

// Any module's weights round-trip bit for bit through a weights file, with
// their metadata, into a fresh module of the same shape.
func TestWeightsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := radgen.NewLinear(5, 3, true, rng)
	path := filepath.Join(t.TempDir(), "linear.safetensors")
	if err := radgen.SaveWeightsFile(path, src, map[string]string{"purpose": "test"}); err != nil {
		t.Fatal(err)
	}
	w, err := radgen.OpenWeightsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := w.Metadata()["purpose"]; got != "test" {
		t.Fatalf("metadata %q", got)
	}
	if !slices.Equal(w.Names(), []string{"bias", "weight"}) {
		t.Fatalf("names %v", w.Names())
	}
	dst := radgen.NewLinear(5, 3, true, rand.New(rand.NewPCG(9, 9)))
	if err := w.Load(dst, ""); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst.Weight.Data(), src.Weight.Data()) || !slices.Equal(dst.Bias.Data(), src.Bias.Data()) {
		t.Fatal("weights changed in the round trip")
	}
	// A module of another shape, or with a tensor the file lacks, is
	// refused before anything is read, and stays as it was.
	wrong := radgen.NewLinear(4, 3, true, rng)
	before := slices.Clone(wrong.Weight.Data())
	if err := w.Load(wrong, ""); !errors.Is(err, radgen.ErrShapeMismatch) {
		t.Fatalf("shape mismatch: %v", err)
	}
	if !slices.Equal(wrong.Weight.Data(), before) {
		t.Fatal("a refused load changed the module")
	}
	if err := w.Load(src, "enc."); !errors.Is(err, radgen.ErrMissingTensor) {
		t.Fatalf("missing tensor: %v", err)
	}
}

// A hostile or truncated file is an error, never a panic or an allocation
// beyond its size.
func FuzzOpenWeights(f *testing.F) {
	var good bytes.Buffer
	radgen.SaveWeights(&good, radgen.NewLinear(3, 2, true, rand.New(rand.NewPCG(1, 1))), map[string]string{"k": "v"})
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()/2])
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := radgen.OpenWeights(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, radgen.ErrWeights) {
				t.Fatalf("error %v does not wrap ErrWeights", err)
			}
			return
		}
		for _, n := range w.Names() {
			w.Float32(n)
		}
		w.Load(radgen.NewLinear(3, 2, true, rand.New(rand.NewPCG(1, 1))), "")
	})
}

// Any module saves to a safetensors file under its parameters' names and
// loads into a fresh module of the same shape.
func ExampleSaveWeights() {
	layer := radgen.NewLinear(2, 2, false, rand.New(rand.NewPCG(1, 1)))
	var file bytes.Buffer
	if err := radgen.SaveWeights(&file, layer, map[string]string{"note": "a 2×2 map"}); err != nil {
		fmt.Println(err)
		return
	}
	w, err := radgen.OpenWeights(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		fmt.Println(err)
		return
	}
	fresh := radgen.NewLinear(2, 2, false, rand.New(rand.NewPCG(2, 2)))
	if err := w.Load(fresh, ""); err != nil {
		fmt.Println(err)
		return
	}
	shape, _ := w.Shape("weight")
	fmt.Println(w.Names(), shape, w.Metadata()["note"], slices.Equal(fresh.Weight.Data(), layer.Weight.Data()))
	// Output: [weight] [2 2] a 2×2 map true
}
