package flops

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/radgen/radgen/internal/f32"
)

// The measurement's constants: a square product big enough that packing and
// the threads' start are small beside it, timed for at least PeakRun, best
// of peakRuns.
const (
	peakSize = 2048
	peakRuns = 5
	// PeakRun is how long Peak times each of its runs.
	PeakRun = 200 * time.Millisecond
)

// MeasurePeak measures the machine's float32 GEMM speed in FLOP/s: the best
// of five runs, each repeating a 2048×2048×2048 product (f32.Gemm, on
// GOMAXPROCS goroutines) for at least d after a warm-up product. It takes
// about 5·d, more when a single product outlasts d.
func MeasurePeak(d time.Duration) float64 {
	return measure(peakSize, d, peakRuns)
}

// measure is MeasurePeak of n×n×n products, best of runs.
func measure(n int, d time.Duration, runs int) float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	product := func() { f32.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n) }
	product() // packing buffers and helper goroutines
	work := 2 * float64(n) * float64(n) * float64(n)
	best := 0.0
	for range runs {
		start := time.Now()
		done := 0
		for {
			product()
			done++
			if el := time.Since(start); el >= d {
				best = max(best, work*float64(done)/el.Seconds())
				break
			}
		}
	}
	runtime.KeepAlive(c)
	return best
}

// measurePeak is Peak's measurement (a variable for the tests).
var measurePeak = MeasurePeak

// peak caches Peak's measurement per GOMAXPROCS setting.
var peak struct {
	sync.Mutex
	flops map[int]float64
}

// Peak returns the machine's float32 GEMM peak in FLOP/s for the current
// GOMAXPROCS: MeasurePeak(PeakRun) the first time in the process, the same
// figure afterwards. Call it outside a benchmark's timed region.
func Peak() float64 {
	procs := runtime.GOMAXPROCS(0)
	peak.Lock()
	defer peak.Unlock()
	if f, ok := peak.flops[procs]; ok {
		return f
	}
	f := measurePeak(PeakRun)
	if peak.flops == nil {
		peak.flops = map[int]float64{}
	}
	peak.flops[procs] = f
	return f
}
