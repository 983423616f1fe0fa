package pacs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/memtrans/pacs"
)

// logs keeps a worker's log lines for the test to read, and passes them
// to t.Log.
type logs struct {
	t  testing.TB
	mu sync.Mutex
	b  strings.Builder
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logs) count(s string) int { return strings.Count(l.String(), s) }

// fastClient is a client of the fake PACS with short retries and, when
// given, deadlines.
func fastClient(t testing.TB, url string, opts ...dicomweb.Option) *dicomweb.Client {
	t.Helper()
	c, err := dicomweb.New(url, append([]dicomweb.Option{dicomweb.WithRetry(dicomweb.Retry{Attempts: 2, Base: 5 * time.Millisecond, Max: 10 * time.Millisecond})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hostileWorker makes a one-view worker on the fake PACS, reporting at
// once and retrying a study three times, quickly; cfg's fields override.
func hostileWorker(t testing.TB, f *fakePACS, cfg pacs.Config) (*pacs.Worker, *logs) {
	t.Helper()
	l := &logs{t: t}
	if cfg.PACS == nil {
		cfg.PACS = fastClient(t, f.URL, dicomweb.WithLogger(slog.New(slog.NewTextHandler(l, nil))))
	}
	if cfg.Model == nil {
		cfg.Model, _ = tinyModel(t, 1)
	}
	if cfg.SettlePolls == 0 {
		cfg.Immediate = true
	}
	if cfg.StudyRetry.Attempts == 0 {
		cfg.StudyRetry = dicomweb.Retry{Attempts: 3, Base: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	}
	if cfg.OnceTimeout == 0 {
		cfg.OnceTimeout = 5 * time.Minute
	}
	cfg.Logger = slog.New(slog.NewTextHandler(l, nil))
	return newWorker(t, cfg), l
}

// runOnce runs RunOnce and fails the test if it does not return within a
// generous bound (the worker's OnceTimeout is its own, shorter one).
func runOnce(t testing.TB, w *pacs.Worker) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.RunOnce(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Minute):
		t.Fatal("RunOnce did not return")
		return nil
	}
}

// exactlyOnce checks that each study holds an SR stored by one STOW-RS.
func exactlyOnce(t testing.TB, f *fakePACS, studies ...string) {
	t.Helper()
	_, stows := f.stored()
	for _, s := range studies {
		if !f.hasSR(s) || stows[s] != 1 {
			t.Errorf("study %s: SR %v, %d STOW-RS requests; want it stored once", s, f.hasSR(s), stows[s])
		}
	}
}

func studies(from, n int) []string {
	var out []string
	for i := range n {
		out = append(out, uid(from+i))
	}
	return out
}

// TestPagingOffsetIgnored: a PACS that ignores offset answers every page
// with its first studies. The search stops at the first page that lists
// nothing new, logged and counted; the studies listed are reported, each
// once; RunOnce returns ErrIncomplete, after a bounded number of
// searches, with the worker's heap bounded.
func TestPagingOffsetIgnored(t *testing.T) {
	all := studies(1000, 5)
	f := newFake(t, all...)
	f.set(func(f *fakePACS) { f.ignoreOffset = true })
	w, l := hostileWorker(t, f, pacs.Config{PageSize: 2})
	err := runOnce(t, w)
	if !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce: %v, want ErrIncomplete", err)
	}
	exactlyOnce(t, f, all[:2]...)
	if n, _ := f.stored(); n != 2 {
		t.Errorf("%d studies stored, want the 2 listed", n)
	}
	st := w.Stats()
	if st.SearchesCut < 1 || st.Reported != 2 || f.hit("qido", "") > 10 || l.count("lists no study not listed before") < 1 {
		t.Errorf("stats %+v after %d searches", st, f.hit("qido", ""))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > 512<<20 {
		t.Errorf("heap in use %d bytes", ms.HeapInuse)
	}
}

// TestPagingCapped: a PACS that answers at most 2 studies a page while 5
// are asked is paged through: all 7 studies are reported, each once, the
// short pages logged and counted, and RunOnce returns nil. With a page
// cap of 2 pages, the search is cut there, logged, and RunOnce says so.
func TestPagingCapped(t *testing.T) {
	all := studies(1100, 7)
	f := newFake(t, all...)
	f.set(func(f *fakePACS) { f.pageCap = 2 })
	w, l := hostileWorker(t, f, pacs.Config{PageSize: 5})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, all...)
	if st := w.Stats(); st.Reported != 7 || st.ShortPages < 1 || st.SearchesCut != 0 || l.count("fewer studies a page than asked") != 1 {
		t.Errorf("stats %+v", st)
	}

	g := newFake(t, studies(1200, 7)...)
	g.set(func(f *fakePACS) { f.pageCap = 2 })
	w, l = hostileWorker(t, g, pacs.Config{PageSize: 2, MaxPages: 2})
	if err := runOnce(t, w); !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce with the page cap: %v", err)
	}
	if st := w.Stats(); st.Reported != 4 || st.SearchesCut < 1 || l.count("search cut at its page cap") < 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestStudyIsolation: one study whose WADO-RS always answers 500 does not
// hold the others back: they are reported, each once, while it is
// retried on its own and dead-lettered after StudyRetry.Attempts with its
// last error. A retrieval cut mid-stream once, a 404 once, a 429 once and
// a 503 once are ridden out (the study reported); a 404 every time
// dead-letters the study at the third; 403 at once.
func TestStudyIsolation(t *testing.T) {
	bad, cut, gone404, once404, once429, once503, forbidden := uid(1300), uid(1301), uid(1302), uid(1303), uid(1304), uid(1305), uid(1306)
	good := studies(1310, 3)
	f := newFake(t, append([]string{bad, cut, gone404, once404, once429, once503, forbidden}, good...)...)
	var mu sync.Mutex
	asked := map[string]int{}
	// failing says whether the n-th request of a study fails: the first
	// two, the client's two tries of the worker's first attempt.
	failing := func(study string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked[study]++
		return asked[study] <= 2
	}
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			if kind != "wado" {
				return false
			}
			switch {
			case study == bad:
				http.Error(w, "storage node down", http.StatusInternalServerError)
			case study == gone404:
				http.Error(w, "no such series", http.StatusNotFound)
			case study == forbidden:
				http.Error(w, "not for you", http.StatusForbidden)
			case study == once404 && failing(study):
				http.Error(w, "not yet", http.StatusNotFound)
			case study == once429 && failing(study):
				w.Header().Set("Retry-After", "0")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			case study == once503 && failing(study):
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case study == cut && failing(study):
				w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b`)
				w.Header().Set("Content-Length", "100000")
				w.WriteHeader(200)
				io.WriteString(w, "--b\r\nContent-Type: application/dicom\r\n\r\n"+strings.Repeat("\x00", 2000))
				w.(http.Flusher).Flush()
				c, _, _ := w.(http.Hijacker).Hijack()
				c.Close()
			default:
				return false
			}
			return true
		}
	})
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	w, l := hostileWorker(t, f, pacs.Config{DeadLetterFile: dead})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, append([]string{cut, once404, once429, once503}, good...)...)
	dl := w.DeadLetters()
	if len(dl) != 3 || dl[0].Study != bad || dl[1].Study != gone404 || dl[2].Study != forbidden {
		t.Fatalf("dead letters %+v", dl)
	}
	if !strings.Contains(dl[0].Error, "failed 3 times") || !strings.Contains(dl[0].Error, "500") ||
		!strings.Contains(dl[1].Error, "404 3 times") || !strings.Contains(dl[2].Error, "403") {
		t.Errorf("dead-letter errors %+v", dl)
	}
	if n := f.hit("wado", forbidden); n != 1 {
		t.Errorf("the 403 study was asked %d times", n)
	}
	if n := f.hit("wado", bad); n != 3*2 { // three attempts, each of the client's two tries
		t.Errorf("the failing study was asked %d times, want 6", n)
	}
	if st := w.Stats(); st.Reported != 7 || st.DeadLetters != 3 || st.Retries < 7 || l.count("retrying it later") < 7 {
		t.Errorf("stats %+v", st)
	}
}

// TestSearchAnswers: search answers that are not studies — an HTML page,
// JSON that breaks off, an answer over the client's limit, 429, 500, a
// redirect to another port — are outages of that round, never the end of
// Run or RunOnce; once the PACS answers well, every study is reported
// once.
func TestSearchAnswers(t *testing.T) {
	all := studies(1400, 2)
	f := newFake(t, all...)
	sink := newFake(t)
	var bad atomic.Int32
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>login</html>")
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/dicom+json")
			io.WriteString(w, `[{"0020000D":{"vr":"UI","Value":["1.2`)
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/dicom+json")
			io.WriteString(w, "["+strings.Repeat(`{},`, 3000)+"{}]")
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		},
		func(w http.ResponseWriter) { http.Error(w, "oops", http.StatusInternalServerError) },
		func(w http.ResponseWriter) {
			w.Header().Set("Location", sink.URL+"/studies")
			w.WriteHeader(http.StatusTemporaryRedirect)
		},
	}
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			if kind != "qido" {
				return false
			}
			i := int(bad.Add(1)) - 1
			if i >= 2*len(answers) {
				return false
			}
			answers[i/2](w) // each answer twice: the client's two tries
			return true
		}
	})
	c := fastClient(t, f.URL, dicomweb.WithLimits(dicomweb.Limits{JSONBytes: 8 << 10}))
	w, _ := hostileWorker(t, f, pacs.Config{PACS: c})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, all...)
	if st := w.Stats(); st.Outages < len(answers) || st.Reported != 2 {
		t.Errorf("stats %+v", st)
	}
	if sink.hit("qido", "") != 0 {
		t.Error("the redirect was followed")
	}

	// Run under answers that never get better keeps going until stopped.
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			answers[int(bad.Add(1))%len(answers)](w)
			return true
		}
	})
	w, _ = hostileWorker(t, f, pacs.Config{PACS: c})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for w.Stats().Outages < 2*len(answers) {
		select {
		case err := <-done:
			t.Fatalf("Run returned on the PACS's answers: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

// TestHostileUIDs: a search listing a 600 kB StudyInstanceUID, one with
// "../" and one with control characters sends no request naming them,
// logs each once (cut) and counts them, dead-letters none; a study listed
// twice (different instance counts) is reported once, logged and counted;
// a study whose instance count changes at every search is reported after
// SettlePolls changes, logged and counted. A restart on the dead-letter
// file reads it.
func TestHostileUIDs(t *testing.T) {
	twice, moving := uid(1500), uid(1501)
	f := newFake(t, twice, moving)
	huge := strings.Repeat("1.", 300000) + "1"
	var n atomic.Int32
	f.set(func(f *fakePACS) {
		f.extra = []dicomweb.Dataset{
			{dicomweb.TagKey(dicomweb.TagStudyInstanceUID): uidJSON(0, "UI", huge)},
			{dicomweb.TagKey(dicomweb.TagStudyInstanceUID): uidJSON(0, "UI", "1.2/../../etc")},
			{dicomweb.TagKey(dicomweb.TagStudyInstanceUID): uidJSON(0, "UI", "1.2\r\nlevel=ERROR msg=forged")},
			{dicomweb.TagKey(dicomweb.TagStudyInstanceUID): uidJSON(0, "UI", twice), dicomweb.TagKey(dicomweb.TagNumberOfStudyInstances): {VR: "IS", Value: []json.RawMessage{json.RawMessage("2")}}},
		}
		f.count = func(study string, c int) int {
			if study == moving {
				return int(n.Add(1))
			}
			return c
		}
	})
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	w, l := hostileWorker(t, f, pacs.Config{SettlePolls: 4, DeadLetterFile: dead})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, twice, moving)
	st := w.Stats()
	if st.InvalidUIDs != 3 || st.Duplicates != 1 || st.Unsettled != 1 || st.DeadLetters != 0 || st.Reported != 2 {
		t.Errorf("stats %+v", st)
	}
	f.mu.Lock()
	for _, p := range f.paths {
		if len(p) > 200 || strings.Contains(p, "..") || strings.ContainsAny(p, "\r\n") {
			t.Errorf("a request named an invalid UID: %.80q", p)
		}
	}
	f.mu.Unlock()
	text := l.String()
	if strings.Count(text, "without a valid StudyInstanceUID") != 3 || strings.Contains(text, "\nlevel=ERROR msg=forged") || len(text) > 200<<10 {
		t.Errorf("the invalid UIDs' log (%d bytes) is not three quoted, cut lines", len(text))
	}
	if l.count("lists a study more than once") != 1 || l.count("keeps changing") != 1 {
		t.Error("the duplicate or the unsettled study was not logged once")
	}
	if b, _ := os.ReadFile(dead); len(b) != 0 {
		t.Errorf("dead letters written: %.200s", b)
	}
}

// TestDeadLetterFile: a dead-letter file poisoned with a 600 kB line, a
// line that is not JSON and a study that is no UID is read: those lines
// skipped and logged, the others kept. A study dead-lettered with a huge
// error writes one bounded line, which a restart reads.
func TestDeadLetterFile(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.jsonl")
	kept := uid(1600)
	os.WriteFile(dead, []byte(`{"study":"`+strings.Repeat("1.", 300000)+`1","error":"x"}`+"\n"+"{not json\n"+
		`{"study":"../x","error":"x"}`+"\n"+`{"study":"`+kept+`","error":"kept"}`+"\n"), 0o644)
	noisy := uid(1601)
	f := newFake(t, kept, noisy)
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			if kind == "wado" && study == noisy {
				http.Error(w, strings.Repeat("the archive says no, ", 5000), http.StatusBadRequest)
				return true
			}
			return false
		}
	})
	w, l := hostileWorker(t, f, pacs.Config{DeadLetterFile: dead})
	if l.count("dead-letter line skipped") != 3 {
		t.Errorf("skipped lines not logged:\n%s", l.String())
	}
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	if f.hit("series", kept) != 0 {
		t.Error("a dead-lettered study was looked at")
	}
	b, _ := os.ReadFile(dead)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, noisy) || len(last) > 4<<10 {
		t.Errorf("the new dead letter is %d bytes: %.200s", len(last), last)
	}
	w2, _ := hostileWorker(t, f, pacs.Config{DeadLetterFile: dead})
	if dl := w2.DeadLetters(); len(dl) != 2 || dl[0].Study != kept || dl[1].Study != noisy {
		t.Errorf("after a restart: %+v", dl)
	}
}

