package memtrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
)

// FeatureCachePath returns the file under dir in which a frozen-extractor
// Trainer (TrainConfig.FeatureCache = dir) keeps the patch features of the
// study with the given id: one safetensors file per study, named by a
// 64-bit FNV-1a hash of the id, holding the tensor "patches" (1, V·P, d_vf)
// and the id under the metadata key "key".
func FeatureCachePath(dir, id string) string {
	return (&featureCache{dir: dir}).path(id)
}

// WriteFeatureCache writes a study's patch features (1, V·P, d_vf) where a
// Trainer whose TrainConfig.FeatureCache is dir reads them, atomically
// (a temporary file renamed into place), creating dir if needed. The
// features may live on any device; they are copied to the CPU to be
// written.
func WriteFeatureCache(dir, id string, patches *radgen.Tensor) error {
	if dir == "" {
		return fmt.Errorf("memtrans: feature cache: no directory")
	}
	if patches == nil || patches.Rank() != 3 || patches.Dim(0) != 1 {
		var shape []int
		if patches != nil {
			shape = patches.Shape()
		}
		return fmt.Errorf("%w: features %v of study %q, want (1, N, d_vf)", ErrStudy, shape, id)
	}
	return (&featureCache{dir: dir, mem: map[string]*radgen.Tensor{}}).put(id, patches.To(radgen.CPU))
}

// ReadFeatureCache reads the patch features a Trainer cached in dir for a
// study, on the CPU; ok is false when there are none (or the file belongs
// to another id or is unreadable), as the Trainer then recomputes them.
func ReadFeatureCache(dir, id string) (patches *radgen.Tensor, ok bool) {
	if dir == "" {
		return nil, false
	}
	return (&featureCache{dir: dir, mem: map[string]*radgen.Tensor{}}).get(id)
}

// Features returns the frozen visual extractor's patch features of the
// studies, (B, V·P, d_vf), from their views through the evaluation
// transform: what Generate decodes from and what a frozen-extractor Trainer
// caches. They are computed where the extractor lives and returned on the
// CPU. It is safe for concurrent use.
func (m *Model) Features(ctx context.Context, studies []Study) (*radgen.Tensor, error) {
	if len(studies) == 0 {
		return nil, fmt.Errorf("%w: no studies", ErrStudy)
	}
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	x, err := m.encodeImages(ctx, studies)
	if err != nil {
		return nil, err
	}
	return x.To(radgen.CPU), nil
}
