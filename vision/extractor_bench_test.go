package vision

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/flops"
	"github.com/radgen/radgen/internal/testdevice"
)

// resnetFLOPs is flops.ResNet of configuration c: the convolutions' FLOPs
// on one h×w image, forward or (train) forward and backward.
func resnetFLOPs(c ResNetConfig, h, w int, train bool) float64 {
	return flops.ResNet(c.Block == Bottleneck, c.Layers, h, w, train)
}

// convFLOPs returns 2·MACs of the convolutions of r on an h×w image, read
// from the layers' weights: the check of resnetFLOPs, which counts from the
// configuration.
func convFLOPs(r *ResNet, h, w int) float64 {
	var total float64
	conv := func(c *ConvBN, h, w int) (int, int) {
		k := c.Weight.Dim(2)
		p := k / 2
		ho, wo := (h+2*p-k)/c.Stride+1, (w+2*p-k)/c.Stride+1
		total += 2 * float64(c.Weight.Len()) * float64(ho*wo)
		return ho, wo
	}
	h, w = conv(r.Stem, h, w)
	h, w = (h-1)/2+1, (w-1)/2+1 // max pool 3, stride 2, padding 1
	for _, blocks := range r.Layers {
		for _, b := range blocks {
			bh, bw := h, w
			for _, c := range []*ConvBN{b.Conv1, b.Conv2, b.Conv3} {
				if c != nil {
					bh, bw = conv(c, bh, bw)
				}
			}
			if b.Downsample != nil {
				conv(b.Downsample, h, w)
			}
			h, w = bh, bw
		}
	}
	return total
}

// BenchmarkExtractor runs R2Gen's extractor, ResNet-101 with random
// weights, on one IU X-Ray study: two 224² views (a NoGrad forward, which
// the CPU engine runs with batch norm folded), on the device of RADGEN_DEVICE (the CPU by default; the
// weights and the study are moved there before the timer starts). It
// reports images/s, the convolutions' GFLOP/step (nominal: the Winograd
// path does fewer multiplications) and GFLOP/s, and peak-frac, their rate
// over the machine's measured GEMM peak (see internal/flops).
func BenchmarkExtractor(b *testing.B) {
	dev := testdevice.Benched(b)
	ext, err := NewExtractor(ResNet101, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	if err := radgen.ToDevice(ext, dev); err != nil {
		b.Fatal(err)
	}
	study := randImages(2, 1, 2, 3, 224, 224).To(dev)
	ctx := context.Background()
	if _, _, err := ext.Extract(ctx, study); err != nil { // weights prepared once
		b.Fatal(err)
	}
	work := 2 * resnetFLOPs(ResNet101, 224, 224, false)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, _, err := ext.Extract(ctx, study); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPU() - cpu0
	sec := b.Elapsed().Seconds()
	b.ReportMetric(2*float64(b.N)/sec, "images/s")
	// The CPU time of the process: on cores shared with other work, its
	// ratio between two versions is steadier than that of the wall time.
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
	flops.Report(b, work, dev)
}

// BenchmarkExtractorTrain is one training step's forward and backward
// through a ResNet-101 extractor with batch statistics (two studies of two
// 224² views) on the device of RADGEN_DEVICE (the CPU by default; the
// weights and the images are moved there before the timer starts). It
// reports images/s, GFLOP/step (forward and backward, see
// internal/flops), GFLOP/s and peak-frac.
func BenchmarkExtractorTrain(b *testing.B) {
	if testing.Short() {
		b.Skip("slow")
	}
	dev := testdevice.Benched(b)
	ext, err := NewExtractor(ResNet101, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	if err := radgen.ToDevice(ext, dev); err != nil {
		b.Fatal(err)
	}
	study := randImages(2, 2, 2, 3, 224, 224).To(dev)
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		g := radgen.NewGraph(radgen.Train(uint64(b.N)))
		p, a := ext.Forward(g, study)
		if err := g.Backward(g.Add(g.Sum(p), g.Sum(a))); err != nil {
			b.Fatal(err)
		}
		for _, n := range radgen.Trainable(ext) {
			n.Tensor.ZeroGrad()
		}
	}
	// The CPU time of the process, as BenchmarkExtractor reports it.
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
	b.ReportMetric(4*float64(b.N)/b.Elapsed().Seconds(), "images/s")
	flops.Report(b, 4*resnetFLOPs(ResNet101, 224, 224, true), dev)
}

func TestConvFLOPs(t *testing.T) {
	// ResNet-50 is about 4.1 GMACs per 224² image (convolutions only).
	r, err := newResNet(ResNet50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := convFLOPs(r, 224, 224) / 2; got < 4.0e9 || got > 4.2e9 {
		t.Errorf("ResNet-50: %.3g MACs", got)
	}
	// The benchmarks count from the configuration: the same figure as the
	// layers' weights give, for both kinds of block, at the benchmarks' size
	// and at odd ones (rounding of the strided layers).
	for _, c := range []ResNetConfig{ResNet18, ResNet50, ResNet101, {BasicBlock, [4]int{1, 1, 1, 1}}} {
		r, err := newResNet(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, hw := range [][2]int{{224, 224}, {97, 131}, {64, 64}} {
			if got, want := resnetFLOPs(c, hw[0], hw[1], false), convFLOPs(r, hw[0], hw[1]); got != want {
				t.Errorf("%v at %d×%d: counted %.6g FLOPs from the configuration, %.6g from the weights", c, hw[0], hw[1], got, want)
			}
		}
	}
}
