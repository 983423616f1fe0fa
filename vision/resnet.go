package vision

// ResNet trunks compatible with torchvision's models/resnet.py (He et al.,
// "Deep Residual Learning for Image Recognition", CVPR 2016,
// arXiv:1512.03385), in torchvision's "v1.5" form: a Bottleneck block strides
// in its 3×3 convolution, not its first 1×1. Parameter names are the
// torchvision state_dict names; R2Gen's VisualExtractor names (the trunk as
// nn.Sequential) are served by [ResNet.Sequential] and [Extractor].

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/radgen/radgen"
)

// BlockKind is the residual block of a ResNet.
type BlockKind uint8

const (
	// BasicBlock is two 3×3 convolutions (ResNet-18/34); expansion 1.
	BasicBlock BlockKind = iota + 1
	// Bottleneck is 1×1, 3×3 (strided), 1×1 convolutions (ResNet-50 and
	// deeper); expansion 4.
	Bottleneck
)

// Expansion returns the ratio of a block's output channels to its width:
// 1 for BasicBlock, 4 for Bottleneck.
func (k BlockKind) Expansion() int {
	if k == Bottleneck {
		return 4
	}
	return 1
}

// String returns "BasicBlock" or "Bottleneck".
func (k BlockKind) String() string {
	switch k {
	case BasicBlock:
		return "BasicBlock"
	case Bottleneck:
		return "Bottleneck"
	}
	return "BlockKind(" + strconv.Itoa(int(k)) + ")"
}

// ResNetConfig is the architecture of a torchvision ResNet: the block and the
// number of blocks in each of the four stages, torchvision's
// ResNet(block, layers). Stage s (0-based) has width 64·2^s and outputs
// 64·2^s·Expansion channels; stages 1–3 halve the resolution.
type ResNetConfig struct {
	Block  BlockKind
	Layers [4]int // blocks per stage, each ≥ 1
}

// The torchvision presets.
var (
	ResNet18  = ResNetConfig{BasicBlock, [4]int{2, 2, 2, 2}}
	ResNet34  = ResNetConfig{BasicBlock, [4]int{3, 4, 6, 3}}
	ResNet50  = ResNetConfig{Bottleneck, [4]int{3, 4, 6, 3}}
	ResNet101 = ResNetConfig{Bottleneck, [4]int{3, 4, 23, 3}} // R2Gen's extractor
	ResNet152 = ResNetConfig{Bottleneck, [4]int{3, 8, 36, 3}}
)

// ErrArchitecture is returned when a configuration is invalid or a set of
// weights does not describe a ResNet this package can build.
var ErrArchitecture = errors.New("vision: unsupported ResNet architecture")

// maxBlocksPerStage bounds a configuration read from outside data.
const maxBlocksPerStage = 1024

// Validate reports whether c describes a buildable ResNet.
func (c ResNetConfig) Validate() error {
	if c.Block != BasicBlock && c.Block != Bottleneck {
		return fmt.Errorf("%w: block %v", ErrArchitecture, c.Block)
	}
	for s, n := range c.Layers {
		if n < 1 || n > maxBlocksPerStage {
			return fmt.Errorf("%w: stage %d has %d blocks", ErrArchitecture, s+1, n)
		}
	}
	return nil
}

// NumParams returns the number of trainable parameters of the trunk
// (convolution weights, batch-norm weights and biases; not the running
// statistics), computed from the configuration alone: 42,500,160 for
// ResNet-101, R2Gen's trunk.
func (c ResNetConfig) NumParams() int {
	bn := func(ch int) int { return 2 * ch }
	n := 64*3*7*7 + bn(64)
	in := 64
	e := c.Block.Expansion()
	for s, blocks := range c.Layers {
		w := 64 << s
		for i := range blocks {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			if c.Block == Bottleneck {
				n += in*w + bn(w) + w*w*9 + bn(w) + w*w*e + bn(w*e)
			} else {
				n += in*w*9 + bn(w) + w*w*9 + bn(w)
			}
			if stride != 1 || in != w*e {
				n += in*w*e + bn(w*e)
			}
			in = w * e
		}
	}
	return n
}

