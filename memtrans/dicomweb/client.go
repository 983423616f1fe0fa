package dicomweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Errors the client wraps.
var (
	// ErrUnavailable: the server could not be reached, answered 408, 429
	// or 5xx, stalled past a deadline, or broke its answer off, on every
	// attempt the Retry allowed. The outage may pass.
	ErrUnavailable = errors.New("dicomweb: server unavailable")
	// ErrLimit: an answer exceeded one of the client's Limits.
	ErrLimit = errors.New("dicomweb: answer over the client's limit")
	// ErrMalformed: a complete answer is not what its Content-Type says.
	ErrMalformed = errors.New("dicomweb: malformed answer")
	// ErrTruncated: a body broke off before its end (the connection went,
	// or its reader failed); the client wraps it with ErrUnavailable.
	ErrTruncated = errors.New("dicomweb: body broken off")
	// ErrRedirect: the server redirected the request to another origin
	// (scheme, host or port), which the client does not follow, or
	// redirected it too often.
	ErrRedirect = errors.New("dicomweb: redirect not followed")
	// ErrNotStored: a STOW-RS answer of success does not list an instance
	// sent as stored ([*StoreError]).
	ErrNotStored = errors.New("dicomweb: instance not stored")
	// ErrInput: the caller's arguments cannot make a request (an empty
	// UID, a URL that is not one).
	ErrInput = errors.New("dicomweb: bad input")
)

// StatusError is a final answer that is not a success: a 4xx other than
// 408 and 429 (never retried: the request is wrong for the server), and
// the last 408, 429 or 5xx when the attempts ran out (then it is wrapped
// with ErrUnavailable).
type StatusError struct {
	Method     string
	URL        string // without credentials
	StatusCode int
	Status     string // e.g. "404 Not Found"
	Body       string // the start of the server's message, printable
	// RetryAfter is the answer's Retry-After (delta-seconds or an
	// HTTP-date), at most MaxRetryAfter; 0 when it has none.
	RetryAfter time.Duration
}

// MaxRetryAfter bounds the wait a Retry-After header may ask for.
const MaxRetryAfter = time.Hour

// Error names the request and the answer's status, and quotes the start of
// the server's message.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("dicomweb: %s %s: %s", e.Method, e.URL, e.Status)
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Temporary reports whether the answer may change by itself: 408 Request
// Timeout, 429 Too Many Requests and 5xx.
func (e *StatusError) Temporary() bool { return temporaryStatus(e.StatusCode) }

func temporaryStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code/100 == 5
}

// Retry says how often and how patiently a request is retried after a
// connection error, a deadline passed, or a 408, 429 or 5xx answer.
type Retry struct {
	Attempts int           // tries in all, at least 1
	Base     time.Duration // the wait after the first failure; it doubles each time
	Max      time.Duration // the longest wait; a Retry-After longer than Max ends the retries
}

// DefaultRetry is the client's retry unless WithRetry sets another: five
// tries over about 4 s.
var DefaultRetry = Retry{Attempts: 5, Base: 250 * time.Millisecond, Max: 4 * time.Second}

// Delay returns the wait before try n+1 after n failures (n ≥ 1):
// Base·2^(n−1), at most Max, less a random part of up to a fifth so that
// clients that failed together do not return together.
func (r Retry) Delay(n int) time.Duration {
	d := r.Base
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	d = min(d, r.Max)
	if d > 0 {
		d -= time.Duration(rand.Int64N(int64(d)/5 + 1))
	}
	return d
}

// Limits bound what the client reads from a server.
type Limits struct {
	JSONBytes     int64 // a search or metadata answer (default 64 MiB)
	Results       int   // datasets in one search or metadata answer (default 100000)
	InstanceBytes int64 // one part of a multipart answer (default 1 GiB)
	TotalBytes    int64 // one multipart answer, all parts (default 4 GiB)
	Parts         int   // parts of one multipart answer (default 10000)
}

// DefaultLimits are the client's limits unless WithLimits sets others.
var DefaultLimits = Limits{JSONBytes: 64 << 20, Results: 100000, InstanceBytes: 1 << 30, TotalBytes: 4 << 30, Parts: 10000}

// Timeouts bound each attempt of a request in time, whatever HTTP client
// carries it. An attempt cut off by one fails as an outage
// (ErrUnavailable).
type Timeouts struct {
	// Header runs from the request's start (the upload of its body
	// included) to the answer's headers (default 30 s).
	Header time.Duration
	// Body runs from the answer's headers to the end of its body (default
	// 10 min).
	Body time.Duration
	// Stall cuts off an answer whose body brings less than StallBytes in
	// any window this long (default 30 s): a server trickling its answer
	// is given up on long before Body.
	Stall time.Duration
	// Progress: an answer still coming after this long is logged (at
	// Info, "dicomweb: slow answer", with the bytes so far), and again at
	// each such interval (default 10 s).
	Progress time.Duration
}

