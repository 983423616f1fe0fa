package main

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

var (
	benchOnce sync.Once
	benchFix  *fixture
	benchErr  error
)

// benchStudies is the size of the throughput benchmark's archive.
const benchStudies = 200

// BenchmarkGenerate measures generate on Prism against the baseline
// examples/cli generate -manifest, measured in the same iteration on the
// same 200 synthetic studies and model, both with every core
// (GOMAXPROCS); both times include starting up and loading the model.
// ratio is the pipeline's studies/s over the cli's.
func BenchmarkGenerate(b *testing.B) {
	benchOnce.Do(func() { benchFix, benchErr = newFixture(benchStudies, 8) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	f := benchFix
	cli, _ := f.commands(b)
	var cliTime, beamTime time.Duration
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		start := time.Now()
		if out, err := exec.Command(cli, "generate", "-model", f.model, "-manifest", f.good, "-o", filepath.Join(dir, "cli.json")).CombinedOutput(); err != nil {
			b.Fatalf("cli: %v\n%s", err, out)
		}
		cliTime += time.Since(start)
		start = time.Now()
		counts := runPipeline(b, func(s beam.Scope) {
			buildGenerate(s, GenerateConfig{Manifest: f.good, Model: f.model, Out: filepath.Join(dir, "beam"), Beam: 3, Batch: 16, Shards: 1})
		})
		beamTime += time.Since(start)
		if counts["studies_done"] != benchStudies {
			b.Fatalf("counters %v", counts)
		}
	}
	n := float64(b.N * benchStudies)
	b.ReportMetric(n/cliTime.Seconds(), "cli_studies/s")
	b.ReportMetric(n/beamTime.Seconds(), "prism_studies/s")
	b.ReportMetric(cliTime.Seconds()/beamTime.Seconds(), "ratio")
}