// OutChannels returns the channels of the trunk's output (2048 for
// ResNet-50 and deeper, 512 for ResNet-18/34).
func (c ResNetConfig) OutChannels() int { return 512 * c.Block.Expansion() }

// String describes c as torchvision would construct it.
func (c ResNetConfig) String() string {
	l := c.Layers
	return fmt.Sprintf("ResNet(%v, [%d, %d, %d, %d])", c.Block, l[0], l[1], l[2], l[3])
}

// BatchNorm is torch.nn.BatchNorm2d: learnable Weight and Bias, and the
// RunningMean and RunningVar buffers (state_dict names weight, bias,
// running_mean, running_var; num_batches_tracked is not kept).
type BatchNorm struct {
	Weight, Bias            *radgen.Tensor // (C), trainable
	RunningMean, RunningVar *radgen.Tensor // (C), buffers
	Eps                     float64        // 1e-5
	Momentum                float64        // 0.1, the weight of a new batch in the running statistics
}

func newBatchNorm(c int) *BatchNorm {
	bn := &BatchNorm{
		Weight: radgen.NewParam(c), Bias: radgen.NewParam(c),
		RunningMean: radgen.Zeros(c), RunningVar: radgen.Zeros(c),
		Eps: 1e-5, Momentum: 0.1,
	}
	radgen.Fill(bn.Weight, 1)
	radgen.Fill(bn.RunningVar, 1)
	return bn
}

// VisitParams implements radgen.Module.
func (bn *BatchNorm) VisitParams(visit func(string, *radgen.Tensor)) {
	visit("weight", bn.Weight)
	visit("bias", bn.Bias)
	visit("running_mean", bn.RunningMean)
	visit("running_var", bn.RunningVar)
}

// Forward normalises x [B, C, H, W]. With batchStats it uses the batch's
// statistics and folds them into the running ones (torch's train mode);
// otherwise the running statistics (eval mode).
func (bn *BatchNorm) Forward(g *radgen.Graph, x *radgen.Tensor, batchStats bool) *radgen.Tensor {
	if !batchStats {
		return g.BatchNorm2d(x, bn.Weight, bn.Bias, bn.RunningMean, bn.RunningVar, bn.Eps)
	}
	y, m, v := g.BatchNorm2dTrain(x, bn.Weight, bn.Bias, bn.RunningMean, bn.RunningVar, bn.Eps, bn.Momentum)
	bn.RunningMean.CopyFrom(m)
	bn.RunningVar.CopyFrom(v)
	return y
}

// forwardAct is ReLU(Forward(x) + residual) (without the ReLU unless relu;
// a nil residual adds nothing), with batch statistics as one fused op.
func (bn *BatchNorm) forwardAct(g *radgen.Graph, x *radgen.Tensor, batchStats bool, residual *radgen.Tensor, relu bool) *radgen.Tensor {
	if !batchStats {
		y := bn.Forward(g, x, false)
		if residual != nil {
			y = g.Add(y, residual)
		}
		if relu {
			y = g.ReLU(y)
		}
		return y
	}
	y, m, v := g.BatchNorm2dTrainAct(x, bn.Weight, bn.Bias, bn.RunningMean, bn.RunningVar, residual, relu, bn.Eps, bn.Momentum)
	bn.RunningMean.CopyFrom(m)
	bn.RunningVar.CopyFrom(v)
	return y
}

// ConvBN is a bias-free convolution followed by batch normalisation, the
// unit ResNets are made of. Weight is [Cout, Cin, k, k]; the padding is k/2.
type ConvBN struct {
	Weight *radgen.Tensor
	Stride int
	BN     *BatchNorm
}

