package dicomweb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var fastRetry = WithRetry(Retry{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond})

const studyJSON = `[{"0020000D":{"vr":"UI","Value":["1.2.3"]},"00100010":{"vr":"PN","Value":[{"Alphabetic":"Doe^Jane"}]},
"00201208":{"vr":"IS","Value":[2]},"00080061":{"vr":"CS","Value":["CR","SR"]}}]`

// TestAuthHeaders: basic and bearer authentication reach the server, and
// credentials in the URL become basic authentication.
func TestAuthHeaders(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/dicom+json")
		io.WriteString(w, "[]")
	}))
	defer srv.Close()
	for _, c := range []struct {
		url  string
		opt  Option
		want string
	}{
		{srv.URL, WithBasicAuth("u", "p"), "Basic dTpw"},
		{srv.URL, WithBearerToken("tok"), "Bearer tok"},
		{strings.Replace(srv.URL, "http://", "http://u:p@", 1), nil, "Basic dTpw"},
	} {
		opts := []Option{}
		if c.opt != nil {
			opts = append(opts, c.opt)
		}
		cl, err := New(c.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cl.URL(), "u:p") {
			t.Errorf("URL() keeps the credentials: %s", cl.URL())
		}
		if _, err := cl.SearchStudies(context.Background(), Query{}); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Authorization %q, want %q", got, c.want)
		}
	}
}

// TestSearchQuery: a study search sends the query parameters PS3.18 names
// and reads the DICOM JSON answer.
func TestSearchQuery(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Path + "?" + r.URL.RawQuery
		if r.Header.Get("Accept") != "application/dicom+json" {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		io.WriteString(w, studyJSON)
	}))
	defer srv.Close()
	cl, _ := New(srv.URL + "/dicom-web/")
	ds, err := cl.SearchStudies(context.Background(), Query{Modalities: []string{"CR", "DX"}, From: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
		Fields: []string{"00081030"}, Limit: 10, Offset: 20})
	if err != nil {
		t.Fatal(err)
	}
	want := "/dicom-web/studies?ModalitiesInStudy=CR%2CDX&StudyDate=20240102-&includefield=00081030&limit=10&offset=20"
	if query != want {
		t.Errorf("query\n%s, want\n%s", query, want)
	}
	if len(ds) != 1 || ds[0].String(TagStudyInstanceUID) != "1.2.3" || ds[0].String(0x00100010) != "Doe^Jane" {
		t.Fatalf("%+v", ds)
	}
	if n, ok := ds[0].Int(TagNumberOfStudyInstances); !ok || n != 2 {
		t.Errorf("instances %d %v", n, ok)
	}
	if m := ds[0].Strings(TagModalitiesInStudy); len(m) != 2 || m[1] != "SR" {
		t.Errorf("modalities %v", m)
	}
	if _, err := cl.SearchSeries(context.Background(), "1.2.x", Query{}); !errors.Is(err, ErrInput) {
		t.Errorf("bad UID: %v", err)
	}
}