// TestStoreNotStored: a STOW-RS answered 200 with an empty body, while
// the PACS keeps nothing, is no report: the study is retried and
// dead-lettered, and no HL7 message goes; so is one answered with a
// Failed SOP Sequence or 409, at once. A PACS that stores the SR but
// answers 200 with an empty body is asked, found holding it, and the
// study counts as reported, its message sent once.
func TestStoreNotStored(t *testing.T) {
	empty, failed, conflict, keeps := uid(1700), uid(1701), uid(1702), uid(1703)
	f := newFake(t, empty, failed, conflict, keeps)
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			if kind != "stow" {
				return false
			}
			switch study {
			case empty:
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusOK)
			case failed:
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/dicom+json")
				_, sop := dicomsr.StudyUIDs(study, modelInfo)
				io.WriteString(w, `{"00081198":{"vr":"SQ","Value":[{"00081155":{"vr":"UI","Value":["`+sop+`"]},"00081197":{"vr":"US","Value":[49152]}}]}}`)
			case conflict:
				io.Copy(io.Discard, r.Body)
				http.Error(w, "conflict", http.StatusConflict)
			case keeps:
				f.stow(httptest.NewRecorder(), r, study) // stored, the answer dropped
				w.WriteHeader(http.StatusOK)
			}
			return true
		}
	})
	receiver := newRIS(t, func(int, []byte) string { return "AA" })
	w, _ := hostileWorker(t, f, pacs.Config{MLLP: &hl7.Sender{Addr: receiver.addr(), Timeout: 10 * time.Second}})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	dl := w.DeadLetters()
	if len(dl) != 3 || dl[0].Study != empty || dl[1].Study != failed || dl[2].Study != conflict {
		t.Fatalf("dead letters %+v", dl)
	}
	if !strings.Contains(dl[0].Error, "not in the answer's Referenced SOP Sequence") || !strings.Contains(dl[1].Error, "0xC000") || !strings.Contains(dl[2].Error, "409") {
		t.Errorf("dead-letter errors %+v", dl)
	}
	if f.hit("stow", empty) != 3 || f.hit("stow", failed) != 1 || f.hit("stow", conflict) != 1 {
		t.Errorf("STOW-RS requests: %d %d %d", f.hit("stow", empty), f.hit("stow", failed), f.hit("stow", conflict))
	}
	msgs := receiver.messages()
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], keeps+" ") {
		t.Errorf("HL7 messages %q, want one, of %s", msgs, keeps)
	}
	if st := w.Stats(); st.Reported != 1 || st.HL7Sent != 1 || st.HL7Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestDeadlines: a PACS that trickles a study's WADO-RS body at a byte
