//go:build !amd64 || purego || noasm || !gc

package kernels

// In this build the Go loops of BatchNormAct compute every value.

func sumHead32(acc *[16]float64, x []float32) int { return 0 }

func sqDevHead32(acc *[16]float64, x []float32, mu float64) int { return 0 }

func normHead32(y, x, r []float32, c *[4]float32, flags int) int { return 0 }

func sumsHead32(s, sx *[16]float64, x, dy, y, dr []float32, c *[4]float32, flags int) int { return 0 }

func dxHead32(dx, x, dy, y []float32, c *[4]float32, k *[3]float64, flags int) int { return 0 }