// StallBytes is the least an answer's body must bring in each window of
// Timeouts.Stall.
const StallBytes = 1024

// DefaultTimeouts are the client's timeouts unless WithTimeouts sets
// others.
var DefaultTimeouts = Timeouts{Header: 30 * time.Second, Body: 10 * time.Minute, Stall: 30 * time.Second, Progress: 10 * time.Second}

// maxRedirects bounds the redirects followed within the server's origin.
const maxRedirects = 5

// errorBodyBytes bounds the part of an error answer quoted in a StatusError.
const errorBodyBytes = 512

// Client talks to one DICOMweb server. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	hc       *http.Client
	auth     string // the Authorization header, or ""
	log      *slog.Logger
	retry    Retry
	limits   Limits
	timeouts Timeouts
}

// Option configures New.
type Option func(*Client) error

// WithBasicAuth sends HTTP basic authentication (RFC 7617) with every
// request.
func WithBasicAuth(user, password string) Option {
	return func(c *Client) error {
		if strings.Contains(user, ":") {
			return fmt.Errorf("%w: a basic-auth user name cannot hold a colon", ErrInput)
		}
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.SetBasicAuth(user, password)
		c.auth = r.Header.Get("Authorization")
		return nil
	}
}

// WithBearerToken sends "Authorization: Bearer token" (RFC 6750) with
// every request, as OAuth-protected servers (cloud healthcare APIs) ask.
func WithBearerToken(token string) Option {
	return func(c *Client) error {
		if token == "" || strings.ContainsAny(token, " \r\n\t") {
			return fmt.Errorf("%w: bearer token empty or holding white space", ErrInput)
		}
		c.auth = "Bearer " + token
		return nil
	}
}

// WithHTTPClient sets the HTTP client (default: one with Timeouts.Header
// for the answer's headers). The client uses a copy of it whose redirect
// policy is its own (see New); hc itself is not changed.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return fmt.Errorf("%w: nil HTTP client", ErrInput)
		}
		cp := *hc
		c.hc = &cp
		return nil
	}
}

// WithLogger logs retries, redirects, slow answers and failures
// (default: nothing is logged).
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l != nil {
			c.log = l
		}
		return nil
	}
}

// WithRetry sets how requests are retried (default DefaultRetry).
func WithRetry(r Retry) Option {
	return func(c *Client) error {
		if r.Attempts < 1 || r.Base < 0 || r.Max < r.Base {
			return fmt.Errorf("%w: retry %+v", ErrInput, r)
		}
		c.retry = r
		return nil
	}
}

// WithLimits sets the bounds on answers (default DefaultLimits); a zero
// field keeps its default.
func WithLimits(l Limits) Option {
	return func(c *Client) error {
		if l.JSONBytes < 0 || l.Results < 0 || l.InstanceBytes < 0 || l.TotalBytes < 0 || l.Parts < 0 {
			return fmt.Errorf("%w: negative limit in %+v", ErrInput, l)
		}
		d := DefaultLimits
		c.limits = Limits{
			JSONBytes: or(l.JSONBytes, d.JSONBytes), Results: or(l.Results, d.Results),
			InstanceBytes: or(l.InstanceBytes, d.InstanceBytes), TotalBytes: or(l.TotalBytes, d.TotalBytes), Parts: or(l.Parts, d.Parts),
		}
		return nil
	}
}

// WithTimeouts sets the deadlines of each attempt (default
// DefaultTimeouts); a zero field keeps its default.
func WithTimeouts(t Timeouts) Option {
	return func(c *Client) error {
		if t.Header < 0 || t.Body < 0 || t.Stall < 0 || t.Progress < 0 {
			return fmt.Errorf("%w: negative timeout in %+v", ErrInput, t)
		}
		d := DefaultTimeouts
		c.timeouts = Timeouts{Header: or(t.Header, d.Header), Body: or(t.Body, d.Body), Stall: or(t.Stall, d.Stall), Progress: or(t.Progress, d.Progress)}
		return nil
	}
}