// every 10 ms is cut at the client's body deadline, the study retried and
// dead-lettered while the other study is reported; one that trickles its
// search answer keeps RunOnce from finishing, and RunOnce returns
// ErrIncomplete at its OnceTimeout.
func TestDeadlines(t *testing.T) {
	slow, fine := uid(1800), uid(1801)
	f := newFake(t, slow, fine)
	done := make(chan struct{})
	defer close(done)
	trickle := func(w http.ResponseWriter, r *http.Request, ctype, body string) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(200)
		for i := range len(body) {
			if _, err := io.WriteString(w, body[i:i+1]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			case <-done:
				return
			}
		}
	}
	var slowSearch atomic.Bool
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			switch {
			case kind == "wado" && study == slow:
				trickle(w, r, `multipart/related; type="application/dicom"; boundary=b`, "--b\r\nContent-Type: application/dicom\r\n\r\n"+strings.Repeat("x", 1<<20))
			case kind == "qido" && slowSearch.Load():
				trickle(w, r, "application/dicom+json", "["+strings.Repeat(" ", 1<<20)+"]")
			default:
				return false
			}
			return true
		}
	})
	l := &logs{t: t}
	c := fastClient(t, f.URL, dicomweb.WithTimeouts(dicomweb.Timeouts{Header: time.Second, Body: 300 * time.Millisecond, Progress: 100 * time.Millisecond}),
		dicomweb.WithLogger(slog.New(slog.NewTextHandler(l, nil))))
	w, _ := hostileWorker(t, f, pacs.Config{PACS: c})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, fine)
	if dl := w.DeadLetters(); len(dl) != 1 || dl[0].Study != slow || !strings.Contains(dl[0].Error, "body within") {
		t.Errorf("dead letters %+v", dl)
	}
	if l.count("dicomweb: slow answer") < 1 {
		t.Error("no slow answer logged")
	}

	slowSearch.Store(true)
	f.add(uid(1802))
	w, _ = hostileWorker(t, f, pacs.Config{PACS: c, OnceTimeout: 2 * time.Second})
	if err := runOnce(t, w); !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce against a trickled search: %v", err)
	}
	if w.Stats().Outages < 1 {
		t.Errorf("stats %+v", w.Stats())
	}
}

