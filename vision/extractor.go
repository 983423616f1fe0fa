package vision

// The visual extractor of R2Gen (Chen et al., "Generating Radiology Reports
// via Memory-driven Transformer", EMNLP 2020), mirroring
// modules/visual_extractor.py and the per-view loop of models/r2gen.py.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/radgen/radgen"
)

// ErrImageShape is returned by [Extractor.Extract] and [StackStudies] for
// images of the wrong shape (or, for Extract, of another dtype or device
// than the weights).
var ErrImageShape = errors.New("vision: bad image tensor shape")

// Extractor is R2Gen's VisualExtractor: a ResNet trunk (ResNet-101 in the
// paper) held as nn.Sequential(*children[:-2]) under the name "model", so
// its parameters are named model.0.weight (conv1), model.1.* (bn1) and
// model.4.* … model.7.* (layer1..layer4). Under R2Gen's model they carry the
// prefix "visual_extractor.".
//
// For a study of V views (IU X-Ray: V = 2, frontal and lateral) the same
// trunk runs on each view; the patch features are concatenated along the
// patch axis (2 × 49 = 98 patches for 224² views) and the averaged features
// along the channels (2 × 2048 = 4096), view 0 first.
//
// Concurrency and modes are those of [ResNet].
type Extractor struct {
	ResNet *ResNet
}

var _ radgen.Module = (*Extractor)(nil)

// NewExtractor returns an extractor with a freshly initialised trunk (see
// [NewResNet]).
func NewExtractor(cfg ResNetConfig, rng *rand.Rand) (*Extractor, error) {
	r, err := NewResNet(cfg, rng)
	if err != nil {
		return nil, err
	}
	return &Extractor{ResNet: r}, nil
}

// LoadExtractor builds the extractor whose weights src holds under
// prefix+"model." (prefix "visual_extractor." for an R2Gen checkpoint),
// inferring the trunk's architecture from the names (see [LoadResNet]).
func LoadExtractor(src WeightSource, prefix string) (*Extractor, error) {
	r, err := LoadResNet(src, prefix+"model.")
	if err != nil {
		return nil, err
	}
	return &Extractor{ResNet: r}, nil
}

// VisitParams implements radgen.Module with R2Gen's names (model.0.weight,
// model.4.0.conv1.weight, …).
func (e *Extractor) VisitParams(visit func(string, *radgen.Tensor)) {
	e.ResNet.visitNamed(SequentialNames, radgen.Prefixed("model.", visit))
}

// Forward returns the patch features and the averaged features of images,
// either one view per study, [B, 3, H, W], or V views per study,
// [B, V, 3, H, W]:
//
//	patches [B, V·h·w, C]   view v's h·w patches (row-major grid) at v·h·w
//	avg     [B, V·C]        view v's mean feature at channels v·C
//
// with h×w the trunk's output grid (7×7 for 224² inputs) and C its output
// channels. On a training graph with batch statistics the trunk runs once per
// view, so that each view is normalised by its own batch, as R2Gen does;
// otherwise all B·V images go through the trunk together. It panics on a
// malformed tensor; [Extractor.Extract] returns an error instead.
func (e *Extractor) Forward(g *radgen.Graph, images *radgen.Tensor) (patches, avg *radgen.Tensor) {
	p, a, _ := e.forward(context.Background(), g, images)
	return p, a
}

// Extract is the inference entry point: Forward on a NoGrad graph, with
// images checked and ctx consulted between residual blocks. It is safe for
// concurrent use.
func (e *Extractor) Extract(ctx context.Context, images *radgen.Tensor) (patches, avg *radgen.Tensor, err error) {
	if err := checkImages(images); err != nil {
		return nil, nil, err
	}
	if w := e.ResNet.Stem.Weight; images.Is64() != w.Is64() || images.Device() != w.Device() {
		return nil, nil, fmt.Errorf("%w: images are %v, the weights %v", ErrImageShape, images, w)
	}
	return e.forward(ctx, radgen.NoGrad(), images)
}

