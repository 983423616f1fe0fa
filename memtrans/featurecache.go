package memtrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
)

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