func or[T int | int64 | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// New returns a client of the DICOMweb service rooted at baseURL (http
// or https), e.g. "http://127.0.0.1:8042/dicom-web". Credentials in the
// URL (user:password@) are sent as basic authentication.
//
// The client follows a redirect only within the root's origin (the same
// scheme, host and port), at most 5 in a row, and logs each it follows;
// a redirect elsewhere (http from https, another host or port) is not
// followed: nothing more is sent — neither the credentials nor the
// request's body — and the request fails with ErrRedirect.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL of a DICOMweb root", ErrInput, redact(baseURL))
	}
	c := &Client{base: u, retry: DefaultRetry, limits: DefaultLimits, timeouts: DefaultTimeouts, log: slog.New(slog.DiscardHandler)}
	if u.User != nil {
		p, _ := u.User.Password()
		if err := WithBasicAuth(u.User.Username(), p)(c); err != nil {
			return nil, err
		}
		u.User = nil
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = c.timeouts.Header
		c.hc = &http.Client{Transport: tr}
	}
	c.hc.CheckRedirect = c.checkRedirect // on the client's own copy
	return c, nil
}

// URL returns the service root the client talks to, without credentials.
func (c *Client) URL() string { return c.base.String() }

func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return truncate(u.Redacted(), 256)
	}
	return "(unparsable URL)"
}

// origin returns the scheme, host and port of u, the port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// checkRedirect is the HTTP client's redirect policy: within the root's
// origin only, at most maxRedirects.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	from := via[len(via)-1].URL
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	if origin(req.URL) != origin(c.base) {
		return fmt.Errorf("%w: %s %s answered %d to %s, another origin than %s", ErrRedirect, via[0].Method, redact(from.String()), status,
			redact(req.URL.String()), origin(c.base))
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("%w: more than %d redirects from %s %s", ErrRedirect, maxRedirects, via[0].Method, redact(via[0].URL.String()))
	}
	c.log.LogAttrs(req.Context(), slog.LevelWarn, "dicomweb: following a redirect", slog.String("method", req.Method),
		slog.String("from", redact(from.String())), slog.String("to", redact(req.URL.String())), slog.Int("status", status))
	return nil
}

// endpoint joins path segments (each escaped) to the root and adds the
// query.
func (c *Client) endpoint(q url.Values, segments ...string) string {
	u := *c.base
	p := u.Path
	for _, s := range segments {
		p += "/" + url.PathEscape(s)
	}
	u.Path, u.RawPath = "", ""
	u.Opaque = ""
	s := u.String() + p
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// request is one HTTP exchange the client may repeat.
type request struct {
	method, url string
	header      http.Header
	body        []byte // sent again on each attempt
}

// do sends req, retrying connection errors, passed deadlines and 408,
// 429 and 5xx answers, and returns the first answer that is 2xx, which
// the caller must close (its body bounded by Timeouts.Body). Any other
// final answer is a *StatusError (wrapped with ErrUnavailable when it is
// temporary); a redirect not followed is an ErrRedirect error, at once.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	var last error
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, req)
		if err == nil && resp.StatusCode/100 == 2 {
			return resp, nil
		}
		wait := time.Duration(0)
		switch {
		case err == nil:
			serr := statusError(req, resp, time.Now())
			if !serr.Temporary() {
				return nil, serr
			}
			last = serr
			if serr.RetryAfter > c.retry.Max {
				return nil, fmt.Errorf("%w: %s %s: the server asks for a wait of %s: %w", ErrUnavailable, req.method, req.url, serr.RetryAfter, serr)
			}
			wait = serr.RetryAfter
		case ctx.Err() != nil:
			return nil, fmt.Errorf("dicomweb: %s %s: %w", req.method, req.url, ctx.Err())
		case errors.Is(err, ErrRedirect) || errors.Is(err, ErrInput):
			return nil, err
		default:
			last = err
		}
		if attempt >= c.retry.Attempts {
			return nil, fmt.Errorf("%w: %s %s, %d attempts: %w", ErrUnavailable, req.method, req.url, attempt, last)
		}
		wait = max(wait, c.retry.Delay(attempt))
		c.log.LogAttrs(ctx, slog.LevelWarn, "dicomweb: retrying", slog.String("method", req.method), slog.String("url", req.url),
			slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", last.Error()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dicomweb: %s %s: %w (after: %w)", req.method, req.url, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// deadlineError is an attempt cut off by one of the Timeouts.
type deadlineError struct {
	what string // "headers", "body" or "stall"
	d    time.Duration
	n    int64 // for a stall, the bytes of its window
}

func (e *deadlineError) Error() string {
	if e.what == "stall" {
		return fmt.Sprintf("the answer's body stalled: %d bytes in %s", e.n, e.d)
	}
	return fmt.Sprintf("no answer's %s within %s", e.what, e.d)
}
func (e *deadlineError) Timeout() bool { return true }

// once sends req once, within Timeouts.Header; the answer's body is cut
// off after Timeouts.Body.
func (c *Client) once(ctx context.Context, req request) (*http.Response, error) {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	actx, cancel := context.WithCancelCause(ctx)
	r, err := http.NewRequestWithContext(actx, req.method, req.url, body)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	for k, v := range req.header {
		r.Header[k] = v
	}
	if c.auth != "" {
		r.Header.Set("Authorization", c.auth)
	}
	t := &transfer{c: c, req: req, ctx: actx, cancel: cancel, start: time.Now()}
	t.deadline = time.AfterFunc(c.timeouts.Header, func() { cancel(&deadlineError{what: "headers", d: c.timeouts.Header}) })
	t.mu.Lock()
	t.progress = time.AfterFunc(c.timeouts.Progress, t.slow)
	t.mu.Unlock()
	resp, err := c.hc.Do(r)
	if err != nil {
		t.stop()
		if de, ok := context.Cause(actx).(*deadlineError); ok && ctx.Err() == nil {
			return nil, fmt.Errorf("dicomweb: %s %s: %w", req.method, req.url, de)
		}
		if ue, ok := errors.AsType[*url.Error](err); ok && errors.Is(err, ErrRedirect) {
			return nil, ue.Err // the policy's own message, without url.Error's restatement
		}
		return nil, err
	}
	t.deadline.Stop()
	t.mu.Lock()
	t.inBody = true
	t.mu.Unlock()
	t.deadline = time.AfterFunc(c.timeouts.Body, func() { cancel(&deadlineError{what: "body", d: c.timeouts.Body}) })
	t.mu.Lock()
	t.stall = time.AfterFunc(c.timeouts.Stall, t.stalled)
	t.mu.Unlock()
	t.rc = resp.Body
	resp.Body = t
	return resp, nil
}

// transfer is one attempt's answer body: it counts the bytes read, logs
// a slow answer, and is cut off by the body's deadline.
type transfer struct {
	c        *Client
	req      request
	ctx      context.Context
	cancel   context.CancelCauseFunc
	start    time.Time
	deadline *time.Timer
	rc       io.ReadCloser

	mu       sync.Mutex
	progress *time.Timer
	stall    *time.Timer
	inBody   bool
	done     bool
	n        int64
	window   int64 // n at the start of the stall window
}

func (t *transfer) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	t.mu.Lock()
	t.n += int64(n)
	read := t.n
	if errors.Is(err, io.EOF) && !t.done { // the whole body is in: nothing left to time
		t.done = true
		t.progress.Stop()
		t.stall.Stop()
		t.deadline.Stop()
	}
	t.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) {
		if de, ok := context.Cause(t.ctx).(*deadlineError); ok {
			err = fmt.Errorf("%w after %d bytes", de, read)
		}
	}
	return n, err
}