func (c *ConvBN) params() radgen.Conv2dParams {
	return radgen.ConvSquare(c.Stride, c.Weight.Dim(2)/2)
}

func newConvBN(cin, cout, k, stride int, rng *rand.Rand) *ConvBN {
	w := radgen.NewParam(cout, cin, k, k)
	if rng != nil { // nil leaves zeros for a model about to be loaded
		// torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu").
		std := math.Sqrt(2 / float64(cout*k*k))
		d := w.Data()
		for i := range d {
			d[i] = float32(rng.NormFloat64() * std)
		}
	}
	return &ConvBN{Weight: w, Stride: stride, BN: newBatchNorm(cout)}
}

// forward is the convolution and its batch norm, followed by the sum with
// residual (nil for none) and ReLU where relu is set.
func (c *ConvBN) forward(g *radgen.Graph, x *radgen.Tensor, batchStats bool, residual *radgen.Tensor, relu bool) *radgen.Tensor {
	return c.BN.forwardAct(g, g.Conv2d(x, c.Weight, nil, c.params()), batchStats, residual, relu)
}

// Block is one residual block: BasicBlock (Conv1, Conv2) or Bottleneck
// (Conv1, Conv2, Conv3), each convolution with its batch norm, plus the
// projection shortcut Downsample (1×1 convolution and batch norm, nil for the
// identity). Its output is ReLU(F(x) + shortcut(x)).
type Block struct {
	Kind       BlockKind
	Conv1      *ConvBN
	Conv2      *ConvBN
	Conv3      *ConvBN // Bottleneck only
	Downsample *ConvBN // nil when the shortcut is the identity
}

func newBlock(kind BlockKind, in, width, stride int, rng *rand.Rand) *Block {
	out := width * kind.Expansion()
	b := &Block{Kind: kind}
	if kind == Bottleneck {
		b.Conv1 = newConvBN(in, width, 1, 1, rng)
		b.Conv2 = newConvBN(width, width, 3, stride, rng)
		b.Conv3 = newConvBN(width, out, 1, 1, rng)
	} else {
		b.Conv1 = newConvBN(in, width, 3, stride, rng)
		b.Conv2 = newConvBN(width, width, 3, 1, rng)
	}
	if stride != 1 || in != out {
		b.Downsample = newConvBN(in, out, 1, stride, rng)
	}
	return b
}

// VisitParams implements radgen.Module with torchvision's names.
func (b *Block) VisitParams(visit func(string, *radgen.Tensor)) {
	for i, c := range []*ConvBN{b.Conv1, b.Conv2, b.Conv3} {
		if c == nil {
			continue
		}
		n := strconv.Itoa(i + 1)
		visit("conv"+n+".weight", c.Weight)
		c.BN.VisitParams(radgen.Prefixed("bn"+n+".", visit))
	}
	if b.Downsample != nil {
		visit("downsample.0.weight", b.Downsample.Weight)
		b.Downsample.BN.VisitParams(radgen.Prefixed("downsample.1.", visit))
	}
}

func (b *Block) forward(g *radgen.Graph, x *radgen.Tensor, batchStats bool) *radgen.Tensor {
	id := x
	if b.Downsample != nil {
		id = b.Downsample.forward(g, x, batchStats, nil, false)
	}
	y := b.Conv1.forward(g, x, batchStats, nil, true)
	if b.Conv3 != nil {
		y = b.Conv2.forward(g, y, batchStats, nil, true)
		return b.Conv3.forward(g, y, batchStats, id, true)
	}
	return b.Conv2.forward(g, y, batchStats, id, true)
}

