package pacs_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/vision"
)

// fakePACS is a DICOMweb server on loopback that holds studies of one PA
// film each and behaves as a PACS should, except where its hook says
// otherwise: QIDO-RS of studies (paged by limit and offset) and of a
// study's series, WADO-RS of a series, STOW-RS of an SR. It counts the
// requests, by kind and study.
type fakePACS struct {
	t   testing.TB
	srv *httptest.Server
	URL string // the DICOMweb root

	mu           sync.Mutex
	order        []string          // studies in the order listed
	films        map[string][]byte // the study's PA film
	extra        []dicomweb.Dataset
	sr           map[string][]byte // the SR stored into the study
	srSeries     map[string]string
	stows        map[string]int // STOW-RS requests by study
	hits         map[string]int // requests by "kind study" and by kind
	paths        []string
	pageCap      int                                                                   // at most this many studies a page (0: as asked)
	ignoreOffset bool                                                                  // every page starts at the first study
	count        func(study string, n int) int                                         // the instance count listed (default n)
	hook         func(kind, study string, w http.ResponseWriter, r *http.Request) bool // true: answered
}

func newFake(t testing.TB, studies ...string) *fakePACS {
	f := &fakePACS{t: t, films: map[string][]byte{}, sr: map[string][]byte{}, srSeries: map[string]string{}, stows: map[string]int{}, hits: map[string]int{}}
	for _, s := range studies {
		f.add(s)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/dicom-web"
	return f
}

func (f *fakePACS) add(study string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.order = append(f.order, study)
	f.films[study] = orthanctest.Film{Study: study, Series: study + ".1", SOP: study + ".1.1", ViewPosition: "PA", Rows: 72, Columns: 64}.Bytes()
}

func (f *fakePACS) set(fn func(f *fakePACS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// hit returns the requests of a kind ("qido", "series", "wado", "stow"),
// for a study when given.
func (f *fakePACS) hit(kind, study string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if study == "" {
		return f.hits[kind]
	}
	return f.hits[kind+" "+study]
}

// stored returns the number of studies holding an SR, and the STOW-RS
// requests of each study.
func (f *fakePACS) stored() (n int, stows map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stows = map[string]int{}
	for k, v := range f.stows {
		stows[k] = v
	}
	return len(f.sr), stows
}

func (f *fakePACS) hasSR(study string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sr[study] != nil
}

func uidJSON(tag uint32, vr, v string) dicomweb.Attribute {
	b, _ := json.Marshal(v)
	return dicomweb.Attribute{VR: vr, Value: []json.RawMessage{b}}
}

func (f *fakePACS) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/dicom-web")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	kind, study := "other", ""
	switch {
	case r.Method == http.MethodGet && path == "/studies":
		kind = "qido"
	case r.Method == http.MethodGet && len(segs) == 3 && segs[0] == "studies" && segs[2] == "series":
		kind, study = "series", segs[1]
	case r.Method == http.MethodGet && len(segs) == 4 && segs[0] == "studies" && segs[2] == "series":
		kind, study = "wado", segs[1]
	case r.Method == http.MethodPost && len(segs) == 2 && segs[0] == "studies":
		kind, study = "stow", segs[1]
	}
	f.mu.Lock()
	f.hits[kind]++
	f.hits[kind+" "+study]++
	if len(f.paths) < 10000 {
		f.paths = append(f.paths, r.URL.Path)
	}
	hook := f.hook
	f.mu.Unlock()
	if hook != nil && hook(kind, study, w, r) {
		return
	}
	switch kind {
	case "qido":
		f.qido(w, r)
	case "series":
		f.series(w, study)
	case "wado":
		f.wado(w, study, segs[3])
	case "stow":
		f.stow(w, r, study)
	default:
		http.Error(w, "no such resource", http.StatusNotFound)
	}
}

func (f *fakePACS) qido(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	f.mu.Lock()
	var all []dicomweb.Dataset
	for _, s := range f.order {
		n := 1
		if f.count != nil {
			n = f.count(s, n)
		}
		all = append(all, dicomweb.Dataset{
			dicomweb.TagKey(dicomweb.TagStudyInstanceUID):       uidJSON(0, "UI", s),
			dicomweb.TagKey(dicomweb.TagNumberOfStudyInstances): {VR: "IS", Value: []json.RawMessage{json.RawMessage(strconv.Itoa(n))}},
		})
	}
	all = append(all, f.extra...)
	if f.ignoreOffset {
		offset = 0
	}
	if f.pageCap > 0 && (limit == 0 || limit > f.pageCap) {
		limit = f.pageCap
	}
	f.mu.Unlock()
	page := all[min(offset, len(all)):]
	if limit > 0 && len(page) > limit {
		page = page[:limit]
	}
	if page == nil {
		page = []dicomweb.Dataset{}
	}
	w.Header().Set("Content-Type", "application/dicom+json")
	json.NewEncoder(w).Encode(page)
}

func (f *fakePACS) series(w http.ResponseWriter, study string) {
	f.mu.Lock()
	film, sr := f.films[study], f.srSeries[study]
	f.mu.Unlock()
	if film == nil {
		http.Error(w, "no such study", http.StatusNotFound)
		return
	}
	list := []dicomweb.Dataset{{dicomweb.TagKey(dicomweb.TagSeriesInstanceUID): uidJSON(0, "UI", study+".1"), dicomweb.TagKey(dicomweb.TagModality): uidJSON(0, "CS", "DX")}}
	if sr != "" {
		list = append(list, dicomweb.Dataset{dicomweb.TagKey(dicomweb.TagSeriesInstanceUID): uidJSON(0, "UI", sr), dicomweb.TagKey(dicomweb.TagModality): uidJSON(0, "CS", "SR")})
	}
	w.Header().Set("Content-Type", "application/dicom+json")
	json.NewEncoder(w).Encode(list)
}

func (f *fakePACS) wado(w http.ResponseWriter, study, series string) {
	f.mu.Lock()
	film := f.films[study]
	f.mu.Unlock()
	if film == nil || series != study+".1" {
		http.Error(w, "no such series", http.StatusNotFound)
		return
	}
	var body bytes.Buffer
	ct, _ := dicomweb.WriteMultipart(&body, dicomweb.NewBoundary(), "application/dicom", film)
	w.Header().Set("Content-Type", ct)
	w.Write(body.Bytes())
}

// stow keeps the SR sent and answers its Store Instances Response.
func (f *fakePACS) stow(w http.ResponseWriter, r *http.Request, study string) {
	var sop string
	err := dicomweb.ReadMultipart(r.Header.Get("Content-Type"), r.Body, dicomweb.PartLimits{Parts: 2, PartBytes: 1 << 20, TotalBytes: 1 << 20}, func(p dicomweb.Part) error {
		b, err := io.ReadAll(p.Body)
		if err != nil {
			return err
		}
		info, err := vision.ReadDICOMInfo(bytes.NewReader(b), int64(len(b)))
		if err != nil || info.StudyInstanceUID != study {
			return fmt.Errorf("not an instance of %s: %v", study, err)
		}
		f.mu.Lock()
		f.stows[study]++
		f.sr[study], f.srSeries[study] = b, info.SeriesInstanceUID
		f.mu.Unlock()
		sop = info.SOPInstanceUID
		return nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/dicom+json")
	fmt.Fprintf(w, `{"00081199":{"vr":"SQ","Value":[{"00081150":{"vr":"UI","Value":["1.2.840.10008.5.1.4.1.1.88.11"]},"00081155":{"vr":"UI","Value":[%q]}}]}}`, sop)
}

// ris is an MLLP receiver on loopback whose answer to the n-th message
// (from 1) is ack(n, msg): an acknowledgement code, or "" to close the
// connection without one.
type ris struct {
	ln  net.Listener
	mu  sync.Mutex
	got [][]byte
	ack func(n int, msg []byte) string
}

func newRIS(t testing.TB, ack func(n int, msg []byte) string) *ris {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &ris{ln: ln, ack: ack}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(time.Minute))
			msg, err := hl7.ReadFrame(bufio.NewReader(c), 1<<20)
			if err == nil {
				l.mu.Lock()
				l.got = append(l.got, msg)
				code := l.ack(len(l.got), msg)
				l.mu.Unlock()
				if code != "" {
					a, _ := hl7.NewACK(msg, code, "said "+code, time.Now())
					hl7.WriteFrame(c, a)
				}
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return l
}

func (l *ris) addr() string { return l.ln.Addr().String() }

// messages returns the studies of the messages received, in order.
func (l *ris) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.got {
		m, err := hl7.ParseMessage(b)
		if err != nil {
			out = append(out, "?")
			continue
		}
		out = append(out, m.Component(m.Field("ZDS", 1), 1)+" "+m.Field("MSH", 10))
	}
	return out
}
