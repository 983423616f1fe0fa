package kernels

import (
	"syscall"
	"testing"
)

func cpuNS() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Nano() + r.Stime.Nano())
}

func BenchmarkBatchNormAct(b *testing.B) {
	const batch, c, plane = 4, 256, 56 * 56
	n := batch * c * plane
	p := &BatchNormAct[float32]{C: c, Plane: plane, X: make([]float32, n), Y: make([]float32, n), R: make([]float32, n), ReLU: true,
		Inv: make([]float32, c), Shift: make([]float32, c), Mean: make([]float64, c), Var: make([]float64, c), Inv64: make([]float64, c)}
	for i := range p.X {
		p.X[i] = float32(uint32(i)*2654435761>>20) - 2048
	}
	gr := &BatchNormActGrad[float32]{DY: p.X, DX: make([]float32, n), DR: make([]float32, n), SumDY: make([]float64, c), SumDYXhat: make([]float64, c)}
	b.Run("forward", func(b *testing.B) {
		c0 := cpuNS()
		for range b.N {
			p.Forward(1e-5, 0, c)
		}
		b.ReportMetric((cpuNS()-c0)/float64(b.N)/float64(n), "cpu-ns/elem")
	})
	b.Run("backward", func(b *testing.B) {
		c0 := cpuNS()
		for range b.N {
			p.Backward(gr, 0, c)
		}
		b.ReportMetric((cpuNS()-c0)/float64(b.N)/float64(n), "cpu-ns/elem")
	})
}

func BenchmarkWinogradFilters(b *testing.B) {
	const c = 256
	w := make([]float32, c*c*9)
	for i := range w {
		w[i] = float32(i%13) - 6
	}
	u := make([]float32, 16*WinogradFilterStride(c, c))
	c0 := cpuNS()
	for range b.N {
		WinogradFilters(u, w, c, c, 0, c)
	}
	b.ReportMetric((cpuNS()-c0)/float64(b.N)/float64(c*c), "cpu-ns/filter")
}