// ResNet is a torchvision ResNet without its classifier (avgpool and fc):
// conv1 (7×7, stride 2) → bn1 → ReLU → max pool (3, stride 2, padding 1) →
// layer1..layer4. A 224×224 image becomes a 7×7 grid of OutChannels
// features.
//
// VisitParams names the tensors as torchvision's state_dict does (conv1.weight,
// bn1.running_mean, layer1.0.conv1.weight, layer2.0.downsample.0.weight, …);
// [ResNet.Sequential] names them as R2Gen's nn.Sequential(*children[:-2])
// (0.weight, 1.running_mean, 4.0.conv1.weight, …).
//
// # Modes
//
// Forward is one sequence of the graph's ops on every graph and device:
// each convolution, its batch norm, the residual sum and the ReLU. The
// batch norms use the running statistics, unless the graph is training
// (built with radgen.Train) and FreezeBatchNorm is false, in which case
// they use the batch's statistics and update the running ones, as torch's
// model.train() does.
//
// How the ops run is the engine's business. On a NoGrad graph on the CPU,
// in float32, the engine folds each batch norm into the convolution before
// it (W' = W·γ/sqrt(σ²+eps), b' = β − μ·γ/sqrt(σ²+eps)), packs the
// weights once and keeps them with each weight tensor until the weights
// change, and runs every convolution as one product on channels-last
// activations with the bias, the residual sum and the ReLU applied in it,
// 3×3 stride-1 ones by Winograd's F(2×2, 3×3) (see radgen's Conv2d). It
// sees changes made through the radgen package (training, loading,
// CopyFrom, Fill, Data); after writing weights through slices kept from an
// earlier Data call, call [ResNet.Refold].
//
// A forward on a NoGrad graph is safe for concurrent use by many
// goroutines; a training forward is for one goroutine at a time.
type ResNet struct {
	Config ResNetConfig
	Stem   *ConvBN     // conv1 and bn1
	Layers [4][]*Block // layer1..layer4

	// FreezeBatchNorm keeps batch norms on their running statistics even
	// on a training graph (a common choice when fine-tuning with small
	// batches). R2Gen does not freeze them.
	FreezeBatchNorm bool
}

var _ radgen.Module = (*ResNet)(nil)

// NewResNet returns a ResNet of the given architecture initialised as
// torchvision does: convolutions from kaiming_normal (fan_out, ReLU gain),
// batch norms with weight 1, bias 0, running mean 0 and variance 1.
func NewResNet(cfg ResNetConfig, rng *rand.Rand) (*ResNet, error) {
	if rng == nil {
		return nil, errors.New("vision: NewResNet needs a random source")
	}
	return newResNet(cfg, rng)
}

// newResNet builds the network; a nil rng leaves the convolutions zero.
func newResNet(cfg ResNetConfig, rng *rand.Rand) (*ResNet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &ResNet{Config: cfg, Stem: newConvBN(3, 64, 7, 2, rng)}
	in := 64
	for s := range 4 {
		width := 64 << s
		stride := 2
		if s == 0 {
			stride = 1
		}
		for i := range cfg.Layers[s] {
			if i > 0 {
				stride = 1
			}
			r.Layers[s] = append(r.Layers[s], newBlock(cfg.Block, in, width, stride, rng))
			in = width * cfg.Block.Expansion()
		}
	}
	return r, nil
}

// Naming selects the parameter names of a ResNet.
type Naming uint8

const (
	// TorchvisionNames are torchvision's state_dict names: conv1, bn1,
	// layer1..layer4.
	TorchvisionNames Naming = iota
	// SequentialNames are the names of nn.Sequential(*children[:-2]), as
	// R2Gen's VisualExtractor holds the trunk: 0 (conv1), 1 (bn1), 4..7
	// (layer1..layer4).
	SequentialNames
)

// String returns "torchvision" or "sequential".
func (n Naming) String() string {
	if n == SequentialNames {
		return "sequential"
	}
	return "torchvision"
}

func (n Naming) stem() (conv, bn string) {
	if n == SequentialNames {
		return "0.", "1."
	}
	return "conv1.", "bn1."
}

func (n Naming) stage(s int) string {
	if n == SequentialNames {
		return strconv.Itoa(4 + s)
	}
	return "layer" + strconv.Itoa(s+1)
}

