package mesh

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/gradcheck"
)

// levelsOf returns n levels (1, 2, d) whose values encode their index, so
// a route can be read off its output.
func levelsOf(n, d int) []*radgen.Tensor {
	var out []*radgen.Tensor
	for j := range n {
		x := radgen.Zeros(1, 2, d)
		for i := range x.Data() {
			x.Data()[i] = float32(10*(j+1) + i)
		}
		out = append(out, x)
	}
	return out
}

func TestMultiViewFixedRoutes(t *testing.T) {
	const n, d = 3, 4
	levels := levelsOf(n, d)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		r    Routing
		want [n]int // level (1-based) routed to decoder layers 1..3
	}{
		{RoutingGCA, [n]int{3, 2, 1}},
		{RoutingGPA, [n]int{1, 2, 3}},
		{RoutingFGA, [n]int{1, 1, 1}},
	} {
		for i, v := range NewMultiViews(tc.r, n, n, d, rng) {
			got := v.Route(radgen.NoGrad(), levels)
			if got != levels[tc.want[i]-1] {
				t.Errorf("%s: decoder layer %d routed to %v, want S_%d", tc.r, i+1, got.Data()[:1], tc.want[i])
			}
			// Eq. 8 with γ = 1, β = 0: the standardised sum of the two views.
			out := v.Forward(radgen.NoGrad(), levels).Data()
			sum := make([]float64, d)
			for k := range sum {
				sum[k] = float64(levels[tc.want[i]-1].Data()[k] + levels[n-1].Data()[k])
			}
			var mu, vr float64
			for _, x := range sum {
				mu += x / d
			}
			for _, x := range sum {
				vr += (x - mu) * (x - mu) / d
			}
			for k, x := range sum {
				want := (x - mu) / math.Sqrt(vr+1e-5)
				if math.Abs(float64(out[k])-want) > 1e-5 {
					t.Fatalf("%s layer %d: LN(g(S)+S_N)[%d] = %v, want %v", tc.r, i+1, k, out[k], want)
				}
			}
		}
	}
}

// FMA with W_ij = I·(j+1), b = 0 sums (j+1)·S_j; AMA with zero scores
// averages the levels.
func TestMultiViewLearnedRoutes(t *testing.T) {
	const n, d = 3, 2
	levels := levelsOf(n, d)
	rng := rand.New(rand.NewPCG(3, 4))
	fma := NewMultiView(RoutingFMA, 1, n, d, rng)
	for j, l := range fma.Mix {
		radgen.Fill(l.Weight, 0)
		radgen.Fill(l.Bias, 0)
		l.Weight.Data()[0], l.Weight.Data()[3] = float32(j+1), float32(j+1)
	}
	ama := NewMultiView(RoutingAMA, 1, n, d, rng)
	radgen.Fill(ama.Score.Weight, 0)
	radgen.Fill(ama.Score.Bias, 0)
	gf := fma.Route(radgen.NoGrad(), levels).Data()
	ga := ama.Route(radgen.NoGrad(), levels).Data()
	for k := range gf {
		var wantF, wantA float64
		for j := range n {
			wantF += float64(j+1) * float64(levels[j].Data()[k])
			wantA += float64(levels[j].Data()[k]) / n
		}
		if math.Abs(float64(gf[k])-wantF) > 1e-4 || math.Abs(float64(ga[k])-wantA) > 1e-4 {
			t.Fatalf("element %d: FMA %v (want %v), AMA %v (want %v)", k, gf[k], wantF, ga[k], wantA)
		}
	}
	// A large score on level 2 routes AMA to S_2.
	ama.Score.Bias.Data()[1] = 50
	ga = ama.Route(radgen.NoGrad(), levels).Data()
	for k := range ga {
		if math.Abs(float64(ga[k]-levels[1].Data()[k])) > 1e-3 {
			t.Fatalf("AMA with level 2 favoured: %v, want %v", ga, levels[1].Data())
		}
	}
}

func TestMultiViewGradients(t *testing.T) {
	const n, d = 3, 4
	for _, r := range Routings {
		rng := rand.New(rand.NewPCG(5, 6))
		v := NewMultiView(r, 1, n, d, rng)
		radgen.Promote64(v)
		for i := range v.Gamma.Data64() {
			v.Gamma.Data64()[i] = 0.5 + rng.Float64()
			v.Beta.Data64()[i] = rng.Float64() - 0.5
		}
		var levels []*radgen.Tensor
		for range n {
			levels = append(levels, gradcheck.Rand(rng, 1, 2, 3, d))
		}
		wrt := []*radgen.Tensor{v.Gamma, v.Beta}
		switch r {
		case RoutingGCA, RoutingGPA, RoutingFGA: // only g_i(S) and S_N reach the output
			wrt = append(wrt, v.Route(radgen.NoGrad(), levels), levels[n-1])
		default:
			wrt = append(wrt, levels...)
		}
		for _, l := range v.Mix {
			wrt = append(wrt, l.Weight, l.Bias)
		}
		if v.Score != nil {
			wrt = append(wrt, v.Score.Weight, v.Score.Bias)
		}
		gradcheck.Check(t, "multi-view "+string(r), 1e-6, func(g *radgen.Graph) *radgen.Tensor {
			return v.Forward(g, levels)
		}, wrt...)
	}
}

func TestMultiViewPanics(t *testing.T) {
	for _, f := range []func(){
		func() { NewMultiView(RoutingNone, 0, 3, 4, nil) },
		func() { NewMultiView("xyz", 0, 3, 4, nil) },
		func() { NewMultiView(RoutingGCA, 3, 3, 4, nil) },
		func() { NewMultiView(RoutingGCA, 0, 3, 4, nil).Route(radgen.NoGrad(), levelsOf(2, 4)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}