// TestHL7AfterSR: the ORU^R01 goes only after the SR is stored, and none
// is lost. With the receiver down the SR is stored and the message waits
// in the journal (RunOnce returns ErrIncomplete at its bound); a restart
// (a new worker, as after a crash) finds the SR in the PACS and sends the
// message from the journal, once, with its control ID. A journal entry
// whose SR the PACS lacks (a crash before the STOW-RS) is dropped and the
// study reported afresh. AR twice then AA delivers the message at the
// third try; AE dead-letters the study, its SR kept; a journal line that
// does not read is logged and skipped.
func TestHL7AfterSR(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "hl7.jsonl")
	a, b := uid(1900), uid(1901)
	f := newFake(t, a)
	// The receiver is down: nothing listens at its address.
	down := newRIS(t, func(int, []byte) string { return "AA" })
	addr := down.addr()
	down.ln.Close()
	w, _ := hostileWorker(t, f, pacs.Config{MLLP: &hl7.Sender{Addr: addr, Timeout: time.Second}, JournalFile: journal, OnceTimeout: 2 * time.Second})
	if err := runOnce(t, w); !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce with the receiver down: %v", err)
	}
	exactlyOnce(t, f, a)
	if st := w.Stats(); st.Reported != 1 || st.HL7Pending != 1 || st.HL7Sent != 0 || st.Outages < 1 {
		t.Errorf("stats %+v", st)
	}
	jb, _ := os.ReadFile(journal)
	fi, _ := os.Stat(journal)
	if !strings.Contains(string(jb), a) || fi.Mode().Perm() != 0o600 {
		t.Errorf("journal (%v): %.200s", fi.Mode(), jb)
	}
	// A crash before the STOW-RS of b left its message in the journal.
	var entry map[string]any
	json.Unmarshal([]byte(strings.Split(string(jb), "\n")[0]), &entry)
	msg := strings.ReplaceAll(entry["message"].(string), a, b)
	id := hl7.ControlID(b, hl7.Model{Name: modelInfo.Name, Version: modelInfo.Version, Checksum: modelInfo.Checksum})
	msg = strings.Replace(msg, entry["control_id"].(string), id, 1)
	line, _ := json.Marshal(map[string]any{"study": b, "series": b + ".99", "sr": b + ".99.1", "control_id": id, "message": msg, "time": time.Now()})
	os.WriteFile(journal, append(append(append(jb, line...), '\n'), "{broken\n"...), 0o600)
	f.add(b)

	// Restart with the receiver back.
	up := newRIS(t, func(int, []byte) string { return "AA" })
	w, l := hostileWorker(t, f, pacs.Config{MLLP: &hl7.Sender{Addr: up.addr(), Timeout: 10 * time.Second}, JournalFile: journal})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, a, b)
	msgs := up.messages()
	if len(msgs) != 2 || msgs[0] != a+" "+hl7.ControlID(a, hl7.Model{Name: modelInfo.Name, Version: modelInfo.Version, Checksum: modelInfo.Checksum}) || !strings.HasPrefix(msgs[1], b+" ") {
		t.Errorf("messages after the restart %q", msgs)
	}
	if l.count("HL7 journal line skipped") != 1 || l.count("pending HL7 message is dropped") != 1 {
		t.Errorf("the broken line or the dropped entry was not logged")
	}
	if st := w.Stats(); st.AlreadyReported != 1 || st.Reported != 1 || st.HL7Sent != 2 || st.HL7Pending != 0 {
		t.Errorf("stats %+v", st)
	}
	if jb, _ := os.ReadFile(journal); len(strings.TrimSpace(string(jb))) != 0 {
		t.Errorf("journal left: %.200s", jb)
	}

	// AR, AR, AA: delivered at the third try. AE: dead-lettered.
	g := newFake(t, uid(1910), uid(1911))
	codes := map[string][]string{uid(1910): {"AR", "CR", "AA"}, uid(1911): {"AE"}}
	receiver := newRIS(t, func(n int, m []byte) string {
		pm, _ := hl7.ParseMessage(m)
		s := pm.Component(pm.Field("ZDS", 1), 1)
		c := codes[s][0]
		if len(codes[s]) > 1 {
			codes[s] = codes[s][1:]
		}
		return c
	})
	w, _ = hostileWorker(t, g, pacs.Config{MLLP: &hl7.Sender{Addr: receiver.addr(), Timeout: 10 * time.Second}})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, g, uid(1910), uid(1911))
	if dl := w.DeadLetters(); len(dl) != 1 || dl[0].Study != uid(1911) || !strings.Contains(dl[0].Error, "the SR is stored") || !strings.Contains(dl[0].Error, "AE") {
		t.Errorf("dead letters %+v", dl)
	}
	if st := w.Stats(); st.HL7Sent != 1 || st.Retries != 2 || st.HL7Pending != 0 || len(receiver.messages()) != 4 {
		t.Errorf("stats %+v, %d messages", st, len(receiver.messages()))
	}
}

