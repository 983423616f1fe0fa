package dicomweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
)

// logBuffer collects a client's log lines.
type logBuffer struct{ testutil.SyncBuffer }

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// sink is a server that must receive nothing: it counts what reaches it
// and keeps any credentials or body sent there.
type sink struct {
	srv   *httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	got   []string
}

func newSink(t *testing.T, listen string) *sink {
	s := &sink{}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", listen, err)
	}
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.got = append(s.got, r.Method+" "+r.URL.String()+" auth="+r.Header.Get("Authorization")+" body="+string(b))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/dicom+json")
		io.WriteString(w, "[]")
	})}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// storeAnswer is a STOW-RS answer listing sop as stored.
func storeAnswer(sop string) string {
	return `{"00081199":{"vr":"SQ","Value":[{"00081150":{"vr":"UI","Value":["1.2.840.10008.5.1.4.1.1.88.11"]},"00081155":{"vr":"UI","Value":["` + sop + `"]}}]}}`
}

// TestRedirectAcrossOrigins: an https PACS that redirects (307, 308, 302)
// to http on the same host, to another port, or to another host name
// (localhost for 127.0.0.1, 127.0.0.2) gets the request refused with
// ErrRedirect, not retried: the target receives nothing, neither the
// basic-auth password nor the bearer token nor the SR. The client is
// made as examples/server's -pacs with -pacs-user makes it (New,
// WithBasicAuth, WithLogger), and through WithHTTPClient, whose own
// redirect policy (none: follow all) is not used and not changed.
func TestRedirectAcrossOrigins(t *testing.T) {
	plain := newSink(t, "127.0.0.1:0")
	other := newSink(t, "127.0.0.2:0")
	_, port, _ := net.SplitHostPort(plain.srv.Listener.Addr().String())
	var target atomic.Value
	var calls atomic.Int32
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		code := http.StatusTemporaryRedirect
		if r.URL.Query().Get("code") != "" {
			fmt.Sscan(r.URL.Query().Get("code"), &code)
		}
		http.Redirect(w, r, target.Load().(string)+r.URL.Path, code)
	}))
	defer tlsSrv.Close()
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	targets := []string{
		"http://127.0.0.1:" + tlsPort,            // the same host and port, http
		plain.srv.URL,                            // http, another port
		"https://127.0.0.1:" + port,              // https, another port
		"http://localhost:" + port,               // another host name
		other.srv.URL,                            // another host
		"http://user:pw@127.0.0.1:" + port + "/", // credentials of its own
	}
	var logs logBuffer
	hc := tlsSrv.Client()
	for _, auth := range []Option{WithBasicAuth("radgen", "s3cret"), WithBearerToken("t0ken")} {
		cl, err := New(tlsSrv.URL+"/dicom-web", auth, WithLogger(logs.logger()), WithHTTPClient(hc), fastRetry)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			for _, code := range []int{307, 308, 302} {
				target.Store(tg)
				calls.Store(0)
				q := Query{Extra: map[string][]string{"code": {fmt.Sprint(code)}}}
				_, err := cl.SearchStudies(context.Background(), q)
				if !errors.Is(err, ErrRedirect) || errors.Is(err, ErrUnavailable) || calls.Load() != 1 {
					t.Errorf("search redirected %d to %s: %v after %d calls", code, tg, err, calls.Load())
				}
				if err != nil && (strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "s3cret")) {
					t.Errorf("the error shows credentials: %v", err)
				}
			}
			calls.Store(0)
			_, err := cl.Store(context.Background(), "1.2.3", part10("1.2.3.4"))
			if !errors.Is(err, ErrRedirect) || calls.Load() != 1 {
				t.Errorf("store redirected to %s: %v after %d calls", tg, err, calls.Load())
			}
		}
	}
	if hc.CheckRedirect != nil {
		t.Error("WithHTTPClient changed the given client's redirect policy")
	}
	for _, s := range []*sink{plain, other} {
		if n := s.calls.Load(); n != 0 {
			t.Errorf("%s received %d requests: %q", s.srv.URL, n, s.got)
		}
	}
	if strings.Contains(logs.String(), "following a redirect") {
		t.Errorf("a redirect across origins was followed:\n%s", logs.String())
	}
}

