package serve

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
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

// loadStats is what a load run measured.
type loadStats struct {
	ok, rejected, failed int
	latency              []time.Duration // of the 200 answers
	rejectLatency        []time.Duration // of the 429 answers
	elapsed              time.Duration
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
	start := time.Now()
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
	st.elapsed = time.Since(start)
	close(stop)
	st.heap = <-sampled
	h.m.mu.Lock()
	if h.m.batches.n > 0 {
		st.meanBatch = h.m.batches.sum / float64(h.m.batches.n)
	}
	h.m.mu.Unlock()
	return st
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
//	go test ./memtrans/serve -run '^$' -bench Load -benchtime 1x -load-duration 30s
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
				st := load(b, newHandler(b, mode.opts...), clients, *loadDuration)
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
			st := load(b, newHandler(b, WithQueue(queue)), clients, *loadDuration)
			if st.failed > 0 || st.ok == 0 || st.rejected == 0 {
				b.Fatalf("%d ok, %d rejected, %d failed (%s)", st.ok, st.rejected, st.failed, st.firstFailure)
			}
			st.report(b)
		}
	})
}
