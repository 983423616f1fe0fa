package serve

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencyBuckets are the upper bounds, in seconds, of the report latency
// histogram.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// batchBuckets are the upper bounds of the batch size histogram.
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64}

// histogram is a Prometheus histogram: cumulative counts per bucket.
type histogram struct {
	bounds []float64
	counts []uint64 // len(bounds)+1, the last one is +Inf; not cumulative
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w io.Writer, name, labels string) {
	var cum uint64
	sep := ""
	if labels != "" {
		sep = ","
	}
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, formatFloat(b), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	if labels != "" {
		labels = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", name, labels, formatFloat(h.sum), name, labels, h.n)
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%g", v)
}

// metrics are the handler's counters, written in Prometheus's text format
// (version 0.0.4) by hand.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // (route, outcome code) → count
	latency  histogram            // seconds per answered report request
	batches  histogram            // studies per Generate call
	genTime  float64              // seconds spent in Generate

	pacs map[string]uint64 // SRs stored into the PACS (WithPACS), by outcome; nil without one

	memory   *memBudget   // the handler's
	uploads  atomic.Int64 // report requests whose body is being read
	inFlight atomic.Int64 // studies inside Model.Generate
	admitted atomic.Int64 // report requests admitted (queue length + in flight)
	ready    atomic.Bool
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, latency: newHistogram(latencyBuckets), batches: newHistogram(batchBuckets)}
}

func (m *metrics) request(route, outcome string, d time.Duration, isReport bool) {
	m.mu.Lock()
	m.requests[[2]string{route, outcome}]++
	if isReport && (outcome == "ok" || outcome == "partial") { // partial: a STOW-RS report with instances refused
		m.latency.observe(d.Seconds())
	}
	m.mu.Unlock()
}

// pacsOutcomes are the outcomes of storing an SR into the PACS: stored
// (the answer lists it as stored), refused (the answer lists it as
// failed), unconfirmed (a success status whose answer does not list it)
// and error (an error status, or no answer).
var pacsOutcomes = []string{"stored", "refused", "unconfirmed", "error"}

// pacsStore counts one store of an SR into the PACS.
func (m *metrics) pacsStore(outcome string) {
	m.mu.Lock()
	if m.pacs == nil {
		m.pacs = map[string]uint64{}
	}
	m.pacs[outcome]++
	m.mu.Unlock()
}

func (m *metrics) batch(n int, d time.Duration) {
	m.mu.Lock()
	m.batches.observe(float64(n))
	m.genTime += d.Seconds()
	m.mu.Unlock()
}

// write renders every metric. Label values are route patterns and error
// codes, which need no escaping.
func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString("# HELP radgen_requests_total HTTP requests answered, by route and outcome (\"ok\" or the error code: canceled for a client gone, not_found for a missing page file).\n# TYPE radgen_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "radgen_requests_total{route=%q,outcome=%q} %d\n", k[0], k[1], m.requests[k])
	}
	b.WriteString("# HELP radgen_report_duration_seconds Latency of successful report requests (STOW-RS: also those answered 202), upload to answer.\n# TYPE radgen_report_duration_seconds histogram\n")
	m.latency.write(&b, "radgen_report_duration_seconds", "")
	b.WriteString("# HELP radgen_batch_studies Studies per Model.Generate call.\n# TYPE radgen_batch_studies histogram\n")
	m.batches.write(&b, "radgen_batch_studies", "")
	b.WriteString("# HELP radgen_generate_seconds_total Time spent in Model.Generate.\n# TYPE radgen_generate_seconds_total counter\n")
	fmt.Fprintf(&b, "radgen_generate_seconds_total %s\n", formatFloat(m.genTime))
	if m.pacs != nil {
		b.WriteString("# HELP radgen_pacs_stores_total SRs of STOW-RS pushes stored into the PACS, by outcome: stored, refused (the PACS's answer lists the SR as failed), unconfirmed (a success status whose answer does not list the SR as stored), error.\n# TYPE radgen_pacs_stores_total counter\n")
		for _, o := range pacsOutcomes {
			fmt.Fprintf(&b, "radgen_pacs_stores_total{outcome=%q} %d\n", o, m.pacs[o])
		}
	}
	inFlight, admitted := m.inFlight.Load(), m.admitted.Load()
	b.WriteString("# HELP radgen_uploads Report requests whose body is being read.\n# TYPE radgen_uploads gauge\n")
	fmt.Fprintf(&b, "radgen_uploads %d\n", m.uploads.Load())
	b.WriteString("# HELP radgen_in_flight Studies being generated now.\n# TYPE radgen_in_flight gauge\n")
	fmt.Fprintf(&b, "radgen_in_flight %d\n", inFlight)
	b.WriteString("# HELP radgen_queue_length Report requests admitted and not yet being generated (reading, decoding or waiting).\n# TYPE radgen_queue_length gauge\n")
	fmt.Fprintf(&b, "radgen_queue_length %d\n", max(0, admitted-inFlight))
	if m.memory != nil {
		b.WriteString("# HELP radgen_memory_budget_bytes Bytes that report requests may hold at once.\n# TYPE radgen_memory_budget_bytes gauge\n")
		fmt.Fprintf(&b, "radgen_memory_budget_bytes %d\n", m.memory.total)
		b.WriteString("# HELP radgen_memory_reserved_bytes Bytes reserved by report requests now.\n# TYPE radgen_memory_reserved_bytes gauge\n")
		fmt.Fprintf(&b, "radgen_memory_reserved_bytes %d\n", m.memory.used.Load())
		b.WriteString("# HELP radgen_memory_reserved_peak_bytes The most bytes reserved at once since the start.\n# TYPE radgen_memory_reserved_peak_bytes gauge\n")
		fmt.Fprintf(&b, "radgen_memory_reserved_peak_bytes %d\n", m.memory.peak.Load())
	}
	b.WriteString("# HELP radgen_ready Whether the model is loaded and warmed up.\n# TYPE radgen_ready gauge\n")
	r := 0
	if m.ready.Load() {
		r = 1
	}
	fmt.Fprintf(&b, "radgen_ready %d\n", r)
	io.WriteString(w, b.String())
}
