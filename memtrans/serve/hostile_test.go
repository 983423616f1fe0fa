package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hostile-load suite: attacks a client can make on the service over
// loopback, each against an in-process server, checking that normal
// requests keep being answered, that memory stays within the budget and
// that a shutdown ends within its grace. Every test ends in seconds.

// stall opens a connection that sends a report request's headers,
// declaring a body of declared bytes, and the first bytes of a PNG view,
// then goes silent. The connection is closed when the test ends.
func stall(t testing.TB, addr string, declared int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n", declared)
	fmt.Fprintf(c, "--B\r\nContent-Disposition: form-data; name=\"view\"; filename=\"0.png\"\r\n\r\n\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	return c
}

// TestStalledUploadsKeepCapacity: 64 connections each send 150 bytes of a
// 10 MB upload and go silent. They hold no place in the queue: a normal
// request is answered 200, and /readyz says the service takes reports.
func TestStalledUploadsKeepCapacity(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t, WithQueue(DefaultQueue), WithUploadTimeout(time.Minute))
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server(t, h)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for range 64 {
		stall(t, addr, 10<<20)
	}
	waitFor(func() bool { return h.m.uploads.Load() == 64 })
	before := time.Now()
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0])...)
	if resp.StatusCode != 200 {
		t.Fatalf("a normal request beside 64 stalled uploads: %d %s", resp.StatusCode, b)
	}
	t.Logf("a normal request beside 64 stalled uploads: 200 in %v", time.Since(before).Round(time.Millisecond))
	r, err := srv.Client().Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("/readyz beside 64 stalled uploads: %d", r.StatusCode)
	}
	if q := metricValue(t, h, "radgen_queue_length"); q != 0 {
		t.Errorf("stalled uploads in the queue: %v", q)
	}
}

// TestUploadTimeout: a stalled upload gets 408 upload_timeout at its own
// deadline, and counts as such.
func TestUploadTimeout(t *testing.T) {
	h := newHandler(t, WithUploadTimeout(100*time.Millisecond))
	srv := server(t, h)
	c := stall(t, strings.TrimPrefix(srv.URL, "http://"), 1<<20)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || decodeError(t, b).Error.Code != CodeUploadTimeout {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if n := metricValue(t, h, `radgen_requests_total{route="/v1/reports",outcome="upload_timeout"}`); n != 1 {
		t.Errorf("upload_timeout count %v", n)
	}
}

// TestDeclaredTooLarge: a declared Content-Length over the limit gets 413
// before a byte of the body is sent.
func TestDeclaredTooLarge(t *testing.T) {
	srv := server(t, newHandler(t))
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: %d\r\n\r\n", 1<<30)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || decodeError(t, b).Error.Code != CodeUploadTooLarge || !resp.Close {
		t.Errorf("%d (close %v) %s", resp.StatusCode, resp.Close, b)
	}
}

// TestDisconnectMidUpload: a client that goes away during its upload is
// counted as canceled, not as a bad request.
func TestDisconnectMidUpload(t *testing.T) {
	h := newHandler(t)
	srv := server(t, h)
	c := stall(t, strings.TrimPrefix(srv.URL, "http://"), 1<<20)
	waitFor(func() bool { return h.m.uploads.Load() == 1 })
	c.Close()
	waitFor(func() bool {
		var b strings.Builder
		h.m.write(&b)
		return strings.Contains(b.String(), `outcome="canceled"`)
	})
	if n := metricValue(t, h, `radgen_requests_total{route="/v1/reports",outcome="canceled"}`); n != 1 {
		t.Errorf("canceled count %v", n)
	}
	var b strings.Builder
	h.m.write(&b)
	if strings.Contains(b.String(), `outcome="bad_request"`) {
		t.Errorf("a disconnect counted as a bad request:\n%s", b.String())
	}
}

