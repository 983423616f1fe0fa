package vision

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/radgen/radgen"
)

// WeightSource is a set of named float32 tensors that can list its names:
// an opened safetensors file, a PyTorch checkpoint, a radgen.MapSource
// wrapped with its keys.
type WeightSource interface {
	radgen.TensorSource
	// Names returns every tensor name in the source.
	Names() []string
}

// ShapedWeights is a WeightSource that knows its tensors' shapes without
// reading them (radgen.Weights, the safetensors and PyTorch readers);
// loaders use it to check a file before reading any data.
type ShapedWeights interface {
	WeightSource
	Shape(name string) ([]int, bool)
}

// WeightShape returns the shape of the tensor name of src: from its header
// where src is ShapedWeights, otherwise by reading it.
func WeightShape(src WeightSource, name string) ([]int, error) {
	if s, ok := src.(ShapedWeights); ok {
		if shape, ok := s.Shape(name); ok {
			return shape, nil
		}
	}
	_, shape, err := src.Float32(name)
	return shape, err
}

// MaxLoadParams bounds the size of a network [LoadResNet] will build from
// the names in a file, before any weight is read: 2^28 parameters (1 GiB of
// float32), over four times ResNet-152's trunk. Names are cheap to forge; this
// keeps a hostile file from making the loader allocate without limit.
const MaxLoadParams = 1 << 28

// InferResNet reads a ResNet's architecture from the names of its weights
// under prefix: the naming scheme (torchvision's conv1/layer1.. or
// nn.Sequential's 0/4..), the block (a Bottleneck has conv3) and the number
// of blocks in each stage (the indices i of layerN.i). Names outside prefix,
// and the classifier (fc), are ignored. Widths are checked later, when the
// weights are loaded.
func InferResNet(names []string, prefix string) (ResNetConfig, Naming, error) {
	has := make(map[string]bool, len(names))
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			has[rest] = true
		}
	}
	var naming Naming
	switch {
	case has["conv1.weight"]:
		naming = TorchvisionNames
	case has["0.weight"]:
		naming = SequentialNames
	default:
		return ResNetConfig{}, 0, fmt.Errorf("%w: no stem convolution %q or %q under prefix %q",
			ErrArchitecture, prefix+"conv1.weight", prefix+"0.weight", prefix)
	}
	var cfg ResNetConfig
	for s := range 4 {
		stage := naming.stage(s) + "."
		seen := map[int]bool{}
		for name := range has {
			rest, ok := strings.CutPrefix(name, stage)
			if !ok {
				continue
			}
			idx, _, ok := strings.Cut(rest, ".")
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || i < 0 || strconv.Itoa(i) != idx {
				return ResNetConfig{}, 0, fmt.Errorf("%w: unexpected tensor %q", ErrArchitecture, prefix+name)
			}
			if i >= maxBlocksPerStage {
				return ResNetConfig{}, 0, fmt.Errorf("%w: block index %d in %q", ErrArchitecture, i, prefix+name)
			}
			seen[i] = true
		}
		if len(seen) == 0 {
			return ResNetConfig{}, 0, fmt.Errorf("%w: no blocks under %q", ErrArchitecture, prefix+stage)
		}
		idx := make([]int, 0, len(seen))
		for i := range seen {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for want, i := range idx {
			if i != want {
				return ResNetConfig{}, 0, fmt.Errorf("%w: %s has block %d but not block %d", ErrArchitecture, prefix+naming.stage(s), i, want)
			}
		}
		cfg.Layers[s] = len(idx)
		for _, i := range idx {
			block := stage + strconv.Itoa(i) + "."
			kind := BasicBlock
			if has[block+"conv3.weight"] {
				kind = Bottleneck
			}
			if cfg.Block == 0 {
				cfg.Block = kind
			} else if kind != cfg.Block {
				return ResNetConfig{}, 0, fmt.Errorf("%w: %s is a %v, earlier blocks are %v", ErrArchitecture, prefix+block[:len(block)-1], kind, cfg.Block)
			}
		}
	}
	return cfg, naming, cfg.Validate()
}

// LoadResNet builds the ResNet whose weights src holds under prefix (for
// example "" for a torchvision state_dict, "visual_extractor.model." for
// R2Gen's), inferring the architecture with [InferResNet]. Every parameter
// and batch-norm statistic must be present with its torchvision shape;
// num_batches_tracked and fc are ignored. Networks over [MaxLoadParams]
// are refused. A missing or mis-shaped tensor is
// an error naming it that wraps radgen.ErrMissingTensor or
// radgen.ErrShapeMismatch.
func LoadResNet(src WeightSource, prefix string) (*ResNet, error) {
	cfg, naming, err := InferResNet(src.Names(), prefix)
	if err != nil {
		return nil, err
	}
	if n := cfg.NumParams(); n > MaxLoadParams {
		return nil, fmt.Errorf("%w: %v has %d parameters, more than the loader's limit of %d", ErrArchitecture, cfg, n, MaxLoadParams)
	}
	r, err := newResNet(cfg, nil)
	if err != nil {
		return nil, err
	}
	if err := radgen.LoadParams(r.Named(naming), src, prefix); err != nil {
		return nil, fmt.Errorf("vision: loading %v: %w", cfg, err)
	}
	return r, nil
}