// TestRunNeverExits: Run against a PACS that misbehaves in turn in every
// way above, for many rounds, returns only when stopped.
func TestRunNeverExits(t *testing.T) {
	f := newFake(t, studies(2000, 3)...)
	var n atomic.Int32
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			switch int(n.Add(1)) % 7 {
			case 0:
				http.Error(w, "x", http.StatusNotFound)
			case 1:
				http.Error(w, "x", http.StatusBadRequest)
			case 2:
				w.Header().Set("Retry-After", "9223372036854775807")
				http.Error(w, "x", http.StatusTooManyRequests)
			case 3:
				io.WriteString(w, "<html>")
			case 4:
				http.Redirect(w, r, "http://localhost:1/", http.StatusFound)
			case 5:
				c, _, _ := w.(http.Hijacker).Hijack()
				c.Close()
			default:
				return false
			}
			return true
		}
	})
	w, _ := hostileWorker(t, f, pacs.Config{Backoff: dicomweb.Retry{Base: time.Millisecond, Max: 5 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for f.hit("qido", "") < 50 {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
	t.Logf("stats %+v", w.Stats())
}

// TestHL7JournalFull: with the receiver down and room for one pending
// message, the first study's SR is stored and its message journalled,
// and the second study is held back, nothing of it stored, with one log
// line a round; once the receiver is back (a restart) both messages go
// and both SRs are stored, each once.
func TestHL7JournalFull(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "hl7.jsonl")
	a, b := uid(2100), uid(2101)
	f := newFake(t, a, b)
	down := newRIS(t, func(int, []byte) string { return "AA" })
	addr := down.addr()
	down.ln.Close()
	w, l := hostileWorker(t, f, pacs.Config{MLLP: &hl7.Sender{Addr: addr, Timeout: time.Second}, JournalFile: journal, MaxPendingHL7: 1,
		OnceTimeout: 2 * time.Second})
	if err := runOnce(t, w); !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce with the receiver down: %v", err)
	}
	if !f.hasSR(a) || f.hasSR(b) || f.hit("series", b) != 0 {
		t.Errorf("SR of %s %v, of %s %v (its series asked %d times)", a, f.hasSR(a), b, f.hasSR(b), f.hit("series", b))
	}
	if st := w.Stats(); st.HL7Pending != 1 || st.Waiting != 1 || st.Reported != 1 {
		t.Errorf("stats %+v", st)
	}
	if n, polls := l.count("the HL7 journal is full"), w.Stats().Polls; n == 0 || n > polls {
		t.Errorf("%d log lines of a full journal over %d rounds", n, polls)
	}
	up := newRIS(t, func(int, []byte) string { return "AA" })
	w, _ = hostileWorker(t, f, pacs.Config{MLLP: &hl7.Sender{Addr: up.addr(), Timeout: 10 * time.Second}, JournalFile: journal, MaxPendingHL7: 1})
	if err := runOnce(t, w); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, f, a, b)
	if msgs := up.messages(); len(msgs) != 2 || !strings.HasPrefix(msgs[0], a+" ") || !strings.HasPrefix(msgs[1], b+" ") {
		t.Errorf("messages %q", msgs)
	}
}