// TestManyParts: an upload of many fields or many files is refused as it
// arrives, before any view is decoded.
func TestManyParts(t *testing.T) {
	f := tinyFixture(t)
	srv := server(t, newHandler(t))
	var fields []string
	for i := range 1000 {
		fields = append(fields, "beam_size", strconv.Itoa(1+i%3))
	}
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0], fields...)...)
	if resp.StatusCode != 400 || decodeError(t, b).Error.Code != CodeBadRequest {
		t.Errorf("1000 fields: %d %s", resp.StatusCode, b)
	}
	var parts []part
	for range 100 {
		parts = append(parts, studyParts(f.studies[0])...)
	}
	resp, b = post(t, srv.Client(), srv.URL+"/v1/reports", nil, parts...)
	if resp.StatusCode != 413 || decodeError(t, b).Error.Code != CodeTooManyViews {
		t.Errorf("200 files: %d %s", resp.StatusCode, b)
	}
}

// bigPNG encodes a side×side 16-bit RGBA PNG (a smooth gradient: small
// to send, side²·8 bytes to decode).
func bigPNG(t testing.TB, side int) []byte {
	img := image.NewRGBA64(image.Rect(0, 0, side, side))
	for y := range side {
		v := uint16(y * 65535 / side)
		for x := range side {
			img.SetRGBA64(x, y, color.RGBA64{v, v, v, 0xffff})
		}
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rss returns the process's resident set (VmRSS) and its high-water mark
// (VmHWM), in bytes; ok is false where /proc cannot tell.
func rss() (now, peak int64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			now = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return now, peak, now > 0 && peak > 0
}

// TestLargeImagesWithinBudget: eight clients each upload two views of
// 16-bit RGBA PNG (side² pixels, side²·8 bytes to decode) at once, with a
// budget that holds a few of them. Every request ends in 200 or 429 with
// Retry-After; the reservations never exceed the budget, and the
// process's resident high-water mark (VmHWM, reset first) stays within
// its resident size before (the model included) plus the budget and 16 MiB
// for the runtime's own structures. Normal requests sent
// meanwhile are all answered 200.
//
// The acceptance figures (4096² views, a 1 GiB budget) take minutes of
// decoding on two cores: RADGEN_HOSTILE_SIDE=4096 RADGEN_HOSTILE_BUDGET=1073741824.
func TestLargeImagesWithinBudget(t *testing.T) {
	side, budget := 2048, int64(160<<20)
	if testing.Short() || raceEnabled {
		side, budget = 512, 48<<20
	}
	if v, err := strconv.Atoi(os.Getenv("RADGEN_HOSTILE_SIDE")); err == nil && v > 0 {
		side = v
	}
	if v, err := strconv.ParseInt(os.Getenv("RADGEN_HOSTILE_BUDGET"), 10, 64); err == nil && v > 0 {
		budget = v
	}
	f := tinyFixture(t)
	film := bigPNG(t, side)
	h := newHandler(t, WithMemoryBudget(budget), WithTimeout(5*time.Minute))
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server(t, h)
	// The clients' bodies are built first: they are the test's memory,
	// not the server's.
	type body struct {
		b  []byte
		ct string
	}
	bodies := make([]body, 8)
	for i := range bodies {
		b, ct := multipartBody(t, part{field: "view", name: "0.png", body: film}, part{field: "view", name: "1.png", body: film})
		bodies[i] = body{b.Bytes(), ct}
	}

	// The peak from here on: reset the high-water mark (Linux), and have
	// the collector hold the heap near what the test allows.
	before, _, haveRSS := rss()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		haveRSS = false
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(before + budget))

	stop := make(chan struct{})
	var normal sync.WaitGroup
	normalCodes := map[int]int{}
	var mu sync.Mutex
	normal.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, _ := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[i%len(f.studies)])...)
			mu.Lock()
			normalCodes[resp.StatusCode]++
			mu.Unlock()
		}
	})

	clients := 8
	if raceEnabled {
		clients = 4 // the race detector's instrumentation makes decoding slow
	}
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			resp, err := srv.Client().Post(srv.URL+"/v1/reports", bodies[i].ct, bytes.NewReader(bodies[i].b))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After: %s", b)
			}
			if resp.StatusCode != 200 && resp.StatusCode != 429 && resp.StatusCode != 503 {
				t.Errorf("large upload %d: %d %s", i, resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	close(stop)
	normal.Wait()
	_, peak, _ := rss()

	reservedPeak := h.mem.peak.Load()
	t.Logf("%d KB a view: %d² 16-bit RGBA, budget %d MiB: answers %v; reserved at most %d MiB; RSS before %d MiB, peak %d MiB; normal requests meanwhile: %v",
		len(film)>>10, side, budget>>20, codes, reservedPeak>>20, before>>20, peak>>20, normalCodes)
	if reservedPeak > budget {
		t.Errorf("reserved %d bytes, over the budget of %d", reservedPeak, budget)
	}
	if normalCodes[200] == 0 || len(normalCodes) != 1 {
		t.Errorf("normal requests during the large uploads: %v", normalCodes)
	}
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	if ok == 0 {
		t.Errorf("no large upload was served: %v", codes)
	}
	if !haveRSS || raceEnabled {
		t.Log("no resident-memory check (no /proc, or the race detector's shadow memory)")
		return
	}
	// The budget bounds what requests hold; the runtime's own structures
	// (stacks, collector metadata, connection buffers) get a fixed 16 MiB.
	const runtimeSlack = 16 << 20
	if peak > before+budget+runtimeSlack {
		t.Errorf("resident high-water mark %d MiB, over %d MiB before plus the %d MiB budget (and 16 MiB)", peak>>20, before>>20, budget>>20)
	}
}

// TestTimeoutEndsDecoding: a request whose deadline passes while its
// large view decodes is answered 504 at once; the decoding finishes apart.
func TestTimeoutEndsDecoding(t *testing.T) {
	side := 2048
	if testing.Short() || raceEnabled {
		side = 1024
	}
	film := bigPNG(t, side)
	h := newHandler(t, WithTimeout(50*time.Millisecond))
	srv := server(t, h)
	before := time.Now()
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, part{field: "view", name: "0.png", body: film}, part{field: "view", name: "1.png", body: film})
	if resp.StatusCode != 504 || decodeError(t, b).Error.Code != CodeTimeout {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	t.Logf("504 after %v with a 50 ms timeout, views of %d² decoding", time.Since(before).Round(time.Millisecond), side)
}

// TestShutdownCutsUploads: a server's Shutdown, with Drain registered,
// cuts a stalled upload at once (503) and lets the generation in flight
// finish (200); Shutdown returns within its grace.
func TestShutdownCutsUploads(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t, WithUploadTimeout(10*time.Minute), WithTimeout(10*time.Minute))
	g := newGate(h)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.RegisterOnShutdown(h.Drain)
	srv.Start()
	defer h.Close()
	defer srv.Close()

	inFlight := make(chan int, 1)
	go func() {
		resp, _ := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0])...)
		inFlight <- resp.StatusCode
	}()
	<-g.entered
	c := stall(t, strings.TrimPrefix(srv.URL, "http://"), 10<<20)
	waitFor(func() bool { return h.m.uploads.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Config.Shutdown(ctx) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || decodeError(t, b).Error.Code != CodeUnavailable {
		t.Errorf("the stalled upload at shutdown: %d %s", resp.StatusCode, b)
	}
	if r, err := http.Get(srv.URL + "/readyz"); err == nil {
		r.Body.Close()
		if r.StatusCode == 200 {
			t.Error("/readyz 200 while draining")
		}
	}
	close(g.open)
	if code := <-inFlight; code != 200 {
		t.Errorf("the generation in flight: %d", code)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
