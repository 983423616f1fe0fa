//go:build !amd64 || purego || noasm || !gc

package kernels

// expBlock sets dst[i] = fastExp(src[i]) for i < len(dst); dst may be src.
func expBlock(dst, src []float64) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = fastExp(v)
	}
}
