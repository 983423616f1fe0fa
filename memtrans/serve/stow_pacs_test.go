package serve

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/vision"
)

// fakePACS is a STOW-RS endpoint on loopback that keeps the instances
// posted to it by SOP Instance UID (as a PACS keeps an instance stored
// twice once) and answers each POST as answer says.
type fakePACS struct {
	*httptest.Server
	mu     sync.Mutex
	kept   map[string][]byte // SOP Instance UID → the instance
	posts  int
	answer func(w http.ResponseWriter, post int, class, sop string) // sop: the first instance posted
}

func newFakePACS(t *testing.T, answer func(w http.ResponseWriter, post int, class, sop string)) *fakePACS {
	p := &fakePACS{kept: map[string][]byte{}, answer: answer}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/studies/"+pacsStudy) {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		var class, sop string
		var got [][]byte
		err := dicomweb.ReadMultipart(r.Header.Get("Content-Type"), r.Body, dicomweb.PartLimits{Parts: 4, PartBytes: 1 << 20, TotalBytes: 1 << 20}, func(pt dicomweb.Part) error {
			b, err := io.ReadAll(pt.Body)
			got = append(got, b)
			return err
		})
		if err != nil || len(got) != 1 {
			http.Error(w, fmt.Sprint(err), http.StatusBadRequest)
			return
		}
		info, err := vision.ReadDICOMInfo(bytes.NewReader(got[0]), int64(len(got[0])))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		class, sop = info.SOPClassUID, info.SOPInstanceUID
		p.mu.Lock()
		p.posts++
		n := p.posts
		p.kept[sop] = got[0]
		p.mu.Unlock()
		p.answer(w, n, class, sop)
	}))
	t.Cleanup(p.Close)
	return p
}

// pacsStudy is the study the PACS tests push.
const pacsStudy = "1.2.826.0.1.3680043.8.498.2601"

// storeJSON is a Store Instances Response listing stored and failed as
// class/instance pairs, the failed with Failure Reason 0xC000.
func storeJSON(stored, failed [][2]string) string {
	item := func(r [2]string, reason bool) string {
		s := fmt.Sprintf(`{"00081150":{"vr":"UI","Value":[%q]},"00081155":{"vr":"UI","Value":[%q]}`, r[0], r[1])
		if reason {
			s += `,"00081197":{"vr":"US","Value":[49152]}`
		}
		return s + "}"
	}
	var seqs []string
	for _, s := range []struct {
		tag   string
		refs  [][2]string
		fails bool
	}{{"00081199", stored, false}, {"00081198", failed, true}} {
		if len(s.refs) == 0 {
			continue
		}
		var items []string
		for _, r := range s.refs {
			items = append(items, item(r, s.fails))
		}
		seqs = append(seqs, fmt.Sprintf(`%q:{"vr":"SQ","Value":[%s]}`, s.tag, strings.Join(items, ",")))
	}
	return "{" + strings.Join(seqs, ",") + "}"
}

