package memtrans

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/data"
)

// WriteFeatureCache writes the Trainer's cache entry: the cache's own get
// reads it back, and ReadFeatureCache refuses another study's id.
func TestFeatureCacheRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	x := radgen.FromFloat32([]float32{1, -2, 3.5, 4, 5, 6}, 1, 3, 2)
	if err := data.WriteFeatureCache(dir, "study-7", x); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(data.FeatureCachePath(dir, "study-7")); err != nil {
		t.Fatal(err)
	}
	c := &featureCache{dir: dir, mem: map[string]*radgen.Tensor{}}
	y, ok := c.get("study-7")
	if !ok || !slices.Equal(y.Shape(), x.Shape()) || !slices.Equal(y.Data(), x.Data()) {
		t.Fatalf("trainer cache read %v %v", ok, y)
	}
	if z, ok := data.ReadFeatureCache(dir, "study-7"); !ok || !slices.Equal(z.Data(), x.Data()) {
		t.Fatalf("ReadFeatureCache %v %v", ok, z)
	}
	// Another id's file under this id's name is a miss, not its features.
	if err := os.Rename(data.FeatureCachePath(dir, "study-7"), data.FeatureCachePath(dir, "other")); err != nil {
		t.Fatal(err)
	}
	if _, ok := data.ReadFeatureCache(dir, "other"); ok {
		t.Error("read another study's features")
	}
	if err := data.WriteFeatureCache(dir, "bad", radgen.FromFloat32([]float32{1, 2}, 2)); err == nil {
		t.Error("rank-1 features accepted")
	}
}
