package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

var (
	benchMu   sync.Mutex
	benchFixs = map[int]*fixture{}
)

// benchStudies is the size of the throughput benchmark's archive.
const benchStudies = 200

// BenchmarkGenerate measures generate on Prism against the baseline
// examples/radgen generate -manifest, measured in the same iteration on the
// same 200 synthetic studies and model, both with every core
// (GOMAXPROCS); both times include starting up and loading the model.
// ratio is the pipeline's studies/s over radgen's. film=N is the film
// and model input size (N×N): the tiny model at 64 costs a few ms a study,
// so the job's fixed cost (starting Prism, its stages, the shards) weighs
// most there.
func BenchmarkGenerate(b *testing.B) {
	for _, size := range []int{64, 128} {
		b.Run(fmt.Sprintf("film=%d", size), func(b *testing.B) { benchGenerate(b, size) })
	}
}

func benchGenerate(b *testing.B, size int) {
	benchMu.Lock()
	f, ok := benchFixs[size]
	if !ok {
		var err error
		if f, err = newFixture(benchStudies, 8, size); err != nil {
			benchMu.Unlock()
			b.Fatal(err)
		}
		benchFixs[size] = f
	}
	benchMu.Unlock()
	defer func() {
		benchMu.Lock()
		delete(benchFixs, size)
		benchMu.Unlock()
		os.RemoveAll(f.dir)
	}()
	cli, _ := f.commands(b)
	var cliTime, beamTime time.Duration
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		runCLI := func() {
			start := time.Now()
			if out, err := exec.Command(cli, "generate", "-model", f.model, "-manifest", f.good, "-o", filepath.Join(dir, "cli.json")).CombinedOutput(); err != nil {
				b.Fatalf("radgen: %v\n%s", err, out)
			}
			cliTime += time.Since(start)
		}
		runBeam := func() {
			start := time.Now()
			counts := runPipeline(b, func(s beam.Scope) {
				buildGenerate(s, GenerateConfig{Manifest: f.good, Model: f.model, Out: filepath.Join(dir, "beam"), Beam: 3, Batch: 16, Shards: 1})
			})
			beamTime += time.Since(start)
			if n := len(readReports(b, filepath.Join(dir, "beam", "reports-*.jsonl"))); n != benchStudies {
				b.Fatalf("%d reports (counters %v)", n, counts)
			}
			if counts["studies_done"] != benchStudies {
				b.Logf("counters %v", counts)
			}
		}
		// Alternate the order, so that neither side always runs second on
		// a warmer (or busier) machine.
		if i%2 == 0 {
			runCLI()
			runBeam()
		} else {
			runBeam()
			runCLI()
		}
	}
	n := float64(b.N * benchStudies)
	b.ReportMetric(n/cliTime.Seconds(), "cli_studies/s")
	b.ReportMetric(n/beamTime.Seconds(), "prism_studies/s")
	b.ReportMetric(cliTime.Seconds()/beamTime.Seconds(), "ratio")
}
