package pacs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/memtrans/pacs"
)

// TestMain runs the test binary as a worker process when the crash test
// starts it again (RADGEN_PACS_CHILD=1), so that it can be killed.
func TestMain(m *testing.M) {
	if os.Getenv("RADGEN_PACS_CHILD") == "1" {
		os.Exit(childWorker())
	}
	code := m.Run()
	if models.dir != "" {
		os.RemoveAll(models.dir)
	}
	os.Exit(code)
}

// childWorker runs RunOnce against $RADGEN_PACS_URL with the model at
// $RADGEN_PACS_MODEL, sending HL7 messages to $RADGEN_PACS_MLLP with the
// journal $RADGEN_PACS_JOURNAL, and prints its Stats as JSON.
func childWorker() int {
	c, err := dicomweb.New(os.Getenv("RADGEN_PACS_URL"), dicomweb.WithBasicAuth(orthanctest.User, orthanctest.Password))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	model, err := memtrans.LoadFile(os.Getenv("RADGEN_PACS_MODEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := pacs.Config{PACS: c, Model: model, ModelInfo: modelInfo, Immediate: true, Interval: 10 * time.Millisecond,
		Generate: genOpts, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if addr := os.Getenv("RADGEN_PACS_MLLP"); addr != "" {
		cfg.MLLP = &hl7.Sender{Addr: addr, Timeout: 10 * time.Second}
		cfg.JournalFile = os.Getenv("RADGEN_PACS_JOURNAL")
	}
	w, err := pacs.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.RunOnce(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(w.Stats())
	fmt.Printf("%s\n", b)
	return 0
}

// TestWorkerSIGKILL kills a worker process with SIGKILL in the middle of a
// run — at the worst moment: the PACS has stored the second SR and the
// worker has not yet seen the answer, nor sent its HL7 message — and
// starts it again: every study ends with exactly one SR series, none
// twice, none missing, and the RIS gets each study's ORU^R01 once (the
// second from the journal). Before that,
// a STOW-RS whose answer is lost (the connection dropped after the PACS
// stored the SR) is retried by the client and the SR is still one
// instance.
func TestWorkerSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) covers it")
	}
	pacsSrv := orthanctest.Start(t)
	c := client(t, pacsSrv.URL)
	_, modelPath := tinyModel(t, 1)
	const n = 6
	var studies []string
	for i := range n {
		studies = append(studies, uid(500+i))
	}
	target, _ := url.Parse(pacsSrv.REST)

	// A proxy in front of Orthanc that can drop the answer to a STOW-RS
	// or kill the worker when the answer arrives.
	var (
		mu      sync.Mutex
		child   *exec.Cmd
		posts   atomic.Int32
		killAt  atomic.Int32 // kill the child when this POST's answer arrives (0: never)
		dropAt  atomic.Int32 // drop the connection instead of this POST's answer
		killed  atomic.Bool
		dropped atomic.Bool
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost {
			return nil
		}
		k := posts.Add(1)
		if k == killAt.Load() {
			mu.Lock()
			child.Process.Kill() // SIGKILL: the SR is stored, the worker never hears of it
			mu.Unlock()
			killed.Store(true)
		}
		if k == dropAt.Load() {
			dropped.Store(true)
			return http.ErrAbortHandler
		}
		return nil
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		panic(http.ErrAbortHandler) // close the connection without an answer
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	frontURL := front.URL + "/dicom-web"

	// A lost STOW-RS answer, in process: the client retries, the PACS keeps
	// one instance.
	model, _ := tinyModel(t, 1)
	dropAt.Store(1)
	lone := uid(599)
	store(t, c, twoView(lone, "DX")...)
	w := newWorker(t, pacs.Config{PACS: client(t, frontURL), Model: model, Immediate: true})
	ctx := context.Background()
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !dropped.Load() {
		t.Fatal("no STOW-RS answer was dropped")
	}
	if series, files := srSeries(t, c, lone); len(series) != 1 || len(files) != 1 {
		t.Errorf("after a lost answer: %d SR series, %d instances", len(series), len(files))
	}
	for _, s := range studies {
		store(t, c, twoView(s, "DX")...)
	}
	dropAt.Store(0)
	posts.Store(0)

	ris := listenMLLP(t)
	journal := filepath.Join(t.TempDir(), "hl7.jsonl")
	run := func(kill int32) (string, error) {
		killAt.Store(kill)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RADGEN_PACS_CHILD=1", "RADGEN_PACS_URL="+frontURL, "RADGEN_PACS_MODEL="+modelPath,
			"RADGEN_PACS_MLLP="+ris.ln.Addr().String(), "RADGEN_PACS_JOURNAL="+journal)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		mu.Lock()
		child = cmd
		err := cmd.Start()
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		t.Logf("worker process (kill at POST %d): %v\n%s", kill, err, errb.String())
		return out.String(), err
	}
	if _, err := run(2); err == nil || !killed.Load() {
		t.Fatalf("the worker was not killed: %v", err)
	}
	total := 0
	for _, s := range studies {
		series, _ := srSeries(t, c, s)
		total += len(series)
	}
	if total != 2 {
		t.Errorf("after the kill %d studies have an SR, want 2 (the kill came with the second SR's answer)", total)
	}
	if got := len(ris.messages()); got != 1 {
		t.Errorf("after the kill the RIS has %d messages, want 1 (the first study's)", got)
	}
	out, err := run(0)
	if err != nil {
		t.Fatalf("the restarted worker: %v", err)
	}
	var st pacs.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats %q: %v", out, err)
	}
	if st.Reported != n-2 || st.AlreadyReported != 3 || st.DeadLetters != 0 || st.HL7Sent != n-1 || st.HL7Pending != 0 {
		t.Errorf("restarted worker: %+v, want %d reported and 3 found reported (2 before the kill and the lone study), %d messages sent", st, n-2, n-1)
	}
	seen := map[string]int{}
	for _, b := range ris.messages() {
		m, err := hl7.ParseMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Component(m.Field("ZDS", 1), 1)]++
	}
	for _, s := range studies {
		if seen[s] != 1 {
			t.Errorf("study %s: %d HL7 messages, want 1", s, seen[s])
		}
	}
	for _, s := range append(studies, lone) {
		series, files := srSeries(t, c, s)
		if len(series) != 1 || len(files) != 1 {
			t.Errorf("study %s: %d SR series, %d SR instances, want 1", s, len(series), len(files))
			continue
		}
		checkSR(t, s, files[0], []string{s + ".1.1"})
	}
}