// TestSTOWPACSAnswerChecked: with WithPACS, the push is answered as stored
// only when the PACS's Store Instances Response lists the SR (its SOP
// Instance UID) in its Referenced SOP Sequence. A 200 with an empty body,
// with an empty data set, or listing another instance, and a 202 listing
// the SR as failed, are answered 502 pacs_error with no Retrieve URL,
// logged, and counted by outcome in radgen_pacs_stores_total.
func TestSTOWPACSAnswerChecked(t *testing.T) {
	pa, ll := films(pacsStudy)
	for _, c := range []struct {
		name    string
		status  int
		body    func(class, sop string) string
		outcome string
		message string
	}{
		{"200, empty body", 200, func(_, _ string) string { return "" }, "unconfirmed", "without confirming"},
		{"200, empty data set", 200, func(_, _ string) string { return "{}" }, "unconfirmed", "without confirming"},
		{"200, another instance", 200, func(class, _ string) string { return storeJSON([][2]string{{class, "1.2.3.4"}}, nil) }, "unconfirmed", "without confirming"},
		{"202, the SR failed", 202, func(class, sop string) string { return storeJSON(nil, [][2]string{{class, sop}}) }, "refused", "0xC000"},
		{"200, the SR both stored and failed", 200, func(class, sop string) string { return storeJSON([][2]string{{class, sop}}, [][2]string{{class, sop}}) }, "refused", "0xC000"},
		{"200, the SR stored", 200, func(class, sop string) string {
			return storeJSON([][2]string{{class, sop}}, nil)
		}, "stored", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pacs := newFakePACS(t, func(w http.ResponseWriter, _ int, class, sop string) {
				w.Header().Set("Content-Type", "application/dicom+json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body(class, sop))
			})
			cl, err := dicomweb.New(pacs.URL+"/dicom-web", dicomweb.WithRetry(dicomweb.Retry{Attempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			var logs testutil.SyncBuffer
			h := newHandler(t, WithPACS(cl), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			srv := server(t, h)
			resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies/"+pacsStudy+"?max_length=6", nil, dicomPart(pa), dicomPart(ll))
			series, instance := dicomsr.StudyUIDs(pacsStudy, dicomsr.Model{Name: h.info.Name, Checksum: h.info.Checksum})
			if c.outcome == "stored" {
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				a := decodeStore(t, resp, b)
				want := pacs.URL + "/dicom-web/studies/" + pacsStudy
				if a.retrieveURL != want || a.srURL != want+"/series/"+series+"/instances/"+instance {
					t.Errorf("Retrieve URLs %q, %q", a.retrieveURL, a.srURL)
				}
				if !strings.Contains(logs.String(), "stored=true") {
					t.Errorf("the report's log line does not say stored:\n%s", logs.String())
				}
			} else {
				if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				e := decodeError(t, b)
				if e.Error.Code != CodePACS || !strings.Contains(e.Error.Message, c.message) {
					t.Errorf("%+v", e)
				}
				if bytes.Contains(b, []byte(pacs.URL)) || bytes.Contains(b, []byte("00081190")) {
					t.Errorf("a failed store's answer names the PACS: %s", b)
				}
				l := logs.String()
				if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "sr="+instance) || strings.Contains(l, "stored=true") {
					t.Errorf("log:\n%s", l)
				}
			}
			for _, o := range pacsOutcomes {
				want := 0.0
				if o == c.outcome {
					want = 1
				}
				if got := metricValue(t, h, `radgen_pacs_stores_total{outcome="`+o+`"}`); got != want {
					t.Errorf("radgen_pacs_stores_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
			pacs.mu.Lock()
			if pacs.posts != 1 {
				t.Errorf("%d posts to the PACS", pacs.posts)
			}
			pacs.mu.Unlock()
		})
	}
	// Without WithPACS there is no such metric.
	var b strings.Builder
	newHandler(t).m.write(&b)
	if strings.Contains(b.String(), "radgen_pacs_stores_total") {
		t.Error("radgen_pacs_stores_total without a PACS")
	}
}

// TestSTOWPACSLostAnswer: the PACS stores the SR and the answer is lost
// (the connection closes). Retried, by the client or by the pusher, the
// SR is stored again with the same SOP Instance UID, and the PACS holds
// one SR.
func TestSTOWPACSLostAnswer(t *testing.T) {
	pa, ll := films(pacsStudy)
	for _, c := range []struct {
		name     string
		attempts int // the client's tries
		pushes   int // the pusher's
		status   []int
	}{
		{"the client retries", 3, 1, []int{200}},
		{"the pusher retries", 1, 2, []int{502, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pacs := newFakePACS(t, func(w http.ResponseWriter, post int, class, sop string) {
				if post == 1 {
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close() // stored, and no answer
					}
					return
				}
				w.Header().Set("Content-Type", "application/dicom+json")
				io.WriteString(w, storeJSON([][2]string{{class, sop}}, nil))
			})
			cl, err := dicomweb.New(pacs.URL+"/dicom-web", dicomweb.WithRetry(dicomweb.Retry{Attempts: c.attempts, Base: time.Millisecond, Max: time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			h := newHandler(t, WithPACS(cl))
			srv := server(t, h)
			for i := range c.pushes {
				resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies/"+pacsStudy+"?max_length=6", nil, dicomPart(pa), dicomPart(ll))
				if resp.StatusCode != c.status[i] {
					t.Fatalf("push %d: %d %s", i+1, resp.StatusCode, b)
				}
			}
			_, instance := dicomsr.StudyUIDs(pacsStudy, dicomsr.Model{Name: h.info.Name, Checksum: h.info.Checksum})
			pacs.mu.Lock()
			defer pacs.mu.Unlock()
			if pacs.posts != 2 || len(pacs.kept) != 1 || pacs.kept[instance] == nil {
				t.Errorf("%d posts, %d instances kept (want the SR %s once)", pacs.posts, len(pacs.kept), instance)
			}
		})
	}
}
