package flops

import (
	"testing"

	"github.com/radgen/radgen"
)

// ResNet returns the FLOPs of the convolutions of a torchvision ResNet (v1.5,
// the stride on the 3×3 convolution of a bottleneck) on one h×w image:
// bottleneck or basic blocks, layers[s] of them in stage s. With train it
// is a training step's forward and backward, 3·forward less the stem's input
// gradient, which an image does not need.
func ResNet(bottleneck bool, layers [4]int, h, w int, train bool) float64 {
	var total, stem float64
	conv := func(cin, cout, k, stride, h, w int) (int, int) {
		p := k / 2
		ho, wo := (h+2*p-k)/stride+1, (w+2*p-k)/stride+1
		total += 2 * float64(cout*cin*k*k) * float64(ho*wo)
		return ho, wo
	}
	h, w = conv(3, 64, 7, 2, h, w)
	stem = total
	h, w = (h-1)/2+1, (w-1)/2+1 // max pool 3, stride 2, padding 1
	expansion := 1
	if bottleneck {
		expansion = 4
	}
	in := 64
	for s, n := range layers {
		width := 64 << s
		out := width * expansion
		for i := range n {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			var bh, bw int
			if bottleneck {
				bh, bw = conv(in, width, 1, 1, h, w)
				bh, bw = conv(width, width, 3, stride, bh, bw)
				conv(width, out, 1, 1, bh, bw)
			} else {
				bh, bw = conv(in, width, 3, stride, h, w)
				conv(width, out, 3, 1, bh, bw)
			}
			if stride != 1 || in != out {
				conv(in, out, 1, stride, h, w) // downsample
			}
			in, h, w = out, bh, bw
		}
	}
	if train {
		return 3*total - stem
	}
	return total
}

// Report adds a step's work to b's results after its timed loop: GFLOP/step
// (perStep/1e9), GFLOP/s and, when dev runs on this machine's cores (the CPU
// or the reference engine), peak-frac, the achieved FLOP/s over [Peak]. It
// stops b's timer first, so that a first measurement of the peak is not
// timed.
func Report(b *testing.B, perStep float64, dev radgen.Device) {
	b.StopTimer()
	rate := perStep * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perStep/1e9, "GFLOP/step")
	b.ReportMetric(rate/1e9, "GFLOP/s")
	if dev == radgen.CPU || dev == radgen.Reference() {
		b.ReportMetric(rate/Peak(), "peak-frac")
	}
}
