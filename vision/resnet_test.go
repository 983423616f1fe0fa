package vision

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/radgen/radgen"
)

// tinyCfg is the smallest torchvision ResNet of each block kind.
var (
	tinyBasic      = ResNetConfig{BasicBlock, [4]int{1, 1, 1, 1}}
	tinyBottleneck = ResNetConfig{Bottleneck, [4]int{1, 1, 1, 1}}
)

func newRandom(t testing.TB, cfg ResNetConfig, seed uint64) *ResNet {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	r, err := NewResNet(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	// Non-trivial batch norms, so that folding is exercised.
	r.VisitParams(func(name string, x *radgen.Tensor) {
		switch {
		case hasSuffix(name, "bn1.weight", "bn2.weight", "bn3.weight", "downsample.1.weight"):
			fill(x, rng, 0.5, 1.5)
		case hasSuffix(name, ".bias"):
			fill(x, rng, -0.2, 0.2)
		case hasSuffix(name, "running_mean"):
			fill(x, rng, -0.1, 0.1)
		case hasSuffix(name, "running_var"):
			fill(x, rng, 0.5, 2)
		}
	})
	return r
}

func hasSuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if len(s) >= len(x) && s[len(s)-len(x):] == x {
			return true
		}
	}
	return false
}

func fill(x *radgen.Tensor, rng *rand.Rand, lo, hi float64) {
	if x.Is64() {
		for i := range x.Data64() {
			x.Data64()[i] = lo + (hi-lo)*rng.Float64()
		}
		return
	}
	for i := range x.Data() {
		x.Data()[i] = float32(lo + (hi-lo)*rng.Float64())
	}
}

func randImages(seed uint64, shape ...int) *radgen.Tensor {
	rng := rand.New(rand.NewPCG(seed, 99))
	x := radgen.Zeros(shape...)
	for i := range x.Data() {
		x.Data()[i] = float32(rng.NormFloat64())
	}
	return x
}

