package f32

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen/internal/cpu"
)

// convRef returns f(conv3×3(x, w) + bias + beta·y0) in float64 for x
// (B, h, w, C) channels last, w (Cout, C, 3, 3), padding 1, stride 1.
func convRef(x []float32, w []float64, bias []float32, y0 []float32, beta float32, relu bool, b, h, wd, c, cout int) []float64 {
	out := make([]float64, b*h*wd*cout)
	for bi := range b {
		for oy := range h {
			for ox := range wd {
				for o := range cout {
					var s float64
					for ky := range 3 {
						for kx := range 3 {
							iy, ix := oy-1+ky, ox-1+kx
							if iy < 0 || iy >= h || ix < 0 || ix >= wd {
								continue
							}
							for ci := range c {
								s += float64(x[((bi*h+iy)*wd+ix)*c+ci]) * w[((o*c+ci)*3+ky)*3+kx]
							}
						}
					}
					i := ((bi*h+oy)*wd+ox)*cout + o
					if beta != 0 {
						s += float64(beta) * float64(y0[i])
					}
					if bias != nil {
						s += float64(bias[o])
					}
					if relu {
						s = math.Max(s, 0)
					}
					out[i] = s
				}
			}
		}
	}
	return out
}

// winogradConv runs the whole Winograd convolution as a caller does.
func winogradConv(x []float32, u [16]*PackedB, bias, y []float32, beta float32, relu bool, b, h, w, c, cout int) {
	nt := WinogradTiles(b, h, w)
	v := make([]float32, 16*nt*c)
	m := make([]float32, 16*nt*cout)
	WinogradInput(v, x, b, h, w, c, 0, nt/2)
	WinogradInput(v, x, b, h, w, c, nt/2, nt)
	GemmPackedBatch(nt, v, c, nt*c, u[:], m, cout, nt*cout)
	WinogradOutput(y, m, b, h, w, cout, bias, beta, relu, 0, nt/3)
	WinogradOutput(y, m, b, h, w, cout, bias, beta, relu, nt/3, nt)
}

func TestWinogradConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	for _, avx := range []bool{true, false} {
		if !avx {
			defer cpu.DisableAVX2FMA()()
		}
		for _, s := range [][5]int{
			{1, 1, 1, 3, 5}, {2, 4, 4, 8, 16}, {1, 5, 7, 17, 9}, {2, 7, 7, 64, 40}, {1, 14, 14, 24, 32}, {3, 3, 2, 9, 8},
		} {
			b, h, w, c, cout := s[0], s[1], s[2], s[3], s[4]
			x := make([]float32, b*h*w*c)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			wt := make([]float64, cout*c*9)
			for i := range wt {
				wt[i] = rng.NormFloat64() / 3
			}
			bias := make([]float32, cout)
			for i := range bias {
				bias[i] = float32(rng.NormFloat64())
			}
			u := WinogradWeights(wt, cout, c)
			for _, ep := range []struct {
				bias, relu bool
				beta       float32
			}{{false, false, 0}, {true, true, 0}, {true, true, 1}, {false, false, 0.5}} {
				y := make([]float32, b*h*w*cout)
				for i := range y {
					y[i] = float32(rng.NormFloat64())
					if ep.beta == 0 {
						y[i] = float32(math.NaN()) // not read
					}
				}
				var bs []float32
				if ep.bias {
					bs = bias
				}
				want := convRef(x, wt, bs, y, ep.beta, ep.relu, b, h, w, c, cout)
				winogradConv(x, u, bs, y, ep.beta, ep.relu, b, h, w, c, cout)
				var num, den float64
				for i, v := range want {
					d := float64(y[i]) - v
					num += d * d
					den += v * v
				}
				if e := math.Sqrt(num / den); !(e < 1e-6) {
					t.Errorf("avx=%v %v %+v: ‖Δ‖/‖ref‖ = %.3g", avx, s, ep, e)
				}
			}
		}
	}
}

// TestWinogradKernels requires the assembly transforms to reproduce the Go
// ones bit for bit (the same additions in the same order) over channel
// counts with and without a remainder, strides and every epilogue.
func TestWinogradKernels(t *testing.T) {
	if winoInKernel() == nil || !cpu.HasAVX2FMA() {
		t.Skip("no assembly transforms here")
	}
	rng := rand.New(rand.NewPCG(22, 22))
	for _, c := range []int{8, 13, 64, 72} {
		rs, ps, ds := 5*c+3, c+1, 17*c
		src := make([]float32, 4*rs+4*ps+c)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		want, got := make([]float32, 16*ds), make([]float32, 16*ds)
		goWinoIn(c, src, rs, ps, want, ds)
		winoInKernel()(c, src, rs, ps, got, ds)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("input transform, c=%d: [%d] = %v, want %v", c, i, got[i], want[i])
			}
		}
		bias := make([]float32, c)
		for i := range bias {
			bias[i] = float32(rng.NormFloat64())
		}
		for _, ep := range []struct {
			bias, relu bool
			beta       float32
		}{{false, false, 0}, {true, false, 0}, {false, true, 0}, {true, true, 1}} {
			var bs []float32
			if ep.bias {
				bs = bias
			}
			dst0 := make([]float32, 2*rs+c)
			for i := range dst0 {
				dst0[i] = float32(rng.NormFloat64())
			}
			want, got := append([]float32(nil), dst0...), append([]float32(nil), dst0...)
			goWinoOut(c, src, ds/17, want, rs, ps, bs, ep.beta, ep.relu)
			winoOutKernel()(c, src, ds/17, got, rs, ps, bs, ep.beta, ep.relu)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("output transform, c=%d %+v: [%d] = %v, want %v", c, ep, i, got[i], want[i])
				}
			}
		}
	}
}