// TestRedirectSameOrigin: a redirect within the root's origin is
// followed, with the credentials and the STOW-RS body, and logged; a
// loop of redirects ends with ErrRedirect.
func TestRedirectSameOrigin(t *testing.T) {
	var auth, body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/old/"):
			http.Redirect(w, r, "/new/"+strings.TrimPrefix(r.URL.Path, "/old/"), http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/loop/"):
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		default:
			auth.Store(r.Header.Get("Authorization"))
			b, _ := io.ReadAll(r.Body)
			body.Store(len(b))
			w.Header().Set("Content-Type", "application/dicom+json")
			if r.Method == http.MethodPost {
				io.WriteString(w, storeAnswer("1.2.3.4"))
				return
			}
			io.WriteString(w, studyJSON)
		}
	}))
	defer srv.Close()
	var logs logBuffer
	cl, _ := New(srv.URL+"/old", WithBasicAuth("u", "p"), WithLogger(logs.logger()), fastRetry)
	if ds, err := cl.SearchStudies(context.Background(), Query{}); err != nil || len(ds) != 1 || auth.Load() != "Basic dTpw" {
		t.Errorf("search: %v %d datasets, Authorization %q", err, len(ds), auth.Load())
	}
	if _, err := cl.Store(context.Background(), "", part10("1.2.3.4")); err != nil || body.Load().(int) < 132 {
		t.Errorf("store: %v, %v bytes of body after the redirect", err, body.Load())
	}
	if n := strings.Count(logs.String(), "following a redirect"); n != 2 {
		t.Errorf("%d redirects logged, want 2:\n%s", n, logs.String())
	}
	loop, _ := New(srv.URL+"/loop", fastRetry)
	if _, err := loop.SearchStudies(context.Background(), Query{}); !errors.Is(err, ErrRedirect) {
		t.Errorf("redirect loop: %v", err)
	}
}

// TestRetryAfter: Retry-After as delta-seconds or an HTTP-date is read
// and clamped to [0, MaxRetryAfter]; 2^63−1 seconds does not overflow.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true}, {"0", 0, true}, {"9223372036854775807", MaxRetryAfter, true},
		{"99999999999999999999999", MaxRetryAfter, true}, {"3600", time.Hour, true}, {"3601", MaxRetryAfter, true},
		{"Fri, 01 Mar 2024 12:00:30 GMT", 30 * time.Second, true}, {"Fri, 01 Mar 2024 11:00:00 GMT", 0, true},
		{"Fri, 01 Mar 2099 12:00:00 GMT", MaxRetryAfter, true},
		{"-1", 0, false}, {"1.5", 0, false}, {"soon", 0, false}, {"", 0, false},
	} {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestTemporaryAnswers: 408, 429 and 503 are retried; a Retry-After
// longer than Retry.Max (2^63−1 seconds) ends the retries at once with
// ErrUnavailable, the wait left in StatusError.RetryAfter; 400, 403, 404
// and 409 are final at once.
func TestTemporaryAnswers(t *testing.T) {
	var calls, fail atomic.Int32
	var code atomic.Int32
	var retryAfter atomic.Value
	retryAfter.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if fail.Add(-1) >= 0 {
			if ra := retryAfter.Load().(string); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			http.Error(w, "not now", int(code.Load()))
			return
		}
		io.WriteString(w, "[]")
	}))
	defer srv.Close()
	cl, _ := New(srv.URL, fastRetry)
	ctx := context.Background()
	for _, c := range []int32{408, 429, 500, 503} {
		calls.Store(0)
		fail.Store(2)
		code.Store(c)
		if _, err := cl.SearchStudies(ctx, Query{}); err != nil || calls.Load() != 3 {
			t.Errorf("%d twice: %v after %d calls", c, err, calls.Load())
		}
	}
	for _, ra := range []string{"9223372036854775807", "Fri, 01 Mar 2199 12:00:00 GMT"} {
		calls.Store(0)
		fail.Store(10)
		code.Store(429)
		retryAfter.Store(ra)
		_, err := cl.SearchStudies(ctx, Query{})
		var se *StatusError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.RetryAfter != MaxRetryAfter || calls.Load() != 1 {
			t.Errorf("429 with Retry-After %s: %v after %d calls", ra, err, calls.Load())
		}
	}
	retryAfter.Store("")
	for _, c := range []int32{400, 403, 404, 409} {
		calls.Store(0)
		fail.Store(10)
		code.Store(c)
		_, err := cl.SearchStudies(ctx, Query{})
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != int(c) || se.Temporary() || errors.Is(err, ErrUnavailable) || calls.Load() != 1 {
			t.Errorf("%d: %v after %d calls", c, err, calls.Load())
		}
	}
}

