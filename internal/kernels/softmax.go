package kernels

import (
	"math"
	"slices"
)

// Softmax applies a numerically stable softmax to each row of length n:
// dst = exp(x − max x) / Σ exp(x − max x). Sums run in float64.
func Softmax[T Float](dst, x []T, n int) {
	for off := 0; off+n <= len(x); off += n {
		row, out := x[off:off+n], dst[off:off+n]
		m := slices.Max(row)
		var s float64
		var buf [mathBlock]float64
		for j := 0; j < n; j += mathBlock {
			b := buf[:min(mathBlock, n-j)]
			widen(b, row[j:], m)
			for i, v := range b {
				e := fastExp(v)
				b[i] = e
				s += e
			}
			for i, e := range b {
				out[j+i] = T(e)
			}
		}
		inv := 1 / s
		for i := range out {
			out[i] = T(float64(out[i]) * inv)
		}
	}
}

// SoftmaxBackward: dx += y ⊙ (dy − Σ dy·y) per row, from y = softmax(x).
func SoftmaxBackward[T Float](dx, dy, y []T, n int) {
	for off := 0; off+n <= len(y); off += n {
		yr, dyr, dxr := y[off:off+n], dy[off:off+n], dx[off:off+n]
		var dot float64
		for i := range yr {
			dot += float64(dyr[i]) * float64(yr[i])
		}
		for i := range yr {
			dxr[i] += yr[i] * (dyr[i] - T(dot))
		}
	}
}

// LogSoftmax: dst = x − max x − log Σ exp(x − max x), per row of length n.
func LogSoftmax[T Float](dst, x []T, n int) {
	for off := 0; off+n <= len(x); off += n {
		row, out := x[off:off+n], dst[off:off+n]
		m := slices.Max(row)
		var s float64
		var buf [mathBlock]float64
		for j := 0; j < n; j += mathBlock {
			b := buf[:min(mathBlock, n-j)]
			widen(b, row[j:], m)
			for _, v := range b {
				s += fastExp(v)
			}
		}
		lse := T(math.Log(s)) + m
		for i, v := range row {
			out[i] = v - lse
		}
	}
}

// LogSoftmaxBackward: dx += dy − exp(y)·Σ dy per row, from y = logsoftmax(x).
func LogSoftmaxBackward[T Float](dx, dy, y []T, n int) {
	for off := 0; off+n <= len(y); off += n {
		yr, dyr, dxr := y[off:off+n], dy[off:off+n], dx[off:off+n]
		var s float64
		for _, v := range dyr {
			s += float64(v)
		}
		for i := range yr {
			dxr[i] += dyr[i] - T(math.Exp(float64(yr[i]))*s)
		}
	}
}
