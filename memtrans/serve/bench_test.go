package serve

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// loadDuration is how long each load benchmark runs: -load-duration, or
// $RADGEN_LOAD_DURATION, or 3 s so that CI stays short. The acceptance run
// uses 30 s.
var loadDuration = flag.Duration("load-duration", envDuration("RADGEN_LOAD_DURATION", 3*time.Second), "duration of each load benchmark")

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// loadModelName selects the benchmarks' model: "tiny" (the tests' model,
// the default) or "iu-decoder" (the tiny extractor with R2Gen's IU X-Ray
// encoder–decoder: d_model 512, 3 layers, 8 heads, random weights), set
// by -load-model or $RADGEN_LOAD_MODEL.
var loadModelName = flag.String("load-model", cmp.Or(os.Getenv("RADGEN_LOAD_MODEL"), "tiny"), "model of the load benchmarks: tiny or iu-decoder")

var (
	iuOnce  sync.Once
	iuModel *memtrans.Model
	iuErr   error
)

// benchModel returns the model -load-model names.
func benchModel(b *testing.B) *memtrans.Model {
	f := tinyFixture(b)
	switch *loadModelName {
	case "tiny":
		return f.model
	case "iu-decoder":
		iuOnce.Do(func() {
			cfg := f.model.Config()
			iu := memtrans.R2GenIUXray(cfg.EncoderDecoder.Dims().Words).EncoderDecoder.(r2gen.Config)
			iu.DVisual = cfg.EncoderDecoder.Dims().VisualWidth
			cfg.EncoderDecoder = iu
			iuModel, iuErr = memtrans.New(cfg, f.model.Tokenizer(), 5)
		})
		if iuErr != nil {
			b.Fatal(iuErr)
		}
		return iuModel
	}
	b.Fatalf("-load-model %q: want tiny or iu-decoder", *loadModelName)
	return nil
}