// stall answers after the client gave up, or when the test ends.
func stall(r *http.Request, done <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-done:
	}
}

// TestDeadlines: a server that sends no headers, or trickles its body (a
// search, a retrieval), is cut off at the client's deadlines — the
// body's, or the stall's when a window brings less than StallBytes — and
// the failure is an outage (ErrUnavailable); a slow answer is logged with
// its progress.
func TestDeadlines(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/mute/"):
			stall(r, done)
		case strings.Contains(r.URL.Path, "/trickle/"):
			w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b`)
			if strings.HasSuffix(r.URL.Path, "/studies") {
				w.Header().Set("Content-Type", "application/dicom+json")
			}
			w.WriteHeader(200)
			body := "[" + strings.Repeat(" ", 1<<20) + "]"
			if !strings.HasSuffix(r.URL.Path, "/studies") {
				body = "--b\r\nContent-Type: application/dicom\r\n\r\n" + strings.Repeat("x", 1<<20) + "\r\n--b--\r\n"
			}
			for i := range len(body) {
				if _, err := io.WriteString(w, body[i:i+1]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(5 * time.Millisecond):
				case <-r.Context().Done():
					return
				case <-done:
					return
				}
			}
		}
	}))
	defer srv.Close()
	var logs logBuffer
	opts := []Option{fastRetry, WithLogger(logs.logger()), WithTimeouts(Timeouts{Header: 100 * time.Millisecond, Body: 300 * time.Millisecond, Progress: 50 * time.Millisecond})}
	ctx := context.Background()
	mute, _ := New(srv.URL+"/mute", opts...)
	if _, err := mute.SearchStudies(ctx, Query{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "headers") {
		t.Errorf("no headers: %v", err)
	}
	trickle, _ := New(srv.URL+"/trickle", opts...)
	if _, err := trickle.SearchStudies(ctx, Query{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "body within") {
		t.Errorf("a search trickled: %v", err)
	}
	parts := 0
	err := trickle.Retrieve(ctx, "1.2.3", "", "", func(p Part) error {
		parts++
		_, err := io.Copy(io.Discard, p.Body)
		return err
	})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed) || parts != 1 {
		t.Errorf("a retrieval trickled: %v, %d parts", err, parts)
	}
	stalling, _ := New(srv.URL+"/trickle", fastRetry, WithTimeouts(Timeouts{Body: time.Minute, Stall: 200 * time.Millisecond}))
	if _, err := stalling.SearchStudies(ctx, Query{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("a search trickled below StallBytes a window: %v", err)
	}
	for _, want := range []string{"waiting_for=headers", "waiting_for=body"} {
		if !strings.Contains(logs.String(), "dicomweb: slow answer") || !strings.Contains(logs.String(), want) {
			t.Errorf("no slow answer logged %s:\n%s", want, logs.String())
		}
	}
}

// TestBrokenAnswers: a retrieval whose connection drops in the middle of
// a part, or whose body ends before its closing delimiter, is an outage
// (ErrUnavailable, ErrTruncated), not ErrMalformed; a complete answer that
// is no multipart, or a search answered with an HTML page, is
// ErrMalformed.
func TestBrokenAnswers(t *testing.T) {
	part := "--b\r\nContent-Type: application/dicom\r\n\r\n" + strings.Repeat("x", 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/drop/"):
			w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b`)
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		case strings.HasPrefix(r.URL.Path, "/short/"):
			w.Header().Set("Content-Type", `multipart/related; type="application/dicom"; boundary=b`)
			io.WriteString(w, part) // no delimiter after it
		case strings.HasPrefix(r.URL.Path, "/html/"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<html><body>Please log in</body></html>")
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, c := range []struct {
		root      string
		want, not error
	}{{"/drop", ErrTruncated, ErrMalformed}, {"/short", ErrTruncated, ErrMalformed}, {"/html", ErrMalformed, ErrUnavailable}} {
		cl, _ := New(srv.URL+c.root, fastRetry)
		err := cl.Retrieve(ctx, "1.2.3", "", "", func(p Part) error {
			_, err := io.Copy(io.Discard, p.Body)
			return err
		})
		if !errors.Is(err, c.want) || errors.Is(err, c.not) || (c.want == ErrTruncated) != errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v", c.root, err)
		}
	}
	cl, _ := New(srv.URL+"/html", fastRetry)
	if _, err := cl.SearchStudies(ctx, Query{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "text/html") {
		t.Errorf("a search answered with HTML: %v", err)
	}
}

