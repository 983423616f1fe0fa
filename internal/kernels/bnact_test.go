package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/cpu"
)

// bnActRun runs BatchNormAct forward and backward on float32 data and
// returns every result: y, the statistics, the gradients and their sums.
func bnActRun(batch, c, plane int, relu, res, fresh bool, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := batch * c * plane
	vec := func(k int, scale float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * scale)
		}
		return v
	}
	p := &BatchNormAct[float32]{C: c, Plane: plane, X: vec(n, 3), Y: make([]float32, n), ReLU: relu,
		Gamma: vec(c, 2), Beta: vec(c, 1), Inv: make([]float32, c), Shift: make([]float32, c),
		Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c)}
	for i := 0; i < n; i += 7 {
		p.X[i] += 5 // a channel mean away from 0
	}
	if res {
		p.R = vec(n, 1)
	}
	p.Forward(1e-5, 0, c)
	gr := &BatchNormActGrad[float32]{DY: vec(n, 1), DX: vec(n, 1), FreshX: fresh, FreshR: fresh,
		SumDY: make([]float64, c), SumDYXhat: make([]float64, c)}
	if fresh {
		clear(gr.DX)
	}
	if res {
		gr.DR = vec(n, 1)
		if fresh {
			clear(gr.DR)
		}
	}
	p.Backward(gr, 0, c)
	f := func(v []float64) []float32 {
		o := make([]float32, len(v))
		for i, x := range v {
			o[i] = float32(x)
			if float64(o[i]) != x { // keep all 64 bits
				o = append(o, float32(x-float64(o[i])))
			}
		}
		return o
	}
	return [][]float32{p.Y, p.Inv, p.Shift, f(p.Mean), f(p.Var), gr.DX, gr.DR, f(gr.SumDY), f(gr.SumDYXhat)}
}

// The assembly gives the bits of the Go loops, for every combination of
// the options and planes that are and are not multiples of its step.
func TestBatchNormActAssemblyBits(t *testing.T) {
	if !cpu.HasAVX2FMA() {
		t.Skip("no AVX2 on this path: the Go loops run alone")
	}
	for _, plane := range []int{1, 7, 16, 49, 53, 196} {
		for _, relu := range []bool{false, true} {
			for _, res := range []bool{false, true} {
				for _, fresh := range []bool{false, true} {
					asm := bnActRun(2, 3, plane, relu, res, fresh, uint64(plane))
					restore := cpu.DisableAVX2FMA()
					gold := bnActRun(2, 3, plane, relu, res, fresh, uint64(plane))
					restore()
					for k := range gold {
						for i := range gold[k] {
							if math.Float32bits(asm[k][i]) != math.Float32bits(gold[k][i]) {
								t.Fatalf("plane %d relu %v res %v fresh %v: result %d[%d] = %v, Go loops %v",
									plane, relu, res, fresh, k, i, asm[k][i], gold[k][i])
							}
						}
					}
				}
			}
		}
	}
}

// The float32 kernel agrees with the float64 one to float32 precision.
func TestBatchNormActFloat32(t *testing.T) {
	const batch, c, plane = 3, 4, 37
	rng := rand.New(rand.NewPCG(4, 4))
	n := batch * c * plane
	x64, dy64, r64 := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range x64 {
		x64[i], dy64[i], r64[i] = rng.Float64()*4-1, rng.Float64()*2-1, rng.Float64()*2-1
	}
	to32 := func(v []float64) []float32 {
		o := make([]float32, len(v))
		for i, x := range v {
			o[i] = float32(x)
		}
		return o
	}
	p64 := &BatchNormAct[float64]{C: c, Plane: plane, X: x64, R: r64, Y: make([]float64, n), ReLU: true,
		Inv: make([]float64, c), Shift: make([]float64, c), Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c)}
	p32 := &BatchNormAct[float32]{C: c, Plane: plane, X: to32(x64), R: to32(r64), Y: make([]float32, n), ReLU: true,
		Inv: make([]float32, c), Shift: make([]float32, c), Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c)}
	p64.Forward(1e-5, 0, c)
	p32.Forward(1e-5, 0, c)
	g64 := &BatchNormActGrad[float64]{DY: dy64, DX: make([]float64, n), DR: make([]float64, n), SumDY: make([]float64, c), SumDYXhat: make([]float64, c)}
	g32 := &BatchNormActGrad[float32]{DY: to32(dy64), DX: make([]float32, n), DR: make([]float32, n), SumDY: make([]float64, c), SumDYXhat: make([]float64, c)}
	p64.Backward(g64, 0, c)
	p32.Backward(g32, 0, c)
	for i := range n {
		// Near the ReLU's kink the two may fall on different sides.
		if math.Abs(p64.Y[i]) < 1e-5 {
			continue
		}
		if d := math.Abs(float64(p32.Y[i]) - p64.Y[i]); d > 1e-5 {
			t.Fatalf("y[%d] = %v, float64 %v", i, p32.Y[i], p64.Y[i])
		}
		if d := math.Abs(float64(g32.DX[i]) - g64.DX[i]); d > 1e-4 {
			t.Fatalf("dx[%d] = %v, float64 %v", i, g32.DX[i], g64.DX[i])
		}
	}
}
