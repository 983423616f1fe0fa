package vision

// The multi-expert ViT encoder of METransformer (Wang, Liu, Wang and Zhou,
// "METransformer: Radiology Report Generation by Transformer with Multiple
// Learnable Expert Tokens", CVPR 2023), on the Vision Transformer of
// Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021. Equation
// numbers are those of the seed notes (shared/seeds/003), in order of
// appearance: Eq. 1 the input sequence, Eq. 2 the attention sublayer, Eq. 3
// the MLP sublayer. No official METransformer code exists; the choices the
// notes leave open are stated beside the code.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// ViTConfig holds the sizes of a [ViT]. Sizes are data: they travel with
// the weights.
type ViTConfig struct {
	DIn     int     `json:"d_in"`    // width of one patch input: P²·C for pixel patches, or a CNN's channels
	Patches int     `json:"patches"` // N, the number of visual tokens (rows of the position table)
	Experts int     `json:"experts"` // M, the number of learnable expert tokens
	D       int     `json:"d_model"` // token width
	Heads   int     `json:"heads"`   // attention heads
	DFF     int     `json:"d_ff"`    // MLP hidden width
	Layers  int     `json:"layers"`  // Transformer blocks
	Dropout float64 `json:"dropout"` // after the embedding, the attention and the MLP, in training
}

// Validate reports the first inconsistency in c, wrapping ErrViTConfig.
func (c ViTConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"d_in", c.DIn}, {"patches", c.Patches}, {"experts", c.Experts}, {"d_model", c.D}, {"heads", c.Heads},
		{"d_ff", c.DFF}, {"layers", c.Layers}} {
		if f.v <= 0 || f.v > 1<<20 {
			return fmt.Errorf("%w: %s = %d", ErrViTConfig, f.name, f.v)
		}
	}
	if c.D%c.Heads != 0 {
		return fmt.Errorf("%w: width %d not divisible by %d heads", ErrViTConfig, c.D, c.Heads)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return fmt.Errorf("%w: dropout %v outside [0, 1)", ErrViTConfig, c.Dropout)
	}
	return nil
}

// ErrViTConfig is wrapped by the errors of [ViTConfig.Validate] and [NewViT].
var ErrViTConfig = errors.New("vision: invalid ViT config")

// vitEps is ViT's LayerNorm epsilon (torch's default is 1e-5).
const vitEps = 1e-6

// newVitNorm returns a LayerNorm of width d with ViT's epsilon.
func newVitNorm(d int) *mesh.LayerNorm {
	n := mesh.NewLayerNorm(d)
	n.Eps = vitEps
	return n
}

// ViTBlock is one pre-norm Transformer block:
//
//	ẑ_l = MSA(LN(z_{l−1})) + z_{l−1}      (Eq. 2)
//	z_l = MLP(LN(ẑ_l)) + ẑ_l               (Eq. 3)
//
// with MLP(x) = fc2(GELU(fc1(x))).
type ViTBlock struct {
	norm1, norm2 *mesh.LayerNorm
	Attn         *mesh.MultiHeadAttention
	FC1, FC2     *radgen.Linear
	dropout      float64
}

// Forward runs the block on z (B, T, D).
func (b *ViTBlock) Forward(g *radgen.Graph, z *radgen.Tensor) *radgen.Tensor {
	h := b.norm1.Forward(g, z)
	z = g.Add(z, g.Dropout(b.Attn.Forward(g, h, h, h, nil), b.dropout)) // Eq. 2
	h = GELU(g, b.FC1.Forward(g, b.norm2.Forward(g, z)))
	return g.Add(z, g.Dropout(b.FC2.Forward(g, g.Dropout(h, b.dropout)), b.dropout)) // Eq. 3
}

// VisitParams implements radgen.Module.
func (b *ViTBlock) VisitParams(visit func(string, *radgen.Tensor)) {
	b.norm1.VisitParams(radgen.Prefixed("norm1.", visit))
	b.Attn.VisitParams(radgen.Prefixed("attn.", visit))
	b.norm2.VisitParams(radgen.Prefixed("norm2.", visit))
	b.FC1.VisitParams(radgen.Prefixed("mlp.fc1.", visit))
	b.FC2.VisitParams(radgen.Prefixed("mlp.fc2.", visit))
}

