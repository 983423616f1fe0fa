package kernels

import "math"

// ReLU: dst[i] = max(x[i], 0).
func ReLU[T Float](dst, x []T) {
	for i, v := range x {
		if v > 0 {
			dst[i] = v
		} else {
			dst[i] = 0
		}
	}
}

// ReLUBackward: dx[i] += dy[i]·[y[i] > 0], from y = max(x, 0).
func ReLUBackward[T Float](dx, dy, y []T) {
	for i, v := range y {
		if v > 0 {
			dx[i] += dy[i]
		}
	}
}

// Tanh: dst[i] = tanh(x[i]).
func Tanh[T Float](dst, x []T) {
	if _, ok := any(dst).([]float32); !ok {
		for i, v := range x {
			dst[i] = T(math.Tanh(float64(v)))
		}
		return
	}
	var buf [mathBlock]float64
	for off := tanhHead(any(dst).([]float32), any(x).([]float32)); off < len(x); off += mathBlock {
		b := buf[:min(mathBlock, len(x)-off)]
		widen(b, x[off:], 0)
		for i, v := range b {
			b[i] = tanhFast(v)
		}
		for i, v := range b {
			dst[off+i] = T(v)
		}
	}
}

// TanhBackward: dx += dy·(1 − y²), from y = tanh(x).
func TanhBackward[T Float](dx, dy, y []T) {
	for i, v := range y {
		dx[i] += dy[i] * (1 - v*v)
	}
}

// Sigmoid: dst[i] = 1 / (1 + exp(−x[i])).
func Sigmoid[T Float](dst, x []T) {
	off := 0
	if d, ok := any(dst).([]float32); ok {
		off = sigmoidHead(d, any(x).([]float32))
	}
	var buf [mathBlock]float64
	for ; off < len(x); off += mathBlock {
		b := buf[:min(mathBlock, len(x)-off)]
		widen(b, x[off:], 0)
		for i, v := range b {
			b[i] = sigmoid(v)
		}
		for i, v := range b {
			dst[off+i] = T(v)
		}
	}
}

// SigmoidBackward: dx += dy·y·(1 − y), from y = σ(x).
func SigmoidBackward[T Float](dx, dy, y []T) {
	for i, v := range y {
		dx[i] += dy[i] * v * (1 - v)
	}
}

// Scale: dst[i] = s·x[i].
func Scale[T Float](dst, x []T, s T) {
	for i, v := range x {
		dst[i] = s * v
	}
}

// AddScaled: dst[i] += s·x[i].
func AddScaled[T Float](dst, x []T, s T) {
	for i, v := range x {
		dst[i] += s * v
	}
}