func benchHandler(b *testing.B, opts ...Option) *Handler {
	h, err := New(benchModel(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// loadStats is what a load run measured.
type loadStats struct {
	ok, rejected, failed int
	latency              []time.Duration // of the 200 answers
	rejectLatency        []time.Duration // of the 429 answers
	elapsed, cpu         time.Duration
	heapBefore           uint64   // live heap before the run
	heap                 []uint64 // live heap sampled during the run
	meanBatch            float64
	firstFailure         string
}

// load runs clients goroutines that post the fixture's studies over
// loopback, one request after another, for d.
func load(b *testing.B, h *Handler, clients int, d time.Duration) loadStats {
	f := tinyFixture(b)
	srv := server(b, h)
	bodies := make([][]byte, len(f.studies))
	cts := make([]string, len(f.studies)) // each body has its own boundary
	for i, s := range f.studies {
		var body *bytes.Buffer
		body, cts[i] = multipartBody(b, studyParts(s)...)
		bodies[i] = body.Bytes()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients, DisableCompression: true}}
	defer client.CloseIdleConnections()
	if err := h.WarmUp(b.Context()); err != nil {
		b.Fatal(err)
	}
	// One round first, so that every buffer is sized before the heap is read.
	for i, body := range bodies[:2] {
		resp, err := client.Post(srv.URL+"/v1/reports", cts[i], bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var st loadStats
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	st.heapBefore = ms.HeapAlloc
	// The live heap (after a collection) six times during the run: the
	// first sample is taken once the run is under way, the last at its end.
	stop := make(chan struct{})
	sampled := make(chan []uint64)
	go func() {
		var heap []uint64
		t := time.NewTicker(d / 6)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap = append(heap, ms.HeapAlloc)
			case <-stop:
				sampled <- heap
				return
			}
		}
	}()

	var mu sync.Mutex
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			var lat, rej []time.Duration
			ok, rejected, failed := 0, 0, 0
			first := ""
			for i := c; time.Now().Before(deadline); i += clients {
				t0 := time.Now()
				resp, err := client.Post(srv.URL+"/v1/reports", cts[i%len(bodies)], bytes.NewReader(bodies[i%len(bodies)]))
				if err != nil {
					failed++
					first = err.Error()
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				el := time.Since(t0)
				switch {
				case err == nil && resp.StatusCode == 200:
					ok++
					lat = append(lat, el)
				case err == nil && resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "":
					rejected++
					rej = append(rej, el)
					// A well-behaved client backs off; here it retries at
					// once, so that the queue stays full.
				default:
					failed++
					first = fmt.Sprintf("status %d, %v", resp.StatusCode, err)
				}
			}
			mu.Lock()
			st.ok, st.rejected, st.failed = st.ok+ok, st.rejected+rejected, st.failed+failed
			st.latency, st.rejectLatency = append(st.latency, lat...), append(st.rejectLatency, rej...)
			if first != "" {
				st.firstFailure = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	st.elapsed, st.cpu = time.Since(start), cpuTime()-cpu0
	close(stop)
	st.heap = <-sampled
	h.m.mu.Lock()
	if h.m.batches.n > 0 {
		st.meanBatch = h.m.batches.sum / float64(h.m.batches.n)
	}
	h.m.mu.Unlock()
	return st
}

// cpuTime returns the CPU time the process has used (user and system):
// unlike wall time, it hardly moves with what else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (st loadStats) report(b *testing.B) {
	mb := func(n uint64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(st.ok)/st.elapsed.Seconds(), "reports/s")
	if st.ok > 0 {
		b.ReportMetric(float64(st.cpu.Microseconds())/1000/float64(st.ok), "cpu-ms/report")
	}
	b.ReportMetric(float64(percentile(st.latency, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(st.latency, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(st.ok), "ok")
	b.ReportMetric(float64(st.failed), "errors")
	b.ReportMetric(st.meanBatch, "studies/batch")
	b.ReportMetric(mb(st.heapBefore), "heap-before-MB")
	if len(st.heap) > 0 {
		b.ReportMetric(mb(st.heap[0]), "heap-first-MB")
		b.ReportMetric(mb(st.heap[len(st.heap)-1]), "heap-last-MB")
		b.ReportMetric(mb(slices.Max(st.heap)), "heap-max-MB")
	}
	if st.rejected > 0 || st.rejectLatency != nil {
		b.ReportMetric(float64(st.rejected), "429s")
		b.ReportMetric(float64(percentile(st.rejectLatency, 0.50).Microseconds())/1000, "429-p50-ms")
		b.ReportMetric(float64(percentile(st.rejectLatency, 0.99).Microseconds())/1000, "429-p99-ms")
		b.ReportMetric(float64(slices.Max(st.rejectLatency).Microseconds())/1000, "429-max-ms")
	}
}

// BenchmarkLoad runs 16 clients against the handler over loopback on the
// tiny model, batched and with one study per Generate call, for
// -load-duration each. Every request must succeed.
//
//	go test ./memtrans/serve -run '^$' -bench Load -benchtime 1x -load-duration 30s [-load-model iu-decoder]
func BenchmarkLoad(b *testing.B) {
	const clients = 16
	for _, mode := range []struct {
		name string
		opts []Option
	}{
		{"batched", []Option{WithQueue(64), WithBatching(16, DefaultBatchWait)}},
		{"unbatched", []Option{WithQueue(64), WithoutBatching()}},
	} {
		b.Run(fmt.Sprintf("%s/clients=%d", mode.name, clients), func(b *testing.B) {
			for b.Loop() {
				st := load(b, benchHandler(b, mode.opts...), clients, *loadDuration)
				if st.failed > 0 || st.rejected > 0 || st.ok == 0 {
					b.Fatalf("%d ok, %d rejected, %d failed (%s)", st.ok, st.rejected, st.failed, st.firstFailure)
				}
				st.report(b)
			}
		})
	}
}

// BenchmarkOverload runs 16 clients against a queue of 8: the excess is
// refused with 429 and Retry-After at once, the admitted requests succeed.
func BenchmarkOverload(b *testing.B) {
	const clients, queue = 16, 8
	b.Run(fmt.Sprintf("clients=%d/queue=%d", clients, queue), func(b *testing.B) {
		for b.Loop() {
			st := load(b, benchHandler(b, WithQueue(queue)), clients, *loadDuration)
			if st.failed > 0 || st.ok == 0 || st.rejected == 0 {
				b.Fatalf("%d ok, %d rejected, %d failed (%s)", st.ok, st.rejected, st.failed, st.firstFailure)
			}
			st.report(b)
		}
	})
}

// BenchmarkGenerateBatching is the load benchmarks' baseline without HTTP:
// the fixture's 16 studies in one Generate call against one call per study,
// per study.
func BenchmarkGenerateBatching(b *testing.B) {
	f := tinyFixture(b)
	m := benchModel(b)
	studies := make([]memtrans.Study, len(f.studies))
	for i, s := range f.studies {
		st, err := memtrans.StudyFromFiles(s.id, s.paths...)
		if err != nil {
			b.Fatal(err)
		}
		studies[i] = st
	}
	ctx := context.Background()
	b.Run(fmt.Sprintf("one-call/studies=%d", len(studies)), func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			if _, err := m.Generate(ctx, studies); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*len(studies)), "ms/study")
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N*len(studies)), "cpu-ms/study")
	})
	b.Run(fmt.Sprintf("call-per-study/studies=%d", len(studies)), func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			for i := range studies {
				if _, err := m.Generate(ctx, studies[i:i+1]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*len(studies)), "ms/study")
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N*len(studies)), "cpu-ms/study")
	})
}
