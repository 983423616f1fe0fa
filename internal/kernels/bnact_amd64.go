//go:build !purego && !noasm && gc

package kernels

import "github.com/radgen/radgen/internal/cpu"

// The assembly (bnact_amd64.s) runs the loops of BatchNormAct with the bits
// of the scalar code; see there for each function's loop.

//go:noescape
func bnSumAVX2(acc *[16]float64, x *float32, n int)

//go:noescape
func bnSqDevAVX2(acc *[16]float64, x *float32, n int, mu float64)

//go:noescape
func bnNormAVX2(y, x, r *float32, n int, c *[4]float32, flags int)

//go:noescape
func bnSumsAVX2(s, sx *[16]float64, x, dy, y, dr *float32, n int, c *[4]float32, flags int)

//go:noescape
func bnDxAVX2(dx, x, dy, y *float32, n int, c *[4]float32, k *[3]float64, flags int)

// bnHead returns how many of n values the assembly takes, a multiple of
// step (a power of two): 0 where the CPU lacks AVX2.
func bnHead(n, step int) int {
	if !cpu.HasAVX2FMA() {
		return 0
	}
	return n &^ (step - 1)
}

// ptr returns the address of s's first element, or nil for an empty s.
func ptr(s []float32) *float32 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func sumHead32(acc *[16]float64, x []float32) int {
	n := bnHead(len(x), 16)
	if n > 0 {
		bnSumAVX2(acc, &x[0], n)
	}
	return n
}

func sqDevHead32(acc *[16]float64, x []float32, mu float64) int {
	n := bnHead(len(x), 16)
	if n > 0 {
		bnSqDevAVX2(acc, &x[0], n, mu)
	}
	return n
}

func normHead32(y, x, r []float32, c *[4]float32, flags int) int {
	n := bnHead(len(x), 8)
	if n > 0 {
		bnNormAVX2(&y[0], &x[0], ptr(r), n, c, flags)
	}
	return n
}

func sumsHead32(s, sx *[16]float64, x, dy, y, dr []float32, c *[4]float32, flags int) int {
	n := bnHead(len(x), 16)
	if n > 0 {
		bnSumsAVX2(s, sx, &x[0], &dy[0], ptr(y), ptr(dr), n, c, flags)
	}
	return n
}

func dxHead32(dx, x, dy, y []float32, c *[4]float32, k *[3]float64, flags int) int {
	n := bnHead(len(x), 4)
	if n > 0 {
		bnDxAVX2(&dx[0], &x[0], &dy[0], ptr(y), n, c, k, flags)
	}
	return n
}