func checkImages(x *radgen.Tensor) error {
	s := x.Shape()
	if (len(s) != 4 && len(s) != 5) || s[len(s)-3] != 3 {
		return fmt.Errorf("%w: %v, want [B, 3, H, W] or [B, V, 3, H, W]", ErrImageShape, s)
	}
	for _, d := range s {
		if d < 1 {
			return fmt.Errorf("%w: %v has an empty dimension", ErrImageShape, s)
		}
	}
	return nil
}

func (e *Extractor) forward(ctx context.Context, g *radgen.Graph, images *radgen.Tensor) (patches, avg *radgen.Tensor, err error) {
	r := e.ResNet
	if images.Rank() == 4 {
		fm, err := r.trunk(ctx, g, images)
		if err != nil {
			return nil, nil, err
		}
		patches, avg = features(g, fm)
		return patches, avg, nil
	}
	if images.Rank() != 5 {
		panic(fmt.Sprintf("vision: Extractor input %v, want [B, 3, H, W] or [B, V, 3, H, W]", images.Shape()))
	}
	b, v, c, h, w := images.Dim(0), images.Dim(1), images.Dim(2), images.Dim(3), images.Dim(4)
	if g.Training() && !r.FreezeBatchNorm && v > 1 {
		// R2Gen: one trunk call per view, images[:, v].
		ps := make([]*radgen.Tensor, v)
		as := make([]*radgen.Tensor, v)
		for i := range v {
			view := g.Reshape(g.Slice(images, 1, i, i+1), b, c, h, w)
			fm, err := r.trunk(ctx, g, view)
			if err != nil {
				return nil, nil, err
			}
			ps[i], as[i] = features(g, fm)
		}
		return g.Concat(1, ps...), g.Concat(1, as...), nil
	}
	// Per-image computation: all B·V images in one batch, image b·V+v.
	fm, err := r.trunk(ctx, g, g.Reshape(images, b*v, c, h, w))
	if err != nil {
		return nil, nil, err
	}
	ch, hw := fm.Dim(1), fm.Dim(2)*fm.Dim(3)
	grid := g.Permute(g.Reshape(fm, b, v, ch, hw), 0, 1, 3, 2) // [B, V, hw, C]
	patches = g.Reshape(grid, b, v*hw, ch)
	avg = g.Reshape(g.GlobalAvgPool2d(fm), b, v*ch)
	return patches, avg, nil
}

// StackStudies stacks the preprocessed views of B studies, each with the same
// number of views V of the same size, into the tensor [B, V, 3, H, W] that
// [Extractor.Forward] takes. A gray view (C = 1) stands for three equal
// channels and is expanded.
func StackStudies(studies [][]*Image) (*radgen.Tensor, error) {
	if len(studies) == 0 || len(studies[0]) == 0 || studies[0][0] == nil {
		return nil, fmt.Errorf("%w: no images", ErrImageShape)
	}
	v := len(studies[0])
	h, w := studies[0][0].H, studies[0][0].W
	if h < 1 || w < 1 {
		return nil, fmt.Errorf("%w: empty image %dx%d", ErrImageShape, w, h)
	}
	plane := h * w
	out := make([]float32, len(studies)*v*3*plane)
	for b, views := range studies {
		if len(views) != v {
			return nil, fmt.Errorf("%w: study %d has %d views, study 0 has %d", ErrImageShape, b, len(views), v)
		}
		for i, im := range views {
			if im == nil || im.H != h || im.W != w || (im.C != 1 && im.C != 3) || len(im.Pix) != im.C*plane {
				return nil, fmt.Errorf("%w: study %d view %d is not a %dx%d image with 1 or 3 channels", ErrImageShape, b, i, w, h)
			}
			dst := out[(b*v+i)*3*plane : (b*v+i+1)*3*plane]
			for c := range 3 {
				src := im.Pix
				if im.C == 3 {
					src = im.Pix[c*plane : (c+1)*plane]
				}
				copy(dst[c*plane:(c+1)*plane], src)
			}
		}
	}
	return radgen.FromFloat32(out, len(studies), v, 3, h, w), nil
}
