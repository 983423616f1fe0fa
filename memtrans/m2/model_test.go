package m2_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/cpu"
	"github.com/radgen/radgen/internal/gradcheck"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/mesh"
)

func tinyM2Config() m2.Config {
	c := m2.Tiny(23, 12)
	c.DModel, c.DK, c.DV, c.Heads, c.DFF, c.MemorySlots, c.MaxLen = 16, 4, 3, 4, 24, 5, 20
	c.EncLayers, c.DecLayers = 3, 2
	return c
}

func tinyM2(t testing.TB) *m2.Model {
	t.Helper()
	m, err := m2.New(tinyM2Config(), 7)
	if err != nil {
		t.Fatal(err)
	}
	// Non-zero gate biases and norms, so that no term is trivially neutral.
	randomizeVectors(m, 8)
	return m
}

// randomizeVectors draws every one-dimensional parameter of m (biases,
// norm gains, gates) from U(−0.3, 0.3) with PCG(seed, seed), so that no
// term is trivially neutral.
func randomizeVectors(m radgen.Module, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, p := range radgen.Params(m) {
		if p.Tensor.Rank() == 1 {
			radgen.Uniform(p.Tensor, rng, 0.3)
		}
	}
}

func m2Feats(rng *rand.Rand, b, r, d int) *radgen.Tensor {
	f := radgen.Zeros(b, r, d)
	for i := range f.Data() {
		if (i/d)%r < r-2 || i/(r*d) == 0 { // the last two regions of studies ≥ 1 are zero padding
			f.Data()[i] = float32(rng.NormFloat64())
		}
	}
	return f
}