// ViT is a Vision Transformer over N patch inputs with M learnable expert
// tokens appended to the sequence (METransformer's multi-expert ViT
// encoder). Its input sequence is
//
//	z_0 = [x_p¹E; …; x_pᴺE; x_e¹; …; x_eᴹ] + E_pos + E_seg      (Eq. 1)
//
// where E (embed) projects each patch input to D, x_e are the expert tokens
// (experts, (M, D)), E_pos is a learned position table over all N+M tokens
// (pos_embed, (N+M, D)) and E_seg a learned segment table whose row 0 is
// added to every visual token and row 1 to every expert token (seg_embed,
// (2, D)). Layers blocks of Eqs. 2–3 follow, then a final LayerNorm, as in
// ViT. There is no class token: the expert tokens take its place.
//
// Parameter names: embed.*, experts, pos_embed, seg_embed, blocks.i.*,
// norm.*. A ViT is safe for concurrent use by NoGrad graphs.
type ViT struct {
	Config  ViTConfig
	Embed   *radgen.Linear // E: d_in → D
	Experts *radgen.Tensor // (M, D)
	Pos     *radgen.Tensor // (N+M, D)
	Seg     *radgen.Tensor // (2, D)
	Blocks  []*ViTBlock
	norm    *mesh.LayerNorm
}

// NewViT returns a ViT initialised as timm initialises ViTs: Xavier-uniform
// matrices with zero biases, the position table, segment table and expert
// tokens drawn from N(0, 0.02²) truncated at two standard deviations.
func NewViT(c ViTConfig, rng *rand.Rand) (*ViT, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	lin := func(in, out int) *radgen.Linear {
		l := radgen.NewLinear(in, out, true, rng)
		radgen.XavierUniform(l.Weight, rng)
		radgen.Fill(l.Bias, 0)
		return l
	}
	v := &ViT{
		Config:  c,
		Embed:   lin(c.DIn, c.D),
		Experts: radgen.NewParam(c.Experts, c.D),
		Pos:     radgen.NewParam(c.Patches+c.Experts, c.D),
		Seg:     radgen.NewParam(2, c.D),
		norm:    newVitNorm(c.D),
	}
	for _, t := range []*radgen.Tensor{v.Experts, v.Pos, v.Seg} {
		truncNormal(t, rng, 0.02)
	}
	for range c.Layers {
		b := &ViTBlock{norm1: newVitNorm(c.D), norm2: newVitNorm(c.D), dropout: c.Dropout,
			Attn: mesh.NewMultiHeadAttention(c.D, c.Heads, 0, rng), FC1: lin(c.D, c.DFF), FC2: lin(c.DFF, c.D)}
		for _, l := range b.Attn.Linears {
			radgen.Fill(l.Bias, 0)
		}
		v.Blocks = append(v.Blocks, b)
	}
	return v, nil
}

// truncNormal fills t from N(0, std²) truncated to ±2 std.
func truncNormal(t *radgen.Tensor, rng *rand.Rand, std float64) {
	d := t.Data()
	for i := range d {
		x := rng.NormFloat64()
		for math.Abs(x) > 2 {
			x = rng.NormFloat64()
		}
		d[i] = float32(x * std)
	}
}

// VisitParams implements radgen.Module.
func (v *ViT) VisitParams(visit func(string, *radgen.Tensor)) {
	v.Embed.VisitParams(radgen.Prefixed("embed.", visit))
	visit("experts", v.Experts)
	visit("pos_embed", v.Pos)
	visit("seg_embed", v.Seg)
	for i, b := range v.Blocks {
		b.VisitParams(radgen.Prefixed(fmt.Sprintf("blocks.%d.", i), visit))
	}
	v.norm.VisitParams(radgen.Prefixed("norm.", visit))
}

// Forward encodes patch inputs x (B, N, d_in) and returns the visual tokens
// z_L[:N] (B, N, D) and the expert tokens z_L[N:N+M] (B, M, D). It panics if
// x is not (B, ViTConfig.Patches, ViTConfig.DIn).
func (v *ViT) Forward(g *radgen.Graph, x *radgen.Tensor) (visual, experts *radgen.Tensor) {
	c := v.Config
	if x.Rank() != 3 || x.Dim(1) != c.Patches || x.Dim(2) != c.DIn {
		panic(fmt.Sprintf("vision: ViT input %v, want (B, %d, %d)", x.Shape(), c.Patches, c.DIn))
	}
	b, n, m := x.Dim(0), c.Patches, c.Experts
	xe := g.Add(zerosLike(x, b, m, c.D), v.Experts) // broadcast the expert tokens over the batch
	z := g.Concat(1, v.Embed.Forward(g, x), xe)     // (B, N+M, D)
	seg := make([]int, n+m)
	for i := n; i < n+m; i++ {
		seg[i] = 1
	}
	z = g.Add(g.Add(z, v.Pos), g.Embedding(v.Seg, seg, n+m)) // Eq. 1
	z = g.Dropout(z, c.Dropout)
	for _, blk := range v.Blocks {
		z = blk.Forward(g, z)
	}
	z = v.norm.Forward(g, z)
	return g.Slice(z, 1, 0, n), g.Slice(z, 1, n, n+m)
}

