package kernels

import (
	"math"
	"testing"
)

// TestNormalizeBackwardConstantRow checks R2Gen's normalisation of a
// constant row (s = 0, as after a ReLU that zeroes a whole row): the
// gradient is inv·(dy − mean(dy)), finite, instead of the 0/0 of the
// standard-deviation term.
func TestNormalizeBackwardConstantRow(t *testing.T) {
	const n, eps = 4, 1e-6
	x := []float32{0, 0, 0, 0}
	y, inv := make([]float32, n), make([]float32, 1)
	Normalize(y, inv, x, n, eps, NormR2Gen)
	dy := []float32{1, -2, 0.5, 4}
	dx := make([]float32, n)
	NormalizeBackward(dx, dy, y, inv, n, eps, NormR2Gen)
	mean := (1 - 2 + 0.5 + 4) / 4.0
	for i := range dx {
		want := float64(inv[0]) * (float64(dy[i]) - mean)
		if math.IsNaN(float64(dx[i])) || math.Abs(float64(dx[i])-want) > 1e-6*math.Abs(want) {
			t.Errorf("dx[%d] = %v, want %v", i, dx[i], want)
		}
	}
}
