//go:build !amd64 || purego || noasm || !gc

package kernels

// expBlock sets dst[i] = fastExp(src[i]) for i < len(dst); dst may be src.
func expBlock(dst, src []float64) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = fastExp(v)
	}
}

// sigmoidHead and tanhHead compute no values in this build: the Go loops
// compute them all.
func sigmoidHead(dst, x []float32) int { return 0 }

func tanhHead(dst, x []float32) int { return 0 }
