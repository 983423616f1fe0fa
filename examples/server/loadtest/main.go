// Command loadtest measures a running report service (examples/server) the
// way the service's notes report it: for each number of clients, a run of
// -duration in which every client posts a study, waits for its answer and
// posts the next; then reports/s, the p50 and p99 latency of the 200
// answers, the other answers by status, and the server's resident memory
// (VmRSS of -pid) before the run, at its peak during it, and -after the
// last run. Run it on a quiet machine:
//
//	go build -o /tmp/radgen-server ./examples/server
//	/tmp/radgen-server -addr 127.0.0.1:8080 &    # the quickstart model, trained on first use
//	go run ./examples/server/loadtest -url http://127.0.0.1:8080 -pid $! -clients 16,64 -duration 30s -after 3m
//
// Without -files it posts synthetic studies (memtrans/data, 128² films, two
// views); with -files it posts those files as one study's views.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"io"
	"log"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/radgen/radgen/memtrans/data"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the service's base URL")
	pid := flag.Int("pid", 0, "the server's process id, for its resident memory (0: not measured)")
	clients := flag.String("clients", "16,64", "numbers of clients, one run each")
	duration := flag.Duration("duration", 30*time.Second, "length of each run")
	after := flag.Duration("after", 3*time.Minute, "how long after the last run the memory is read again")
	token := flag.String("token", os.Getenv("RADGEN_TOKEN"), "bearer token, if the service needs one")
	files := flag.String("files", "", "comma-separated view files of one study (default: synthetic studies)")
	beam := flag.Int("beam", 3, "beam_size of every request")
	flag.Parse()

	bodies, err := studies(*files, *beam)
	if err != nil {
		log.Fatal(err)
	}
	if err := waitReady(*url, time.Minute); err != nil {
		log.Fatal(err)
	}
	rssBefore := rss(*pid)
	fmt.Printf("server RSS before: %s\n", mb(rssBefore))
	fmt.Printf("%8s %10s %9s %9s %10s %s\n", "clients", "reports/s", "p50", "p99", "peak RSS", "answers")
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			log.Fatalf("-clients: %q", f)
		}
		r := run(*url, *token, bodies, n, *duration, *pid)
		fmt.Printf("%8d %10.1f %9s %9s %10s %v\n", n, float64(r.ok)/r.elapsed.Seconds(), pct(r.lat, 0.50), pct(r.lat, 0.99), mb(r.peak), r.codes)
	}
	if *pid > 0 && *after > 0 {
		fmt.Printf("waiting %v...\n", *after)
		time.Sleep(*after)
		fmt.Printf("server RSS %v after the last run: %s\n", *after, mb(rss(*pid)))
	}
}

// body is one request: a multipart body and its content type.
type body struct {
	b  []byte
	ct string
}

// studies builds the request bodies.
func studies(files string, beam int) ([]body, error) {
	var out []body
	add := func(views [][]byte, names []string) error {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for i, v := range views {
			f, err := w.CreateFormFile("view", names[i])
			if err != nil {
				return err
			}
			f.Write(v)
		}
		w.WriteField("beam_size", strconv.Itoa(beam))
		if err := w.Close(); err != nil {
			return err
		}
		out = append(out, body{b.Bytes(), w.FormDataContentType()})
		return nil
	}
	if files != "" {
		var views [][]byte
		var names []string
		for _, p := range strings.Split(files, ",") {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			views, names = append(views, b), append(names, filepath.Base(p))
		}
		return out, add(views, names)
	}
	cfg := data.SynthConfig{Train: 16, Width: 128, Height: 128, Seed: 11}
	for i := range 16 {
		s, err := data.GenerateStudy(cfg, "train", i)
		if err != nil {
			return nil, err
		}
		var views [][]byte
		var names []string
		for v, film := range s.Films {
			var b bytes.Buffer
			if err := png.Encode(&b, film); err != nil {
				return nil, err
			}
			views, names = append(views, b.Bytes()), append(names, fmt.Sprintf("%d.png", v))
		}
		if err := add(views, names); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitReady polls /readyz.
func waitReady(url string, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s/readyz did not answer 200 within %v", url, d)
}

type result struct {
	ok      int
	lat     []time.Duration
	codes   map[int]int
	elapsed time.Duration
	peak    int64
}

// run posts bodies from n clients for d, sampling the server's RSS.
func run(url, token string, bodies []body, n int, d time.Duration, pid int) result {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, DisableCompression: true}}
	defer client.CloseIdleConnections()
	r := result{codes: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan int64)
	go func() {
		var peak int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, rss(pid))
			select {
			case <-t.C:
			case <-ctx.Done():
				sampled <- peak
				return
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for c := range n {
		wg.Go(func() {
			for i := c; time.Now().Before(end); i += n {
				b := bodies[i%len(bodies)]
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/reports", bytes.NewReader(b.b))
				req.Header.Set("Content-Type", b.ct)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				code := -1
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				el := time.Since(t0)
				mu.Lock()
				r.codes[code]++
				if code == 200 {
					r.ok++
					r.lat = append(r.lat, el)
				}
				mu.Unlock()
				if code == 429 {
					time.Sleep(100 * time.Millisecond) // a client that backs off
				}
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	cancel()
	r.peak = <-sampled
	return r
}

// rss reads VmRSS of a process, in bytes (0 when unknown).
func rss(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func mb(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d MB", n/1e6)
}

func pct(d []time.Duration, p float64) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(100 * time.Microsecond).String()
}