func zerosLike(x *radgen.Tensor, shape ...int) *radgen.Tensor {
	if x.Is64() {
		return radgen.Zeros64(shape...)
	}
	return radgen.Zeros(shape...).To(x.Device())
}

// scalarLike returns a one-element tensor holding s in x's dtype.
func scalarLike(x *radgen.Tensor, s float64) *radgen.Tensor {
	t := zerosLike(x, 1)
	radgen.Fill(t, s)
	return t
}

// GELU returns the Gaussian error linear unit of x in its tanh form,
//
//	GELU(x) ≈ ½x(1 + tanh(√(2/π)(x + 0.044715x³))),
//
// composed from the graph's ops (so its gradient is exact for this form).
// ViT uses the erf form; the two differ by less than 1e-3 everywhere.
func GELU(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	x3 := g.Mul(g.Mul(x, x), x)
	inner := g.Scale(g.Add(x, g.Scale(x3, 0.044715)), math.Sqrt(2/math.Pi))
	return g.Mul(g.Scale(x, 0.5), g.Add(g.Tanh(inner), scalarLike(x, 1)))
}

// Patchify cuts images (B, C, H, W) into non-overlapping p×p patches and
// flattens each, the x_p ∈ ℝ^{N×(P²·C)} of ViT: the result is (B, N, p·p·C)
// with N = (H/p)·(W/p) patches in row-major order, each flattened as
// (row, column, channel). Projecting it with a Linear equals a p×p
// convolution of stride p. It panics if p does not divide H and W.
func Patchify(g *radgen.Graph, images *radgen.Tensor, p int) *radgen.Tensor {
	if images.Rank() != 4 || p <= 0 || images.Dim(2)%p != 0 || images.Dim(3)%p != 0 {
		panic(fmt.Sprintf("vision: cannot cut images %v into %d×%d patches", images.Shape(), p, p))
	}
	b, c, h, w := images.Dim(0), images.Dim(1), images.Dim(2), images.Dim(3)
	x := g.Reshape(images, b, c, h/p, p, w/p, p)
	x = g.Permute(x, 0, 2, 4, 3, 5, 1) // (B, H/p, W/p, p, p, C)
	return g.Reshape(x, b, (h/p)*(w/p), p*p*c)
}

// OrthogonalLoss returns METransformer's orthogonal loss on expert tokens
// e (B, M, D), the mean over the batch of
//
//	‖ÊÊᵀ − I‖²_F,  Ê = e with every row scaled to unit L2 norm,
//
// which is 0 when the M experts are mutually orthogonal and M(M−1) when they
// all point the same way. The notes fix neither the normalisation nor the
// power of the norm; rows are normalised (so that the loss measures overlap,
// not size) and the norm is squared (smooth at the optimum).
//
// The row norms are taken without a square root op: for y = [e, −e] ∈ ℝ^{2D},
// mean(y) = 0 and var(y) = ‖e‖²/D, so Normalize(y)[:D]/√D = e/‖e‖ (with
// 1e-12·D added under the root, which keeps a zero row finite).
func OrthogonalLoss(g *radgen.Graph, e *radgen.Tensor) *radgen.Tensor {
	if e.Rank() != 3 {
		panic(fmt.Sprintf("vision: orthogonal loss of %v, want (B, M, D)", e.Shape()))
	}
	b, m, d := e.Dim(0), e.Dim(1), e.Dim(2)
	y := g.Normalize(g.Concat(2, e, g.Scale(e, -1)), 1e-12, radgen.NormStandard)
	unit := g.Scale(g.Slice(y, 2, 0, d), 1/math.Sqrt(float64(d))) // (B, M, D)
	gram := g.MatMul(unit, unit, true)                            // (B, M, M)
	eye := zerosLike(e, m, m)
	for i := range m {
		if eye.Is64() {
			eye.Data64()[i*m+i] = 1
		} else {
			eye.Data()[i*m+i] = 1
		}
	}
	diff := g.Sub(gram, eye)
	return g.Scale(g.Sum(g.Mul(diff, diff)), 1/float64(b))
}

var _ radgen.Module = (*ViT)(nil)
