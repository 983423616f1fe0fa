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
	"time"
	"unicode/utf8"
)

// Errors the client wraps.
var (
	// ErrUnavailable: the server could not be reached, or answered 5xx,
	// on every attempt the Retry allowed. The outage may pass.
	ErrUnavailable = errors.New("dicomweb: server unavailable")
	// ErrLimit: an answer exceeded one of the client's Limits.
	ErrLimit = errors.New("dicomweb: answer over the client's limit")
	// ErrMalformed: an answer is not what its Content-Type says.
	ErrMalformed = errors.New("dicomweb: malformed answer")
	// ErrInput: the caller's arguments cannot make a request (an empty
	// UID, a URL that is not one).
	ErrInput = errors.New("dicomweb: bad input")
)

// StatusError is a final answer that is not a success: any 4xx (never
// retried: the request is wrong for the server) and the last 5xx when
// the attempts ran out (then it is wrapped with ErrUnavailable).
type StatusError struct {
	Method     string
	URL        string // without credentials
	StatusCode int
	Status     string // e.g. "404 Not Found"
	Body       string // the start of the server's message, printable
}

// Error names the request and the answer's status, and quotes the start of
// the server's message.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("dicomweb: %s %s: %s", e.Method, e.URL, e.Status)
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Retry says how often and how patiently a request is retried after a
// connection error or a 5xx answer.
type Retry struct {
	Attempts int           // tries in all, at least 1
	Base     time.Duration // the wait after the first failure; it doubles each time
	Max      time.Duration // the longest wait (also for a Retry-After header)
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

// errorBodyBytes bounds the part of an error answer quoted in a StatusError.
const errorBodyBytes = 512

// Client talks to one DICOMweb server. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	hc     *http.Client
	auth   string // the Authorization header, or ""
	log    *slog.Logger
	retry  Retry
	limits Limits
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

// WithHTTPClient sets the HTTP client (default: one with a 30 s timeout
// for connecting and for the answer's headers, none for its body, which
// the context bounds).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return fmt.Errorf("%w: nil HTTP client", ErrInput)
		}
		c.hc = hc
		return nil
	}
}

// WithLogger logs retries and failures (default: nothing is logged).
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

func or[T int | int64](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// New returns a client of the DICOMweb service rooted at baseURL (http
// or https), e.g. "http://127.0.0.1:8042/dicom-web". Credentials in the
// URL (user:password@) are sent as basic authentication.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL of a DICOMweb root", ErrInput, redact(baseURL))
	}
	c := &Client{base: u, retry: DefaultRetry, limits: DefaultLimits, log: slog.New(slog.DiscardHandler)}
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
		tr.ResponseHeaderTimeout = 30 * time.Second
		c.hc = &http.Client{Transport: tr}
	}
	return c, nil
}

// URL returns the service root the client talks to, without credentials.
func (c *Client) URL() string { return c.base.String() }

func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
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

// do sends req, retrying connection errors and 5xx answers, and returns
// the first answer that is 2xx, which the caller must close. Any other
// final answer is a *StatusError (wrapped with ErrUnavailable for 5xx).
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	var last error
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, req)
		if err == nil && resp.StatusCode/100 == 2 {
			return resp, nil
		}
		wait := time.Duration(0)
		if err == nil {
			serr := statusError(req, resp)
			if resp.StatusCode < 500 {
				return nil, serr
			}
			last = serr
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s >= 0 {
				wait = min(time.Duration(s)*time.Second, c.retry.Max)
			}
		} else {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("dicomweb: %s %s: %w", req.method, req.url, ctx.Err())
			}
			last = err
		}
		if attempt >= c.retry.Attempts {
			return nil, fmt.Errorf("%w: %s %s, %d attempts: %w", ErrUnavailable, req.method, req.url, attempt, last)
		}
		if wait == 0 {
			wait = c.retry.Delay(attempt)
		}
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

// once sends req once.
func (c *Client) once(ctx context.Context, req request) (*http.Response, error) {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	r, err := http.NewRequestWithContext(ctx, req.method, req.url, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	for k, v := range req.header {
		r.Header[k] = v
	}
	if c.auth != "" {
		r.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(r)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// statusError reads the start of a failed answer and closes it.
func statusError(req request, resp *http.Response) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	msg := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, string(b))
	return &StatusError{Method: req.method, URL: req.url, StatusCode: resp.StatusCode, Status: resp.Status, Body: strings.Join(strings.Fields(msg), " ")}
}
