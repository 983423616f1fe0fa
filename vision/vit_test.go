package vision

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

func tinyViT(t *testing.T, seed uint64) *ViT {
	t.Helper()
	v, err := NewViT(ViTConfig{DIn: 5, Patches: 4, Experts: 3, D: 8, Heads: 2, DFF: 12, Layers: 2}, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOrthogonalLossKnownMatrices(t *testing.T) {
	g := radgen.NoGrad()
	// Orthonormal rows (any scale: rows are normalised) → 0.
	ortho := radgen.FromFloat64([]float64{
		3, 0, 0, 0,
		0, 0, 0.5, 0,
		0, -2, 0, 0,
		// second study: a rotated orthonormal pair plus e4
		1 / math.Sqrt2, 1 / math.Sqrt2, 0, 0,
		-1 / math.Sqrt2, 1 / math.Sqrt2, 0, 0,
		0, 0, 0, 7,
	}, 2, 3, 4)
	if l := OrthogonalLoss(g, ortho).Data64()[0]; math.Abs(l) > 1e-12 {
		t.Fatalf("orthogonal experts: loss %v, want 0", l)
	}
	// M identical rows: every off-diagonal entry of ÊÊᵀ is 1 → M(M−1).
	for _, m := range []int{2, 3, 5} {
		same := radgen.Zeros64(1, m, 3)
		for i := range m {
			copy(same.Data64()[i*3:], []float64{1, -2, 2})
		}
		want := float64(m * (m - 1))
		if l := OrthogonalLoss(g, same).Data64()[0]; math.Abs(l-want) > 1e-9 {
			t.Fatalf("%d identical experts: loss %v, want %v", m, l, want)
		}
	}
	// Two rows at 60°: off-diagonal cos = 1/2 twice → 2·(1/4) = 0.5; in
	// float32 as well.
	sixty := radgen.FromFloat32([]float32{2, 0, 1, float32(math.Sqrt(3))}, 1, 2, 2)
	if l := OrthogonalLoss(g, sixty).Data()[0]; math.Abs(float64(l)-0.5) > 1e-6 {
		t.Fatalf("experts at 60°: loss %v, want 0.5", l)
	}
	// Opposite rows count as overlap too: cos = −1 → 2.
	opp := radgen.FromFloat64([]float64{1, 1, -1, -1}, 1, 2, 2)
	if l := OrthogonalLoss(g, opp).Data64()[0]; math.Abs(l-2) > 1e-9 {
		t.Fatalf("opposite experts: loss %v, want 2", l)
	}
}

func TestOrthogonalLossGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	e := gradcheck.Rand(rng, 1, 2, 3, 4)
	gradcheck.Check(t, "orthogonal loss", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		return g.Reshape(OrthogonalLoss(g, e), 1)
	}, e)
	// Gradient descent on the loss alone makes the experts orthogonal.
	x := radgen.FromFloat64([]float64{1, 0.2, 0.1, 0.9, 0.3, 0.1, 0.8, 0.5, 0.4}, 1, 3, 3)
	first := OrthogonalLoss(radgen.NoGrad(), x).Data64()[0]
	for range 300 {
		x.ZeroGrad()
		x.SetRequiresGrad(true)
		g := radgen.NewGraph()
		if err := g.Backward(OrthogonalLoss(g, x)); err != nil {
			t.Fatal(err)
		}
		for i, d := range x.Grad().Data64() {
			x.Data64()[i] -= 0.1 * d
		}
	}
	last := OrthogonalLoss(radgen.NoGrad(), x).Data64()[0]
	if !(first > 1 && last < 1e-3) {
		t.Fatalf("orthogonal loss went from %v to %v under gradient descent", first, last)
	}
}

func TestGELUValues(t *testing.T) {
	x := radgen.FromFloat64([]float64{1, -2, 0, 3}, 4)
	got := GELU(radgen.NoGrad(), x).Data64()
	want := []float64{0.8411919906082768, -0.04540230591222494, 0, 2.9963625}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Fatalf("GELU(%v) = %v, want %v", x.Data64()[i], got[i], want[i])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	y := gradcheck.Rand(rng, 3, 2, 5)
	gradcheck.Check(t, "GELU", 1e-6, func(g *radgen.Graph) *radgen.Tensor { return GELU(g, y) }, y)
}