func TestParameterCounts(t *testing.T) {
	// torchvision's parameter counts without fc (512·E·1000 + 1000); the
	// ResNet-101 figure is the count of R2Gen's trunk.
	cases := []struct {
		cfg  ResNetConfig
		want int
	}{
		{ResNet18, 11689512 - 513000},
		{ResNet34, 21797672 - 513000},
		{ResNet50, 25557032 - 2049000},
		{ResNet101, 42500160},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		r, err := newResNet(c.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range radgen.Trainable(r) {
			n += p.Tensor.Len()
		}
		if n != c.want || c.cfg.NumParams() != c.want {
			t.Errorf("%v: %d parameters (NumParams %d), want %d", c.cfg, n, c.cfg.NumParams(), c.want)
		}
	}
}

func TestNames(t *testing.T) {
	r, err := newResNet(ResNet101, nil)
	if err != nil {
		t.Fatal(err)
	}
	shapes := func(m radgen.Module) map[string][]int {
		out := map[string][]int{}
		m.VisitParams(func(n string, x *radgen.Tensor) { out[n] = x.Shape() })
		return out
	}
	tv := shapes(r)
	seq := shapes(&Extractor{r})
	want := map[string][]int{
		"conv1.weight":                       {64, 3, 7, 7},
		"bn1.running_var":                    {64},
		"layer1.0.conv1.weight":              {64, 64, 1, 1},
		"layer1.0.downsample.0.weight":       {256, 64, 1, 1},
		"layer3.22.bn3.bias":                 {1024},
		"layer4.2.conv3.weight":              {2048, 512, 1, 1},
		"layer4.0.downsample.1.weight":       {2048},
		"layer2.0.conv2.weight":              {128, 128, 3, 3},
		"layer2.1.conv1.weight":              {128, 512, 1, 1},
		"layer4.0.downsample.1.running_mean": {2048},
	}
	for n, s := range want {
		if !equal(tv[n], s) {
			t.Errorf("%s: %v, want %v", n, tv[n], s)
		}
	}
	wantSeq := map[string][]int{
		"model.0.weight":                {64, 3, 7, 7},
		"model.1.running_mean":          {64},
		"model.4.0.conv1.weight":        {64, 64, 1, 1},
		"model.4.0.downsample.0.weight": {256, 64, 1, 1},
		"model.7.2.conv3.weight":        {2048, 512, 1, 1},
	}
	for n, s := range wantSeq {
		if !equal(seq[n], s) {
			t.Errorf("%s: %v, want %v", n, seq[n], s)
		}
	}
	if _, ok := tv["layer1.1.downsample.0.weight"]; ok {
		t.Error("identity shortcut has a downsample")
	}
	if len(tv) != len(seq) {
		t.Errorf("%d torchvision names, %d sequential", len(tv), len(seq))
	}
	// ResNet-18: a BasicBlock stage 1 has no projection.
	r18, _ := newResNet(ResNet18, nil)
	tv18 := shapes(r18)
	if _, ok := tv18["layer1.0.downsample.0.weight"]; ok {
		t.Error("ResNet-18 layer1.0 has a downsample")
	}
	if s := tv18["layer2.0.downsample.0.weight"]; !equal(s, []int{128, 64, 1, 1}) {
		t.Errorf("ResNet-18 layer2.0.downsample.0.weight %v", s)
	}
	if s := tv18["layer4.1.conv2.weight"]; !equal(s, []int{512, 512, 3, 3}) {
		t.Errorf("ResNet-18 layer4.1.conv2.weight %v", s)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// listSource is a MapSource that lists its names.
type listSource struct{ radgen.MapSource }

func (s listSource) Names() []string {
	out := make([]string, 0, len(s.MapSource))
	for k := range s.MapSource {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestInferResNet(t *testing.T) {
	for _, cfg := range []ResNetConfig{ResNet18, ResNet34, ResNet50, ResNet101, ResNet152, {Bottleneck, [4]int{2, 1, 5, 1}}} {
		r, err := newResNet(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []Naming{TorchvisionNames, SequentialNames} {
			names := listSource{radgen.StateDict(r.Named(n), "pre.fix.")}.Names()
			// A classifier and num_batches_tracked are ignored.
			names = append(names, "pre.fix.fc.weight", "pre.fix.bn1.num_batches_tracked", "other.layer1.7.conv1.weight")
			got, naming, err := InferResNet(names, "pre.fix.")
			if err != nil || got != cfg || naming != n {
				t.Errorf("%v %v: inferred %v %v, %v", cfg, n, got, naming, err)
			}
		}
	}
	bad := map[string][]string{
		"no stem":   {"layer1.0.conv1.weight"},
		"gap":       {"conv1.weight", "layer1.0.conv1.weight", "layer1.2.conv1.weight", "layer2.0.conv1.weight", "layer3.0.conv1.weight", "layer4.0.conv1.weight"},
		"no stage":  {"conv1.weight", "layer1.0.conv1.weight", "layer2.0.conv1.weight", "layer4.0.conv1.weight"},
		"mixed":     {"conv1.weight", "layer1.0.conv3.weight", "layer2.0.conv1.weight", "layer3.0.conv3.weight", "layer4.0.conv3.weight"},
		"bad index": {"conv1.weight", "layer1.01.conv1.weight"},
		"huge":      {"conv1.weight", "layer1.99999999.conv1.weight"},
	}
	for name, names := range bad {
		if _, _, err := InferResNet(names, ""); !errors.Is(err, ErrArchitecture) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestLoadRoundTrip(t *testing.T) {
	r := newRandom(t, tinyBasic, 1)
	x := randImages(2, 2, 3, 64, 48)
	wantP, wantA := r.Forward(radgen.NoGrad(), x)
	for _, n := range []Naming{TorchvisionNames, SequentialNames} {
		src := listSource{radgen.StateDict(r.Named(n), "m.")}
		l, err := LoadResNet(src, "m.")
		if err != nil {
			t.Fatal(err)
		}
		if l.Config != tinyBasic {
			t.Fatalf("loaded %v", l.Config)
		}
		p, a := l.Forward(radgen.NoGrad(), x)
		if d := maxDiff(p, wantP) + maxDiff(a, wantA); d != 0 {
			t.Errorf("%v: reloaded model differs by %g", n, d)
		}
	}
	// A missing tensor is named.
	src := listSource{radgen.StateDict(r, "")}
	delete(src.MapSource, "layer3.0.bn2.bias")
	if _, err := LoadResNet(src, ""); !errors.Is(err, radgen.ErrMissingTensor) {
		t.Errorf("missing tensor: %v", err)
	}
}

func maxDiff(a, b *radgen.Tensor) float64 {
	if !equal(a.Shape(), b.Shape()) {
		return math.Inf(1)
	}
	x, y := a.Float64s(), b.Float64s()
	var m float64
	for i := range x {
		m = math.Max(m, math.Abs(x[i]-y[i]))
	}
	return m
}

func TestForwardShapes(t *testing.T) {
	for _, c := range []struct {
		cfg        ResNetConfig
		h, w       int
		gh, gw, ch int
	}{
		{tinyBasic, 224, 224, 7, 7, 512},
		{tinyBottleneck, 64, 96, 2, 3, 2048},
		{tinyBasic, 33, 17, 2, 1, 512},
		{tinyBasic, 1, 1, 1, 1, 512},
	} {
		r := newRandom(t, c.cfg, 3)
		p, a := r.Forward(radgen.NoGrad(), randImages(4, 2, 3, c.h, c.w))
		if !equal(p.Shape(), []int{2, c.gh * c.gw, c.ch}) || !equal(a.Shape(), []int{2, c.ch}) {
			t.Errorf("%v on %dx%d: patches %v, avg %v", c.cfg, c.h, c.w, p.Shape(), a.Shape())
		}
	}
}

// TestFoldedMatchesUnfolded compares a NoGrad forward (which the CPU
// engine runs with the batch norms folded into the convolutions) with a
// recording graph's, whose ops run as issued, and the patch layout with
// the feature map.
func TestFoldedMatchesUnfolded(t *testing.T) {
	for _, cfg := range []ResNetConfig{tinyBasic, tinyBottleneck} {
		r := newRandom(t, cfg, 5)
		x := randImages(6, 2, 3, 64, 64)
		fp, fa := r.Forward(radgen.NoGrad(), x)
		fm := r.Trunk(radgen.NewGraph(), x)
		up, ua := features(radgen.NoGrad(), fm)
		scale := maxAbs(up)
		if d := maxDiff(fp, up); d > 1e-5*scale {
			t.Errorf("%v: folded patches differ by %g (scale %g)", cfg, d, scale)
		}
		if d := maxDiff(fa, ua); d > 1e-5*scale {
			t.Errorf("%v: folded averages differ by %g", cfg, d)
		}
		// patches[b][i·w+j][c] = fm[b][c][i][j]; avg = mean over the grid.
		b, c, h, w := fm.Dim(0), fm.Dim(1), fm.Dim(2), fm.Dim(3)
		for _, idx := range [][4]int{{0, 0, 0, 0}, {1, c - 1, h - 1, w - 1}, {1, 7, 1, 0}} {
			if got, want := up.At(idx[0], idx[2]*w+idx[3], idx[1]), fm.At(idx[0], idx[1], idx[2], idx[3]); got != want {
				t.Errorf("patch layout: %v vs %v", got, want)
			}
		}
		var s float64
		for i := range h {
			for j := range w {
				s += fm.At(b-1, 3, i, j)
			}
		}
		if got := ua.At(b-1, 3); math.Abs(got-s/float64(h*w)) > 1e-5 {
			t.Errorf("avg = %v, want %v", got, s/float64(h*w))
		}
	}
}

func maxAbs(x *radgen.Tensor) float64 {
	var m float64
	for _, v := range x.Float64s() {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

func TestExtractorViews(t *testing.T) {
	e := &Extractor{newRandom(t, tinyBasic, 7)}
	study := randImages(8, 2, 2, 3, 64, 64) // 2 studies × 2 views
	p, a, err := e.Extract(context.Background(), study)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(p.Shape(), []int{2, 8, 512}) || !equal(a.Shape(), []int{2, 1024}) {
		t.Fatalf("patches %v, avg %v", p.Shape(), a.Shape())
	}
	// Each view alone, then concatenated as R2Gen does.
	for v := range 2 {
		g := radgen.NoGrad()
		view := g.Reshape(g.Slice(study, 1, v, v+1), 2, 3, 64, 64)
		vp, va := e.ResNet.Forward(g, view)
		if d := maxDiff(g.Slice(p, 1, 4*v, 4*v+4), vp); d > 1e-6 {
			t.Errorf("view %d patches differ by %g", v, d)
		}
		if d := maxDiff(g.Slice(a, 1, 512*v, 512*v+512), va); d > 1e-6 {
			t.Errorf("view %d averages differ by %g", v, d)
		}
	}
}

func TestExtractErrors(t *testing.T) {
	e := &Extractor{newRandom(t, tinyBasic, 9)}
	for _, shape := range [][]int{{3, 8, 8}, {1, 1, 8, 8}, {1, 2, 4, 8, 8}, {0, 3, 8, 8}} {
		if _, _, err := e.Extract(context.Background(), radgen.Zeros(shape...)); !errors.Is(err, ErrImageShape) {
			t.Errorf("shape %v: error %v", shape, err)
		}
	}
	if _, _, err := e.Extract(context.Background(), radgen.Zeros64(1, 3, 8, 8)); !errors.Is(err, ErrImageShape) {
		t.Errorf("float64 images for float32 weights: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := e.Extract(ctx, radgen.Zeros(1, 3, 32, 32)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestExtractConcurrent(t *testing.T) {
	e := &Extractor{newRandom(t, tinyBasic, 10)}
	x := randImages(11, 1, 2, 3, 32, 32)
	want, _, err := e.Extract(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	e.ResNet.Refold()
	var wg sync.WaitGroup
	errs := make([]float64, 4)
	for i := range errs {
		wg.Go(func() {
			p, _, err := e.Extract(context.Background(), x)
			if err != nil {
				errs[i] = math.Inf(1)
				return
			}
			errs[i] = maxDiff(p, want)
		})
	}
	wg.Wait()
	for i, d := range errs {
		if d != 0 {
			t.Errorf("goroutine %d: differs by %g", i, d)
		}
	}
}

// TestTrainingBatchNorm checks torch's train-mode semantics: batch
// statistics, running statistics updated once per view, FreezeBatchNorm.
func TestTrainingBatchNorm(t *testing.T) {
	e := &Extractor{newRandom(t, tinyBasic, 12)}
	before := e.ResNet.Stem.BN.RunningMean.Clone()
	x := randImages(13, 2, 2, 3, 32, 32)
	g := radgen.NewGraph(radgen.Train(1))
	p, _ := e.Forward(g, x)
	if !p.RequiresGrad() {
		t.Fatal("training forward does not require gradients")
	}
	// Stem running mean after two views: m ← 0.9·m + 0.1·μ_view, twice.
	conv := radgen.NoGrad()
	m := before.Float64s()
	for v := range 2 {
		view := conv.Reshape(conv.Slice(x, 1, v, v+1), 2, 3, 32, 32)
		y := conv.Conv2d(view, e.ResNet.Stem.Weight, nil, radgen.ConvSquare(2, 3))
		mu := conv.GlobalAvgPool2d(y).Float64s() // per image, per channel
		for c := range m {
			m[c] = 0.9*m[c] + 0.1*(mu[c]+mu[64+c])/2
		}
	}
	got := e.ResNet.Stem.BN.RunningMean.Float64s()
	for c := range m {
		if math.Abs(got[c]-m[c]) > 1e-5 {
			t.Fatalf("running mean[%d] = %v, want %v", c, got[c], m[c])
		}
	}
	// Backward reaches every trainable tensor.
	if err := g.Backward(g.Sum(g.Mul(p, p))); err != nil {
		t.Fatal(err)
	}
	for _, n := range radgen.Trainable(e) {
		if n.Tensor.Grad() == nil {
			t.Errorf("%s: no gradient", n.Name)
		}
	}
	// Frozen: the running statistics stay.
	e.ResNet.FreezeBatchNorm = true
	frozen := e.ResNet.Stem.BN.RunningMean.Clone()
	e.Forward(radgen.NewGraph(radgen.Train(2)), x)
	if d := maxDiff(frozen, e.ResNet.Stem.BN.RunningMean); d != 0 {
		t.Errorf("frozen batch norm moved by %g", d)
	}
}

// to64 converts every tensor of r to float64, for finite differences.
func to64(r *ResNet) {
	conv := func(c *ConvBN) {
		c.Weight = c.Weight.To64().SetRequiresGrad(true)
		bn := c.BN
		bn.Weight = bn.Weight.To64().SetRequiresGrad(true)
		bn.Bias = bn.Bias.To64().SetRequiresGrad(true)
		bn.RunningMean, bn.RunningVar = bn.RunningMean.To64(), bn.RunningVar.To64()
	}
	conv(r.Stem)
	for _, blocks := range r.Layers {
		for _, b := range blocks {
			for _, c := range []*ConvBN{b.Conv1, b.Conv2, b.Conv3, b.Downsample} {
				if c != nil {
					conv(c)
				}
			}
		}
	}
}

// TestResNetGradients checks the gradients of a whole float64 Bottleneck
// ResNet, in eval mode (checked against a NoGrad forward) and in train mode
// (batch statistics), against central differences on single elements of
// tensors spread over the network, the input included.
func TestResNetGradients(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	probes := []string{"conv1.weight", "bn1.weight", "layer1.0.conv2.weight", "layer1.0.bn1.bias",
		"layer2.0.downsample.0.weight", "layer3.0.bn3.weight", "layer4.0.conv3.weight", "layer4.0.downsample.1.bias"}
	for _, train := range []bool{false, true} {
		r := newRandom(t, tinyBottleneck, 14)
		to64(r)
		// Four images: batch statistics over the 1×1 grid of layer4 then
		// have four samples (with two, x̂ = ±1 and the loss is badly
		// conditioned for finite differences).
		x := randImages(15, 4, 3, 16, 16).To64().SetRequiresGrad(true)
		rng := rand.New(rand.NewPCG(16, 16))
		var w1, w2 *radgen.Tensor
		loss := func(g *radgen.Graph) float64 {
			p, a := r.Forward(g, x)
			if w1 == nil {
				w1, w2 = radgen.Zeros64(p.Shape()...), radgen.Zeros64(a.Shape()...)
				fill(w1, rng, -1, 1)
				fill(w2, rng, -1, 1)
			}
			l := g.Add(g.Sum(g.Mul(p, w1)), g.Sum(g.Mul(a, w2)))
			if g.Recording() {
				if err := g.Backward(l); err != nil {
					t.Fatal(err)
				}
			}
			return l.Data64()[0]
		}
		var opts []radgen.GraphOption
		if train {
			opts = append(opts, radgen.Train(1))
		}
		// In train mode the running statistics change on every forward but
		// do not feed the output, so finite differences stay valid.
		loss(radgen.NewGraph(opts...))
		params := map[string]*radgen.Tensor{"input": x}
		for _, p := range radgen.Trainable(r) {
			params[p.Name] = p.Tensor
		}
		const h = 1e-6
		worst := 0.0
		for _, name := range append(probes, "input") {
			p := params[name]
			if p == nil {
				t.Fatalf("no parameter %s", name)
			}
			d := p.Data64()
			i := rng.IntN(len(d))
			orig := d[i]
			eval := func(v float64) float64 {
				d[i] = v
				r.Refold() // d was kept from an earlier Data64 call
				return loss(radgen.NoGrad(opts...))
			}
			num := (eval(orig+h) - eval(orig-h)) / (2 * h)
			d[i] = orig
			got := p.Grad().Data64()[i]
			e := math.Abs(num-got) / math.Max(1, math.Abs(num))
			worst = math.Max(worst, e)
			if e > 1e-5 {
				t.Errorf("train=%v %s[%d]: gradient %.10g, finite difference %.10g", train, name, i, got, num)
			}
		}
		t.Logf("train=%v: %d probes, worst relative gradient error %.2g", train, len(probes)+1, worst)
	}
}

func TestStackStudies(t *testing.T) {
	gray := &Image{C: 1, H: 2, W: 2, Pix: []float32{1, 2, 3, 4}}
	rgb := &Image{C: 3, H: 2, W: 2, Pix: []float32{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}}
	x, err := StackStudies([][]*Image{{gray, rgb}})
	if err != nil {
		t.Fatal(err)
	}
	if !equal(x.Shape(), []int{1, 2, 3, 2, 2}) {
		t.Fatalf("shape %v", x.Shape())
	}
	want := []float32{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}
	for i, v := range x.Data() {
		if v != want[i] {
			t.Fatalf("stacked %v, want %v", x.Data(), want)
		}
	}
	for name, s := range map[string][][]*Image{
		"empty":        nil,
		"ragged views": {{gray, rgb}, {gray}},
		"size":         {{gray, {C: 1, H: 3, W: 2, Pix: make([]float32, 6)}}},
		"short pix":    {{{C: 3, H: 2, W: 2, Pix: make([]float32, 5)}}},
		"nil":          {{nil}},
	} {
		if _, err := StackStudies(s); !errors.Is(err, ErrImageShape) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNumParamsMatchesModel(t *testing.T) {
	for _, cfg := range []ResNetConfig{tinyBasic, tinyBottleneck, {BasicBlock, [4]int{1, 3, 1, 2}}, {Bottleneck, [4]int{2, 1, 1, 3}}} {
		r, err := newResNet(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range radgen.Trainable(r) {
			n += p.Tensor.Len()
		}
		if n != cfg.NumParams() {
			t.Errorf("%v: model has %d parameters, NumParams says %d", cfg, n, cfg.NumParams())
		}
	}
}

func TestLoadRefusesHugeArchitecture(t *testing.T) {
	// Names alone describing a thousand-block stage: refused before any
	// allocation or read.
	names := []string{"conv1.weight", "layer1.0.conv1.weight", "layer2.0.conv1.weight", "layer3.0.conv1.weight"}
	for i := range 1000 {
		names = append(names, "layer4."+strconv.Itoa(i)+".conv3.weight")
	}
	names[1], names[2], names[3] = "layer1.0.conv3.weight", "layer2.0.conv3.weight", "layer3.0.conv3.weight"
	src := namesOnly(names)
	if _, err := LoadResNet(src, ""); !errors.Is(err, ErrArchitecture) {
		t.Errorf("error %v", err)
	}
}

type namesOnly []string

func (n namesOnly) Names() []string { return n }
func (n namesOnly) Float32(name string) ([]float32, []int, error) {
	return nil, nil, errors.New("not stored")
}

// FuzzInferResNet feeds InferResNet newline-separated names: it must not
// panic, and what it accepts must be a valid configuration that LoadResNet
// rejects cleanly when the tensors are absent.
func FuzzInferResNet(f *testing.F) {
	for _, cfg := range []ResNetConfig{tinyBasic, ResNet50} {
		r, _ := newResNet(cfg, nil)
		for _, n := range []Naming{TorchvisionNames, SequentialNames} {
			f.Add(strings.Join(listSource{radgen.StateDict(r.Named(n), "")}.Names(), "\n"))
		}
	}
	f.Add("conv1.weight\nlayer1.0.conv1.weight\nlayer1.-1.x")
	f.Add("0.weight\n4.0.conv3.weight\n5.0.conv3.weight\n6.0.conv3.weight\n7.00.conv3.weight")
	f.Fuzz(func(t *testing.T, s string) {
		names := strings.Split(s, "\n")
		cfg, _, err := InferResNet(names, "")
		if err != nil {
			if !errors.Is(err, ErrArchitecture) {
				t.Fatalf("error %v does not wrap ErrArchitecture", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted invalid %v: %v", cfg, err)
		}
		if cfg.NumParams() > 1<<24 {
			return // do not build big networks under the fuzzer
		}
		if _, err := LoadResNet(namesOnly(names), ""); err == nil {
			t.Fatal("loaded a network from names without tensors")
		}
	})
}