// TestRetries: 5xx answers and dropped connections are retried; a 4xx
// answer is not, and its error names the request and the status; when
// the attempts run out the error wraps ErrUnavailable.
func TestRetries(t *testing.T) {
	var calls atomic.Int32
	fail := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch {
		case strings.Contains(r.URL.Path, "missing"):
			http.Error(w, "no such study\x00here", http.StatusNotFound)
		case fail.Add(-1) >= 0:
			if r.URL.Query().Get("drop") != "" {
				hj, _ := w.(http.Hijacker)
				c, _, _ := hj.Hijack()
				c.Close()
				return
			}
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "[]")
		}
	}))
	defer srv.Close()
	cl, _ := New(srv.URL, fastRetry)
	ctx := context.Background()

	fail.Store(2)
	if _, err := cl.SearchStudies(ctx, Query{}); err != nil || calls.Load() != 3 {
		t.Errorf("two 503 then success: %v after %d calls", err, calls.Load())
	}
	calls.Store(0)
	fail.Store(2)
	if _, err := cl.SearchStudies(ctx, Query{Extra: map[string][]string{"drop": {"1"}}}); err != nil || calls.Load() != 3 {
		t.Errorf("two dropped connections then success: %v after %d calls", err, calls.Load())
	}
	calls.Store(0)
	fail.Store(5)
	_, err := cl.SearchStudies(ctx, Query{})
	var se *StatusError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.StatusCode != 503 || calls.Load() != 3 {
		t.Errorf("503 throughout: %v after %d calls", err, calls.Load())
	}
	// A 4xx answer is final.
	missing, _ := New(srv.URL+"/missing", fastRetry)
	calls.Store(0)
	_, err = missing.SearchStudies(ctx, Query{PatientID: "P1"})
	if !errors.As(err, &se) || se.StatusCode != 404 || errors.Is(err, ErrUnavailable) || calls.Load() != 1 {
		t.Fatalf("404: %v after %d calls", err, calls.Load())
	}
	if msg := err.Error(); !strings.Contains(msg, "GET "+srv.URL+"/missing/studies?PatientID=P1") || !strings.Contains(msg, "404 Not Found: no such study here") {
		t.Errorf("error %q does not name the request and status", msg)
	}
}