// VisitParams implements radgen.Module with torchvision's state_dict names.
func (r *ResNet) VisitParams(visit func(string, *radgen.Tensor)) {
	r.visitNamed(TorchvisionNames, visit)
}

func (r *ResNet) visitNamed(n Naming, visit func(string, *radgen.Tensor)) {
	conv, bn := n.stem()
	visit(conv+"weight", r.Stem.Weight)
	r.Stem.BN.VisitParams(radgen.Prefixed(bn, visit))
	for s, blocks := range r.Layers {
		for i, b := range blocks {
			b.VisitParams(radgen.Prefixed(n.stage(s)+"."+strconv.Itoa(i)+".", visit))
		}
	}
}

// Named returns r as a radgen.Module whose names follow n.
func (r *ResNet) Named(n Naming) radgen.Module { return namedResNet{r, n} }

// Sequential returns r as a radgen.Module named as nn.Sequential of the
// trunk's children, R2Gen's names without their "visual_extractor.model."
// prefix: 0.weight, 1.bias, 4.0.conv1.weight, …
func (r *ResNet) Sequential() radgen.Module { return r.Named(SequentialNames) }

type namedResNet struct {
	r *ResNet
	n Naming
}

func (m namedResNet) VisitParams(visit func(string, *radgen.Tensor)) { m.r.visitNamed(m.n, visit) }

// Trunk runs the network on images x [B, 3, H, W] and returns the last
// stage's feature map [B, C, H/32, W/32] (rounded as the convolutions round).
func (r *ResNet) Trunk(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	y, _ := r.trunk(context.Background(), g, x)
	return y
}

// trunk checks ctx between blocks.
func (r *ResNet) trunk(ctx context.Context, g *radgen.Graph, x *radgen.Tensor) (*radgen.Tensor, error) {
	if x.Rank() != 4 || x.Dim(1) != 3 {
		panic(fmt.Sprintf("vision: ResNet input %v, want [B, 3, H, W]", x.Shape()))
	}
	batchStats := g.Training() && !r.FreezeBatchNorm
	y := r.Stem.forward(g, x, batchStats, nil, true)
	y = g.MaxPool2d(y, radgen.PoolSquare(3, 2, 1))
	for _, blocks := range r.Layers {
		for _, b := range blocks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			y = b.forward(g, y, batchStats)
		}
	}
	return y, nil
}

// Forward runs the trunk on images x [B, 3, H, W] and returns the patch
// features [B, h·w, C] (row-major over the h×w grid, torch's
// feats.reshape(B, C, h·w).permute(0, 2, 1)) and the averaged feature
// [B, C] (the mean over the grid, R2Gen's AvgPool2d(7) for 224² inputs).
func (r *ResNet) Forward(g *radgen.Graph, x *radgen.Tensor) (patches, avg *radgen.Tensor) {
	return features(g, r.Trunk(g, x))
}

// features turns a feature map [B, C, h, w] into patches [B, h·w, C] and
// the average [B, C].
func features(g *radgen.Graph, fm *radgen.Tensor) (patches, avg *radgen.Tensor) {
	b, c := fm.Dim(0), fm.Dim(1)
	patches = g.Permute(g.Reshape(fm, b, c, -1), 0, 2, 1)
	return patches, g.GlobalAvgPool2d(fm)
}

// Refold makes the next inference forward prepare the weights again (see
// [ResNet]): call it after writing weights through slices kept from an
// earlier Data call, which the engine cannot see. Writes through the radgen
// package (training, loading, CopyFrom, Fill, a fresh Data call) need no
// call.
func (r *ResNet) Refold() {
	r.VisitParams(func(_ string, t *radgen.Tensor) {
		if t.Device() != radgen.CPU || t.IsHalf() {
			return // the engine prepares CPU tensors only
		}
		// Data counts as a write of t (see radgen.Tensor.Data).
		if t.Is64() {
			t.Data64()
		} else {
			t.Data()
		}
	})
}
