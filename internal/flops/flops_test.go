package flops

import (
	"math"
	"runtime"
	"testing"
	"time"
)

func TestPeakMeasures(t *testing.T) {
	// A small product, timed briefly: the figure is a positive, finite
	// rate (its size depends on the machine and is not asserted).
	if f := measure(96, time.Millisecond, 2); !(f > 0) || math.IsInf(f, 0) {
		t.Errorf("measured %v FLOP/s", f)
	}
}

func TestPeakCached(t *testing.T) {
	calls := 0
	saved := measurePeak
	peak.Lock()
	savedCache := peak.flops
	peak.flops = nil
	peak.Unlock()
	defer func() {
		measurePeak = saved
		peak.Lock()
		peak.flops = savedCache
		peak.Unlock()
	}()
	measurePeak = func(d time.Duration) float64 {
		if d != PeakRun {
			t.Errorf("measured for %v, want %v", d, PeakRun)
		}
		calls++
		return float64(1000 * calls)
	}
	procs := runtime.GOMAXPROCS(0)
	if a, b := Peak(), Peak(); a != 1000 || b != 1000 || calls != 1 {
		t.Errorf("Peak twice: %v, %v after %d measurements, want 1000, 1000 after 1", a, b, calls)
	}
	// Another thread count is another machine as far as products go.
	runtime.GOMAXPROCS(procs + 1)
	defer runtime.GOMAXPROCS(procs)
	if a := Peak(); a != 2000 || calls != 2 {
		t.Errorf("Peak at GOMAXPROCS %d: %v after %d measurements, want 2000 after 2", procs+1, a, calls)
	}
}

func TestResNetFLOPs(t *testing.T) {
	// He et al. 2016, Table 1: multiply-adds per 224² image (their figures
	// include the 1000-way classifier, 2 M, beside 1.8–11.3 G).
	for _, tc := range []struct {
		name       string
		bottleneck bool
		layers     [4]int
		lo, hi     float64 // MACs
	}{
		{"ResNet-18", false, [4]int{2, 2, 2, 2}, 1.79e9, 1.85e9},
		{"ResNet-34", false, [4]int{3, 4, 6, 3}, 3.6e9, 3.7e9},
		{"ResNet-50", true, [4]int{3, 4, 6, 3}, 4.0e9, 4.2e9},
		{"ResNet-101", true, [4]int{3, 4, 23, 3}, 7.7e9, 7.9e9},
		{"ResNet-152", true, [4]int{3, 8, 36, 3}, 11.4e9, 11.6e9},
	} {
		fwd := ResNet(tc.bottleneck, tc.layers, 224, 224, false)
		if macs := fwd / 2; macs < tc.lo || macs > tc.hi {
			t.Errorf("%s: %.4g MACs, want [%.3g, %.3g]", tc.name, macs, tc.lo, tc.hi)
		}
		// Training: three forwards less the stem's input gradient, a
		// 7×7 3→64 convolution at 112²: 2·64·3·49·112² FLOPs.
		const stem = 2 * 64 * 3 * 49 * 112 * 112
		if got, want := ResNet(tc.bottleneck, tc.layers, 224, 224, true), 3*fwd-stem; got != want {
			t.Errorf("%s training: %.6g FLOPs, want %.6g", tc.name, got, want)
		}
	}
}
