package data

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/atomicfile"
	"github.com/radgen/radgen/internal/safetensors"
)

// The feature cache keeps a frozen visual extractor's patch features, one
// safetensors file per study, named by a 64-bit FNV-1a hash of the study's
// id, holding the tensor "patches" (1, V·P, d_vf) and the id under the
// metadata key "key". A frozen-extractor memtrans.Trainer
// (TrainConfig.FeatureCache) reads and writes it; pipelines that compute
// features elsewhere fill it with WriteFeatureCache.

// FeatureCachePath returns the file under dir that holds the features of
// the study with the given id.
func FeatureCachePath(dir, id string) string {
	h := fnv.New64a()
	h.Write([]byte(id))
	return filepath.Join(dir, fmt.Sprintf("%016x.safetensors", h.Sum64()))
}

// WriteFeatureCache writes a study's patch features (1, V·P, d_vf) under
// dir, atomically (a temporary file renamed into place), creating dir if
// needed. The features may live on any device; they are copied to the CPU
// to be written.
func WriteFeatureCache(dir, id string, patches *radgen.Tensor) error {
	if dir == "" {
		return errors.New("data: feature cache: no directory")
	}
	if patches == nil || patches.Rank() != 3 || patches.Dim(0) != 1 {
		var shape []int
		if patches != nil {
			shape = patches.Shape()
		}
		return fmt.Errorf("data: feature cache: features %v of study %q, want (1, N, d_vf)", shape, id)
	}
	x := patches.To(radgen.CPU)
	if x.Is64() {
		x = x.To32()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(FeatureCachePath(dir, id), 0o644, func(w io.Writer) error {
		return safetensors.Write(w, []safetensors.Tensor{{Name: "patches", Dtype: safetensors.F32, Shape: x.Shape(), Data: safetensors.F32Bytes(x.Data())}}, map[string]string{"key": id})
	})
}

// ReadFeatureCache reads the patch features cached under dir for a study,
// on the CPU; ok is false when there are none, or the file belongs to
// another id or is unreadable (a Trainer then recomputes them).
func ReadFeatureCache(dir, id string) (patches *radgen.Tensor, ok bool) {
	if dir == "" {
		return nil, false
	}
	sf, err := safetensors.OpenFile(FeatureCachePath(dir, id))
	if err != nil {
		return nil, false
	}
	defer sf.Close()
	if sf.Metadata()["key"] != id {
		return nil, false
	}
	v, shape, err := sf.Float32("patches")
	if err != nil || len(shape) != 3 || shape[0] != 1 {
		return nil, false
	}
	return radgen.FromFloat32(v, shape...), true
}