func TestPatchify(t *testing.T) {
	// (B=1, C=2, H=2, W=4), patches of 2: two patches.
	img := radgen.Zeros64(1, 2, 2, 4)
	for c := range 2 {
		for y := range 2 {
			for x := range 4 {
				img.Data64()[(c*2+y)*4+x] = float64(100*c + 10*y + x)
			}
		}
	}
	p := Patchify(radgen.NoGrad(), img, 2)
	if s := p.Shape(); s[0] != 1 || s[1] != 2 || s[2] != 8 {
		t.Fatalf("shape %v, want [1 2 8]", s)
	}
	// Patch 1 covers x ∈ {2, 3}; flattened (row, column, channel).
	want := []float64{2, 102, 3, 103, 12, 112, 13, 113}
	for i, w := range want {
		if got := p.At(0, 1, i); got != w {
			t.Fatalf("patch 1 = %v, want %v", p.Data64()[8:], want)
		}
	}
}

func TestViTShapesAndSegments(t *testing.T) {
	v := tinyViT(t, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	x := radgen.Zeros(2, 4, 5)
	radgen.Uniform(x, rng, 1)
	vis, ex := v.Forward(radgen.NoGrad(), x)
	if s := vis.Shape(); s[0] != 2 || s[1] != 4 || s[2] != 8 {
		t.Fatalf("visual tokens %v", s)
	}
	if s := ex.Shape(); s[0] != 2 || s[1] != 3 || s[2] != 8 {
		t.Fatalf("expert tokens %v", s)
	}
	// The experts see the image: two different studies give different
	// expert tokens, and the three experts differ from each other.
	if ex.At(0, 0, 0) == ex.At(1, 0, 0) || ex.At(0, 0, 0) == ex.At(0, 1, 0) {
		t.Fatalf("expert tokens do not depend on the image or the expert: %v", ex.Data()[:10])
	}
	// With zero attention outputs and MLPs the blocks are identities and
	// the output is LN(z_0): segment row 1 reaches the experts only, row 0
	// the visual tokens only.
	v2 := tinyViT(t, 4)
	for _, b := range v2.Blocks {
		radgen.Fill(b.Attn.Linears[3].Weight, 0)
		radgen.Fill(b.FC2.Weight, 0)
	}
	vis0, ex0 := v2.Forward(radgen.NoGrad(), x)
	for i := 8; i < 16; i++ {
		v2.Seg.Data()[i] += 0.5 * float32(i%3)
	}
	vis1, ex1 := v2.Forward(radgen.NoGrad(), x)
	if !same(vis0.Data(), vis1.Data()) || same(ex0.Data(), ex1.Data()) {
		t.Fatal("segment row 1 must change the expert tokens and only them")
	}
	for i := 0; i < 8; i++ {
		v2.Seg.Data()[i] += 0.5 * float32(i%3)
	}
	vis2, ex2 := v2.Forward(radgen.NoGrad(), x)
	if same(vis1.Data(), vis2.Data()) || !same(ex1.Data(), ex2.Data()) {
		t.Fatal("segment row 0 must change the visual tokens and only them")
	}
}

func same(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestViTGradients(t *testing.T) {
	v := tinyViT(t, 5)
	radgen.Promote64(v)
	rng := rand.New(rand.NewPCG(6, 7))
	x := gradcheck.Rand(rng, 1, 2, 4, 5)
	wrt := []*radgen.Tensor{x}
	for _, p := range radgen.Params(v) {
		wrt = append(wrt, p.Tensor)
	}
	gradcheck.Check(t, "ViT with expert tokens", 1e-5, func(g *radgen.Graph) *radgen.Tensor {
		vis, ex := v.Forward(g, x)
		return g.Concat(1, vis, ex)
	}, wrt...)
}

func TestViTConfigErrors(t *testing.T) {
	good := ViTConfig{DIn: 5, Patches: 4, Experts: 3, D: 8, Heads: 2, DFF: 12, Layers: 2}
	for _, bad := range []func(*ViTConfig){
		func(c *ViTConfig) { c.Experts = 0 },
		func(c *ViTConfig) { c.Heads = 3 },
		func(c *ViTConfig) { c.Dropout = 1 },
	} {
		c := good
		bad(&c)
		if _, err := NewViT(c, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrViTConfig) {
			t.Fatalf("config %+v: error %v, want ErrViTConfig", c, err)
		}
	}
}