// Close stops the timers and releases the attempt.
func (t *transfer) Close() error {
	t.stop()
	return t.rc.Close()
}

func (t *transfer) stop() {
	t.mu.Lock()
	t.done = true
	t.progress.Stop()
	if t.stall != nil {
		t.stall.Stop()
	}
	t.mu.Unlock()
	t.deadline.Stop()
	t.cancel(context.Canceled)
}

// stalled cuts the answer off when its window brought less than
// StallBytes, and otherwise opens the next window.
func (t *transfer) stalled() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	if got := t.n - t.window; got < StallBytes {
		t.cancel(&deadlineError{what: "stall", d: t.c.timeouts.Stall, n: got})
		return
	}
	t.window = t.n
	t.stall.Reset(t.c.timeouts.Stall)
}

// slow logs an answer still coming, and arms itself again.
func (t *transfer) slow() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	phase := "headers"
	if t.inBody {
		phase = "body"
	}
	t.c.log.LogAttrs(t.ctx, slog.LevelInfo, "dicomweb: slow answer", slog.String("method", t.req.method), slog.String("url", t.req.url),
		slog.String("waiting_for", phase), slog.Int64("bytes", t.n), slog.Duration("elapsed", time.Since(t.start).Round(time.Millisecond)))
	t.progress.Reset(t.c.timeouts.Progress)
}

// statusError reads the start of a failed answer and closes it.
func statusError(req request, resp *http.Response, now time.Time) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	msg := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, string(b))
	ra, _ := parseRetryAfter(resp.Header.Get("Retry-After"), now)
	return &StatusError{Method: req.method, URL: req.url, StatusCode: resp.StatusCode, Status: truncate(resp.Status, 64),
		Body: strings.Join(strings.Fields(msg), " "), RetryAfter: ra}
}

// parseRetryAfter reads a Retry-After header (RFC 9110 10.2.3): a number
// of seconds or an HTTP-date, clamped to [0, MaxRetryAfter]; ok is false
// when there is none or it is neither.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true // past any sane wait, 2^63−1 among them
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}