// TestStoreChecked: a STOW-RS answer of success counts only when it lists
// the instance sent in its Referenced SOP Sequence: an empty 200, an
// answer naming another instance, or one failing it is a *StoreError
// (ErrNotStored), temporary or not by its reason; 202 with a warning is a
// success; 409 is a final *StatusError; an instance that is no Part 10
// file is refused before any request.
func TestStoreChecked(t *testing.T) {
	var answer atomic.Value
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/dicom+json")
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, answer.Load().(string))
	}))
	defer srv.Close()
	cl, _ := New(srv.URL, fastRetry)
	failed := func(reason int) string {
		return fmt.Sprintf(`{"00081198":{"vr":"SQ","Value":[{"00081155":{"vr":"UI","Value":["1.2.3.4"]},"00081197":{"vr":"US","Value":[%d]}}]}}`, reason)
	}
	for _, c := range []struct {
		name           string
		status         int
		answer         string
		ok, temporary  bool
		missing, fails int
	}{
		{"200, empty", 200, "", false, true, 1, 0},
		{"200, {}", 200, "{}", false, true, 1, 0},
		{"200, another instance", 200, storeAnswer("1.2.3.5"), false, true, 1, 0},
		{"200, failed A700", 200, failed(0xA700), false, true, 0, 1},
		{"202, failed C000", 202, failed(0xC000), false, false, 0, 1},
		{"200, stored", 200, storeAnswer("1.2.3.4"), true, false, 0, 0},
		{"202, stored with a warning", 202, strings.Replace(storeAnswer("1.2.3.4"), `]}}]}}`, `]},"00081196":{"vr":"US","Value":[45056]}}]}}`, 1), true, false, 0, 0},
	} {
		status.Store(int32(c.status))
		answer.Store(c.answer)
		_, err := cl.Store(context.Background(), "1.2.3", part10("1.2.3.4"))
		var se *StoreError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.ok:
		case !errors.As(err, &se) || !errors.Is(err, ErrNotStored) || se.Temporary() != c.temporary || len(se.Missing) != c.missing || len(se.Failed) != c.fails:
			t.Errorf("%s: %v", c.name, err)
		}
	}
	status.Store(409)
	answer.Store(failed(0xA900))
	_, err := cl.Store(context.Background(), "1.2.3", part10("1.2.3.4"))
	var st *StatusError
	if !errors.As(err, &st) || st.StatusCode != 409 || errors.Is(err, ErrUnavailable) {
		t.Errorf("409: %v", err)
	}
	if _, err := cl.Store(context.Background(), "1.2.3", []byte("DICM not part 10")); !errors.Is(err, ErrInput) {
		t.Errorf("not Part 10: %v", err)
	}
}
