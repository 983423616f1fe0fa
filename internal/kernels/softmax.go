package kernels

import "math"

// Softmax applies a numerically stable softmax to each row of length n:
// dst = exp(x − max x) / Σ exp(x − max x). Sums run in float64.
func Softmax[T Float](dst, x []T, n int) {
	for off := 0; off+n <= len(x); off += n {
		row, out := x[off:off+n], dst[off:off+n]
		m := maxOf(row)
		var s float64
		var buf [mathBlock]float64
		for j := 0; j < n; j += mathBlock {
			b := buf[:min(mathBlock, n-j)]
			widen(b, row[j:], m)
			expBlock(b, b)
			for _, e := range b {
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
		m := maxOf(row)
		var s float64
		var buf [mathBlock]float64
		for j := 0; j < n; j += mathBlock {
			b := buf[:min(mathBlock, n-j)]
			widen(b, row[j:], m)
			expBlock(b, b)
			for _, e := range b {
				s += e
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

// maxOf returns slices.Max(x), NaN if any value is NaN, taking four
// running maxima: one chain of the builtin max, with its NaN and signed
// zero checks, takes several cycles a value.
func maxOf[T Float](x []T) T {
	m0, m1, m2, m3 := x[0], x[0], x[0], x[0]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		m0, m1 = max(m0, x[i]), max(m1, x[i+1])
		m2, m3 = max(m2, x[i+2]), max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}
