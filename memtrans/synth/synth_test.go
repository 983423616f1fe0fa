package synth

import (
	"context"
	"testing"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// A second Prepare of the same folder reads the films the first wrote, and
// the tokenizer is the same.
func TestPrepareReuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Prepare(ctx, Options{Dir: dir, Train: 6, Test: 2, Size: 32})
	if err != nil {
		t.Fatal(err)
	}
	// Other sizes: the data set on disk wins.
	b, err := Prepare(ctx, Options{Dir: dir, Train: 50, Test: 10, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []string{"train", "val", "test"} {
		sa, _ := a.Annotation.Split(split)
		sb, err := b.Annotation.Split(split)
		if err != nil || len(sa) != len(sb) {
			t.Errorf("%s: %d studies, then %d (%v)", split, len(sa), len(sb), err)
		}
	}
	for split, want := range map[string]int{"train": 6, "val": 1, "test": 2} {
		if s, err := a.Annotation.Split(split); len(s) != want {
			t.Errorf("%s: %d studies, want %d (%v)", split, len(s), want, err)
		}
	}
	if a.Tokenizer.Len() != b.Tokenizer.Len() || a.Tokenizer.Len() < 10 {
		t.Errorf("tokenizers of %d and %d tokens", a.Tokenizer.Len(), b.Tokenizer.Len())
	}
	if _, err := Prepare(ctx, Options{}); err == nil {
		t.Error("no working directory accepted")
	}
}

// ModelConfig applies the preset, the film size, Variant, Configure and
// ConfigureModel, in that order.
func TestModelConfig(t *testing.T) {
	o := Options{Size: 96, Variant: r2gen.VariantBaseRM, Configure: func(c *r2gen.Config) { c.Routing = mesh.RoutingGCA }}
	cfg, err := o.ModelConfig(40)
	if err != nil {
		t.Fatal(err)
	}
	r2, ok := cfg.EncoderDecoder.(r2gen.Config)
	if !ok || r2.Variant != r2gen.VariantBaseRM || r2.Routing != mesh.RoutingGCA || r2.EmbedDrop != 0.1 || cfg.ImageSize != 96 || cfg.ResizeTo != 96 {
		t.Errorf("R2Gen: %+v, %d/%d pixels", cfg.EncoderDecoder, cfg.ImageSize, cfg.ResizeTo)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	for _, a := range []string{memtrans.ArchM2, memtrans.ArchMETransformer} {
		o := Options{Architecture: a, ConfigureModel: func(c *memtrans.ModelConfig) { c.Views = 1 }}
		cfg, err := o.ModelConfig(40)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture() != a || cfg.Views != 1 || cfg.EncoderDecoder.Dims().Words != 40 {
			t.Errorf("%s: %s, %d views, %d words", a, cfg.Architecture(), cfg.Views, cfg.EncoderDecoder.Dims().Words)
		}
	}
	if _, err := (Options{Architecture: "lstm"}).ModelConfig(40); err == nil {
		t.Error("unknown architecture accepted")
	}
}

// findingLabels matches labels by name, across the two orders.
func TestFindingLabels(t *testing.T) {
	labels := make([]int8, len(data.LabelNames))
	want := chexpert.Labels{}
	for i, name := range data.LabelNames {
		if name != "Lung Lesion" && name != "Cardiomegaly" {
			continue
		}
		labels[i] = 1
		for o := chexpert.Observation(0); o < chexpert.NumObservations; o++ {
			if o.String() == name {
				want[o] = chexpert.Positive
			}
		}
	}
	n := 0
	for _, v := range want {
		if v == chexpert.Positive {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the labeler names %d of Lung Lesion and Cardiomegaly", n)
	}
	if got := findingLabels(labels); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}