// TestOnceBoundMidStudy: RunOnce's bound reached while a study is in hand
// (its WADO-RS answer never comes) abandons the study, neither reported
// nor dead-lettered, and returns ErrIncomplete.
func TestOnceBoundMidStudy(t *testing.T) {
	hung := uid(2200)
	f := newFake(t, hung)
	done := make(chan struct{})
	defer close(done)
	f.set(func(f *fakePACS) {
		f.hook = func(kind, study string, w http.ResponseWriter, r *http.Request) bool {
			if kind != "wado" {
				return false
			}
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return true
		}
	})
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	c := fastClient(t, f.URL, dicomweb.WithTimeouts(dicomweb.Timeouts{Header: time.Hour}))
	w, _ := hostileWorker(t, f, pacs.Config{PACS: c, OnceTimeout: time.Second, DeadLetterFile: dead})
	if err := runOnce(t, w); !errors.Is(err, pacs.ErrIncomplete) {
		t.Errorf("RunOnce: %v", err)
	}
	if st := w.Stats(); st.DeadLetters != 0 || st.Reported != 0 || f.hit("wado", hung) != 1 {
		t.Errorf("stats %+v, %d retrievals", st, f.hit("wado", hung))
	}
	if b, _ := os.ReadFile(dead); len(b) != 0 {
		t.Errorf("dead letters %s", b)
	}
}