func TestM2ConfigValidate(t *testing.T) {
	if err := checkM2(m2.COCO(10201)); err != nil {
		t.Fatalf("M2COCO: %v", err)
	}
	for name, mutate := range map[string]func(*m2.Config){
		"heads":   func(c *m2.Config) { c.Heads = 0 },
		"bos":     func(c *m2.Config) { c.BOS = c.Vocab },
		"pad=bos": func(c *m2.Config) { c.Pad = c.BOS },
		"dropout": func(c *m2.Config) { c.Dropout = 1 },
		"padding": func(c *m2.Config) { c.Padding = 9 },
		"max_len": func(c *m2.Config) { c.MaxLen = 0 },
	} {
		c := tinyM2Config()
		mutate(&c)
		if err := checkM2(c); !errors.Is(err, arch.ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
	}
}

// The configuration read back from a model's own state_dict shapes is the
// one it was built with, and the state_dict loads into a fresh model.
func TestInferM2ConfigRoundTrip(t *testing.T) {
	m := tinyM2(t)
	shapes := map[string][]int{}
	sd := radgen.StateDict(m, "")
	for name, tensor := range sd {
		shapes[name] = tensor.Shape()
	}
	c, err := m2.InferConfig(shapes, m.Config.Heads)
	if err != nil {
		t.Fatal(err)
	}
	if c != m.Config {
		t.Fatalf("inferred %+v\n     want %+v", c, m.Config)
	}
	other, err := m2.New(c, 99)
	if err != nil {
		t.Fatal(err)
	}
	if err := radgen.LoadParams(other, sd, ""); err != nil {
		t.Fatal(err)
	}
	feats := m2Feats(rand.New(rand.NewPCG(1, 1)), 2, 6, 12)
	a, _ := m.Encode(radgen.NoGrad(), feats)
	b, _ := other.Encode(radgen.NoGrad(), feats)
	for i, v := range a.Levels.Data() {
		if b.Levels.Data()[i] != v {
			t.Fatal("reloaded model encodes differently")
		}
	}
	delete(shapes, "decoder.layers.0.fc_alpha3.weight")
	if _, err := m2.InferConfig(shapes, 4); !errors.Is(err, arch.ErrConfig) {
		t.Fatalf("missing gate: %v, want ErrConfig", err)
	}
}

// Beam search on the incremental decoder, with its reorders, yields token
// log-probabilities equal to teacher forcing each hypothesis.
func TestM2BeamMatchesTeacherForcing(t *testing.T) {
	m := tinyM2(t)
	c := m.Config
	feats := m2Feats(rand.New(rand.NewPCG(2, 2)), 3, 6, 12)
	for _, padding := range []m2.PaddingRule{m2.PadAfterNorm, m2.PadZeroRows, m2.PadNone} {
		m.Encoder.Padding = padding
		enc, err := m.Encode(radgen.NoGrad(), feats)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := m.NewDecodingEncoded(enc)
		if err != nil {
			t.Fatal(err)
		}
		k, L := 4, 9
		hyps, err := decode.BeamSearch{Size: k, N: k, MaxLen: L, BOS: c.BOS, EOS: c.EOS, Semantics: decode.M2, FullLength: true}.
			Decode(context.Background(), dec)
		if err != nil {
			t.Fatal(err)
		}
		worst := m2TeacherForcedDelta(t, m, enc, hyps)
		t.Logf("%v: beam vs teacher forcing, max |Δ log p| = %.3g", padding, worst)
		if worst > 1e-5 {
			t.Errorf("%v: max |Δ| = %.3g", padding, worst)
		}
	}
}

// m2TeacherForcedDelta returns the largest |Δ| between the token
// log-probabilities of decoded hypotheses (hyps[i] of study i of enc) and a
// teacher-forced pass over each.
func m2TeacherForcedDelta(t *testing.T, m *m2.Model, enc *m2.Encoded, hyps [][]decode.Hypothesis) float64 {
	t.Helper()
	var worst float64
	for i, hs := range hyps {
		one := &m2.Encoded{Levels: sliceStudy(enc.Levels, i), Mask: sliceStudy(enc.Mask, i)}
		for _, h := range hs {
			in := append([]int{m.Config.BOS}, h.Tokens...)
			lp, err := m.TeacherForce(radgen.NoGrad(), one, in, 1, len(in))
			if err != nil {
				t.Fatal(err)
			}
			for p, tok := range h.Tokens {
				worst = math.Max(worst, math.Abs(float64(h.LogProbs[p])-lp.At(0, p, tok)))
			}
		}
	}
	return worst
}

// sliceStudy returns study i of a batch-first tensor (or nil).
func sliceStudy(x *radgen.Tensor, i int) *radgen.Tensor {
	if x == nil {
		return nil
	}
	return radgen.NoGrad().Slice(x, 0, i, i+1)
}

// Teacher forcing refuses a missing encoding (the decoding's own errors
// are TestM2ModuleDecodingErrors's).
func TestM2TeacherForceErrors(t *testing.T) {
	m := tinyM2(t)
	if _, err := m.TeacherForce(radgen.NoGrad(), nil, []int{2}, 1, 1); err == nil {
		t.Fatal("nil encoding accepted")
	}
}

// Gradients of the teacher-forced loss through the whole model.
func TestM2LossGradients(t *testing.T) {
	c := tinyM2Config()
	c.DModel, c.DK, c.DV, c.Heads, c.DFF, c.MemorySlots, c.DIn, c.Vocab = 6, 2, 2, 2, 8, 3, 5, 9
	c.EncLayers, c.DecLayers = 2, 1
	c.Padding = m2.PadZeroRows
	m, err := m2.New(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	radgen.Promote64(m)
	rng := rand.New(rand.NewPCG(5, 5))
	feats := gradcheck.Rand(rng, 1, 2, 4, 5)
	in := []int{2, 5, 6, 2, 7, 1}
	targets := []int{5, 6, 3, 7, 3, 1}
	l := m.Decoder.Layers[0]
	gradcheck.Check(t, "M² loss", 1e-6, func(g *radgen.Graph) *radgen.Tensor {
		enc, err := m.Encode(g, feats)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := m.TeacherForce(g, enc, in, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		return m.NLL(g, lp, targets)
	}, feats, m.Encoder.FC.Weight, m.Encoder.Layers[1].MHAtt.Attention.MemK, m.Decoder.WordEmb,
		l.Mesh.Gates[1].Weight, l.EncAtt().Attention.FCQ.Weight, m.Decoder.FC.Weight)
}

// A few steps of gradient descent on one batch lower the loss: the model
// trains, dropout included.
func TestM2Trains(t *testing.T) {
	m := tinyM2(t)
	feats := m2Feats(rand.New(rand.NewPCG(6, 6)), 2, 6, 12)
	in := []int{2, 5, 6, 7, 8, 2, 9, 10, 1, 1}
	targets := []int{5, 6, 7, 8, 3, 9, 10, 3, 1, 1}
	loss := func(g *radgen.Graph) *radgen.Tensor {
		enc, err := m.Encode(g, feats)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := m.TeacherForce(g, enc, in, 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		return m.NLL(g, lp, targets)
	}
	first := loss(radgen.NoGrad()).Data()[0]
	for step := range 30 {
		g := radgen.NewGraph(radgen.Train(uint64(step)))
		if err := g.Backward(loss(g)); err != nil {
			t.Fatal(err)
		}
		for _, p := range radgen.Trainable(m) {
			if gr := p.Tensor.Grad(); gr != nil {
				for i, v := range gr.Data() {
					p.Tensor.Data()[i] -= 0.2 * v
				}
				p.Tensor.ZeroGrad()
			}
		}
	}
	last := loss(radgen.NoGrad()).Data()[0]
	t.Logf("loss %.4f → %.4f after 30 SGD steps (lr 0.2)", first, last)
	if !(last < 0.75*first) {
		t.Fatalf("loss %v → %v: not trained", first, last)
	}
}

// m2NamedSource is a radgen.MapSource that lists its names.
type m2NamedSource radgen.MapSource

func (s m2NamedSource) Float32(name string) ([]float32, []int, error) {
	return radgen.MapSource(s).Float32(name)
}
func (s m2NamedSource) Names() []string {
	var out []string
	for n := range s {
		out = append(out, n)
	}
	return out
}

func TestLoadM2(t *testing.T) {
	m := tinyM2(t)
	src := m2NamedSource(radgen.StateDict(m, ""))
	got, err := m2.Load(src, m.Config.Heads)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != m.Config {
		t.Fatalf("loaded config %+v, want %+v", got.Config, m.Config)
	}
	for _, p := range radgen.Params(m) {
		q := radgen.StateDict(got, "")[p.Name]
		for i, v := range p.Tensor.Data() {
			if q.Data()[i] != v {
				t.Fatalf("%s differs after loading", p.Name)
			}
		}
	}
	delete(src, "decoder.layers.1.pwff.fc2.bias")
	if _, err := m2.Load(src, m.Config.Heads); !errors.Is(err, radgen.ErrMissingTensor) {
		t.Fatalf("missing tensor: %v", err)
	}
	src["decoder.layers.1.pwff.fc2.bias"] = radgen.Zeros(3)
	if _, err := m2.Load(src, m.Config.Heads); !errors.Is(err, radgen.ErrShapeMismatch) {
		t.Fatalf("wrong shape: %v", err)
	}
	if _, err := m2.Load(src, 5); !errors.Is(err, arch.ErrConfig) {
		t.Fatalf("heads not dividing the width: %v", err)
	}
}

// The recorded attention rows are distributions over the regions, zero at
// masked ones.
func TestM2Attention(t *testing.T) {
	m := tinyM2(t)
	m.Encoder.Padding = m2.PadZeroRows
	dec, err := m.NewDecoding(m2Feats(rand.New(rand.NewPCG(7, 7)), 2, 6, 12))
	if err != nil {
		t.Fatal(err)
	}
	hyps, err := decode.BeamSearch{Size: 2, MaxLen: 4, BOS: 2, EOS: 3, Semantics: decode.M2, Attention: true}.
		Decode(context.Background(), dec)
	if err != nil {
		t.Fatal(err)
	}
	for i, hs := range hyps {
		h := hs[0]
		if len(h.Attention) != len(h.Tokens)*6 {
			t.Fatalf("study %d: %d weights for %d tokens", i, len(h.Attention), len(h.Tokens))
		}
		for p := range h.Tokens {
			row := h.Attention[p*6 : (p+1)*6]
			var sum float64
			for _, v := range row {
				sum += float64(v)
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("study %d step %d: weights sum to %v", i, p, sum)
			}
			if i == 1 && (row[4] != 0 || row[5] != 0) {
				t.Fatalf("study 1 attends its zero-padded regions: %v", row)
			}
		}
	}
	if err := dec.Attention(make([]float32, 1)); !errors.Is(err, decode.ErrShape) {
		t.Fatalf("short buffer: %v", err)
	}
}

// M²'s after-norm mask on every kernel path this machine has: the regions
// m2MaskDecided calls decided are masked alike on every path and in the
// reference's arithmetic (m2ReferencePre). With a fresh LayerNorm (γ = 1,
// β = 0) the sum of every embedding is zero up to rounding, so only the
// zero-padded regions are decided; with trained-like vectors (γ, β drawn)
// every region is, and none is masked.
func TestM2AfterNormMaskOnEveryKernelPath(t *testing.T) {
	t.Logf("kernel path: %s", cpu.Describe())
	feats := m2Feats(rand.New(rand.NewPCG(8, 8)), 4, 6, 12)
	type path struct {
		name    string
		disable func() (restore func())
	}
	paths := []path{{"as started", func() func() { return func() {} }}}
	if cpu.HasAVX512() {
		paths = append(paths, path{"avx2", cpu.DisableAVX512})
	}
	if cpu.HasAVX2FMA() {
		paths = append(paths, path{"purego", cpu.DisableAVX2FMA})
	}
	zeroRows := 0
	for _, v := range m2.ZeroRowMask(feats).Float64s() {
		if v == 0 { // zero = masked
			zeroRows++
		}
	}
	for _, fresh := range []bool{true, false} {
		m := tinyM2(t)
		m.Encoder.Padding = m2.PadAfterNorm
		if fresh {
			m.Encoder.Norm = mesh.NewLayerNorm(m.Config.DModel)
		}
		ref := m2.AfterNormMask(m2ReferencePre(feats, m.Encoder.FC), m.Encoder.Norm).Float64s()
		decided, exact := m2MaskDecided(m, feats)
		n := 0
		for _, d := range decided {
			if d {
				n++
			}
		}
		t.Logf("fresh LayerNorm %v: %d of %d regions decided (%d computed exactly)", fresh, n, len(decided), exact)
		if exact != zeroRows {
			t.Errorf("fresh LayerNorm %v: %d regions computed exactly, want the %d zero-padded ones", fresh, exact, zeroRows)
		}
		if !fresh && n != len(decided) {
			t.Errorf("trained-like LayerNorm: %d of %d regions decided, want all", n, len(decided))
		}
		exactSum := m2ExactNormSums(m, feats)
		for _, p := range paths {
			restore := p.disable()
			enc, err := m.Encode(radgen.NoGrad(), feats)
			sums, bounds, _ := m2MaskBounds(m, feats)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			// The bound holds: this path's sum is within T of the exact one.
			var ratio float64
			for r, v := range sums {
				d := math.Abs(v - exactSum[r])
				ratio = math.Max(ratio, d/bounds[r])
				if !(d <= bounds[r]) {
					t.Errorf("fresh LayerNorm %v, %s: region %d sums to %.9g, exactly %.9g: |Δ| %.3g beyond the bound %.3g", fresh, p.name, r, v, exactSum[r], d, bounds[r])
				}
			}
			t.Logf("  %s: |Σy − f(p)| at most %.2g of the rounding bound T", p.name, ratio)
			masked, ambiguousDiffer := 0, 0
			for r, v := range enc.Mask.Float64s() {
				if v == 0 { // zero = masked
					masked++
				}
				switch {
				case decided[r] && (v == 0) != (ref[r] == 0):
					t.Errorf("fresh LayerNorm %v, %s: decided region %d masked %v, in the reference's arithmetic %v", fresh, p.name, r, v == 0, ref[r] == 0)
				case !decided[r] && (v == 0) != (ref[r] == 0):
					ambiguousDiffer++
				}
				if !fresh && v == 0 {
					t.Errorf("trained-like LayerNorm, %s: region %d masked", p.name, r)
				}
			}
			t.Logf("  %s: %d masked, %d undecided regions differ from the reference's arithmetic", p.name, masked, ambiguousDiffer)
		}
	}
}

// m2ExactNormSums returns f(p) = Σᵢ LayerNorm(p)ᵢ for each region of feats,
// with p = ReLU(fc(x)) and the LayerNorm evaluated in float64 (exact to
// far below the float32 bounds of m2MaskBounds).
func m2ExactNormSums(m *m2.Model, feats *radgen.Tensor) []float64 {
	e := m.Encoder
	x := feats.Float64s()
	w, bias := e.FC.Weight.Float64s(), e.FC.Bias.Float64s()
	gamma, beta := e.Norm.Weight.Float64s(), e.Norm.Bias.Float64s()
	k, n := feats.Dim(2), len(gamma)
	out := make([]float64, feats.Dim(0)*feats.Dim(1))
	p := make([]float64, n)
	for r := range out {
		var mean float64
		for i := range n {
			v := bias[i]
			for j, wv := range w[i*k : (i+1)*k] {
				v += x[r*k+j] * wv
			}
			p[i] = math.Max(v, 0)
			mean += p[i] / float64(n)
		}
		var variance float64
		for _, v := range p {
			variance += (v - mean) * (v - mean) / float64(n)
		}
		rstd := 1 / math.Sqrt(variance+e.Norm.Eps)
		for i, v := range p {
			out[r] += gamma[i]*(v-mean)*rstd + beta[i]
		}
	}
	return out
}