// TestConnectionRefused: a server that is down gives ErrUnavailable after
// the attempts, and a cancelled context stops the waiting at once.
func TestConnectionRefused(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	cl, _ := New("http://"+addr, fastRetry)
	if _, err := cl.SearchStudies(context.Background(), Query{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("refused: %v", err)
	}
	slow, _ := New("http://"+addr, WithRetry(Retry{Attempts: 100, Base: time.Hour, Max: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := slow.SearchStudies(ctx, Query{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestLimits: answers over the client's limits are refused with ErrLimit.
func TestLimits(t *testing.T) {
	big := "[" + strings.Repeat(`{},`, 50) + "{}]"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/metadata") {
			io.WriteString(w, big)
			return
		}
		var body bytes.Buffer
		ct, _ := WriteMultipart(&body, "b0undary", "application/dicom", bytes.Repeat([]byte{1}, 300), []byte("x"))
		w.Header().Set("Content-Type", ct)
		w.Write(body.Bytes())
	}))
	defer srv.Close()
	ctx := context.Background()
	cl, _ := New(srv.URL, WithLimits(Limits{Results: 10}))
	if _, err := cl.Metadata(ctx, "1.2", "", ""); !errors.Is(err, ErrLimit) {
		t.Errorf("51 datasets, limit 10: %v", err)
	}
	cl, _ = New(srv.URL, WithLimits(Limits{JSONBytes: 100}))
	if _, err := cl.Metadata(ctx, "1.2", "", ""); !errors.Is(err, ErrLimit) {
		t.Errorf("JSON over 100 bytes: %v", err)
	}
	for _, c := range []struct {
		lim  Limits
		want error
	}{{Limits{InstanceBytes: 299}, ErrLimit}, {Limits{InstanceBytes: 300}, nil}, {Limits{Parts: 1}, ErrLimit}, {Limits{TotalBytes: 200}, ErrLimit}} {
		cl, _ = New(srv.URL, WithLimits(c.lim))
		var sizes []int
		err := cl.Retrieve(ctx, "1.2", "", "", func(p Part) error {
			b, err := io.ReadAll(p.Body)
			sizes = append(sizes, len(b))
			return err
		})
		if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Errorf("%+v: %v, want %v", c.lim, err, c.want)
		}
		if c.want == nil && fmt.Sprint(sizes) != "[300 1]" {
			t.Errorf("parts %v", sizes)
		}
	}
}

// TestStoreAnswer: a STOW-RS answer's stored and failed instances are
// read; a failed instance is an error, final for its reason (0xC122).
func TestStoreAnswer(t *testing.T) {
	answer := `{"00081199":{"vr":"SQ","Value":[{"00081150":{"vr":"UI","Value":["1.2.840.10008.5.1.4.1.1.88.11"]},"00081155":{"vr":"UI","Value":["1.2.3.4"]}}]},
"00081198":{"vr":"SQ","Value":[{"00081155":{"vr":"UI","Value":["1.2.3.5"]},"00081197":{"vr":"US","Value":[49442]}}]}}`
	var ctype string
	var parts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		ReadMultipart(ctype, r.Body, PartLimits{10, 1 << 20, 1 << 20}, func(Part) error { parts++; return nil })
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	cl, _ := New(srv.URL)
	res, err := cl.Store(context.Background(), "1.2.3", part10("1.2.3.4"), part10("1.2.3.5"))
	var serr *StoreError
	if !errors.As(err, &serr) || !errors.Is(err, ErrNotStored) || !strings.Contains(err.Error(), "1 instances failed, first 1.2.3.5 (reason 0xC122)") ||
		len(serr.Missing) != 0 || serr.Temporary() {
		t.Errorf("error %v", err)
	}
	if res == nil || len(res.Stored) != 1 || res.Stored[0].InstanceUID != "1.2.3.4" || len(res.Failed) != 1 || res.Failed[0].Reason != 0xC122 {
		t.Errorf("result %+v", res)
	}
	if !strings.HasPrefix(ctype, `multipart/related; boundary=radgen-`) || !strings.Contains(ctype, `type="application/dicom"`) || parts != 2 {
		t.Errorf("Content-Type %q, %d parts", ctype, parts)
	}
}

// TestLongBoundary: a boundary longer than RFC 2046's 70 characters, as
// Orthanc 1.10's STOW-RS client sends (two UUIDs joined by a hyphen), is
// read; one past maxBoundary is refused.
func TestLongBoundary(t *testing.T) {
	for _, c := range []struct {
		boundary string
		ok       bool
	}{
		{"474aceb5-7dd7-4ec8-b7a8-241cbbba08dd-474aceb5-7dd7-4ec8-b7a8-241cbbba08dd", true},
		{strings.Repeat("b", maxBoundary), true},
		{strings.Repeat("b", maxBoundary+1), false},
	} {
		// Go's multipart writer keeps to RFC 2046's 70: write it by hand.
		body := bytes.NewBufferString(fmt.Sprintf("--%[1]s\r\nContent-Type: application/dicom\r\n\r\none\r\n--%[1]s\r\n\r\ntwo\r\n--%[1]s--\r\n", c.boundary))
		ct := `multipart/related; type="application/dicom"; boundary="` + c.boundary + `"`
		var parts []string
		err := ReadMultipart(ct, body, PartLimits{Parts: 4, PartBytes: 16, TotalBytes: 4096}, func(p Part) error {
			b, err := io.ReadAll(p.Body)
			parts = append(parts, string(b))
			return err
		})
		switch {
		case c.ok && (err != nil || strings.Join(parts, ",") != "one,two"):
			t.Errorf("boundary of %d: %v %q", len(c.boundary), err, parts)
		case !c.ok && !errors.Is(err, ErrMalformed):
			t.Errorf("boundary of %d: %v", len(c.boundary), err)
		}
	}
}

// part10 returns a minimal DICOM Part 10 file of the given SOP Instance
// UID: preamble, file meta group, and a dataset of that UID.
func part10(sop string) []byte {
	el := func(dst []byte, tag uint32, vr string, v []byte) []byte {
		if len(v)%2 == 1 {
			v = append(v, 0)
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(tag>>16))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(tag))
		dst = append(dst, vr...)
		if vr == "OB" {
			dst = append(dst, 0, 0)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
		} else {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(v)))
		}
		return append(dst, v...)
	}
	var meta []byte
	meta = el(meta, 0x00020001, "OB", []byte{0, 1})
	meta = el(meta, 0x00020002, "UI", []byte("1.2.840.10008.5.1.4.1.1.88.11"))
	meta = el(meta, 0x00020003, "UI", []byte(sop))
	meta = el(meta, 0x00020010, "UI", []byte("1.2.840.10008.1.2.1"))
	out := append(make([]byte, 128), "DICM"...)
	out = el(out, 0x00020000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(len(meta))))
	out = append(out, meta...)
	return el(out, 0x00080018, "UI", []byte(sop))
}
