package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// instPart is one part of a STOW-RS body.
type instPart struct {
	ctype string // "" for application/dicom
	body  []byte
}

func dicomPart(b []byte) instPart { return instPart{body: b} }

// stowBody encodes parts as multipart/related; it returns the body and
// its Content-Type.
func stowBody(tb testing.TB, parts ...instPart) (*bytes.Buffer, string) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		ct := p.ctype
		if ct == "" {
			ct = "application/dicom"
		}
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {ct}})
		if err != nil {
			tb.Fatal(err)
		}
		pw.Write(p.body)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return &b, `multipart/related; type="application/dicom"; boundary=` + w.Boundary()
}

// stow posts parts to url; hdr may set Accept or replace Content-Type.
func stow(tb testing.TB, client *http.Client, url string, hdr http.Header, parts ...instPart) (*http.Response, []byte) {
	tb.Helper()
	body, ct := stowBody(tb, parts...)
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	for k, v := range hdr {
		if k == "X-Test-Chunked" { // send the body without its length
			req.Body, req.ContentLength = io.NopCloser(io.MultiReader(body)), -1
			continue
		}
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}

// films returns a two-view study's frontal (PA) and lateral (LL) films.
func films(study string) (pa, ll []byte) {
	pa = orthanctest.Film{Study: study, Series: study + ".1", SOP: study + ".1.1", ViewPosition: "PA"}.Bytes()
	ll = orthanctest.Film{Study: study, Series: study + ".2", SOP: study + ".2.1", ViewPosition: "LL"}.Bytes()
	return pa, ll
}

// storeAnswer is a decoded Store Instances Response.
type storeAnswer struct {
	retrieveURL    string
	stored, failed []dicomweb.SOPRef
	sr             []byte
	fhir           fhir.DiagnosticReport
	text, srURL    string
}

func decodeStore(tb testing.TB, resp *http.Response, b []byte) storeAnswer {
	tb.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/dicom+json" {
		tb.Fatalf("Content-Type %q: %s", ct, b)
	}
	ds, err := dicomweb.ParseJSON(b, 1)
	if err != nil || len(ds) != 1 {
		tb.Fatalf("%v: %s", err, b)
	}
	d := ds[0]
	a := storeAnswer{retrieveURL: d.String(dicomweb.TagRetrieveURL), text: d.String(TagReportText), srURL: d.String(TagReportSRURL)}
	for _, s := range []struct {
		tag, reason uint32
		out         *[]dicomweb.SOPRef
	}{{dicomweb.TagReferencedSOPSequence, dicomweb.TagWarningReason, &a.stored}, {dicomweb.TagFailedSOPSequence, dicomweb.TagFailureReason, &a.failed}} {
		items, err := d.Items(s.tag)
		if err != nil {
			tb.Fatal(err)
		}
		for _, it := range items {
			r, _ := it.Int(s.reason)
			*s.out = append(*s.out, dicomweb.SOPRef{ClassUID: it.String(dicomweb.TagReferencedSOPClassUID), InstanceUID: it.String(dicomweb.TagReferencedSOPInstanceUID), Reason: r})
		}
	}
	if d.String(TagPrivateCreator) == PrivateCreator {
		if a.sr, err = base64.StdEncoding.DecodeString(d[dicomweb.TagKey(TagReportSR)].InlineBinary); err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal([]byte(d.String(TagReportFHIR)), &a.fhir); err != nil {
			tb.Fatalf("FHIR: %v", err)
		}
	}
	return a
}

// sopUIDs lists the instances' SOP Instance UIDs, sorted.
func sopUIDs(refs []dicomweb.SOPRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.InstanceUID)
	}
	slices.Sort(out)
	return out
}

// TestSTOW: a two-view study pushed by STOW-RS (lateral first, with a part
// that is not DICOM and an instance of another study) is answered 202
// with a Store Instances Response: the two films taken, the two others
// failed with their reasons, and the report as the SR and the FHIR
// report; the report is Generate's on the study StudiesFromDICOMDir
// reads from the same files. The SR has the UIDs dicomsr.StudyUIDs gives,
// and comes alone as multipart/related, the FHIR report alone as
// application/fhir+json, when asked for.
func TestSTOW(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t)
	srv := server(t, h)
	const study, other = "1.2.826.0.1.3680043.8.498.2001", "1.2.826.0.1.3680043.8.498.2002"
	pa, ll := films(study)
	stray, _ := films(other)

	dir := t.TempDir()
	for i, b := range [][]byte{pa, ll} {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.dcm", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	studies, err := memtrans.StudiesFromDICOMDir(context.Background(), dir, 2)
	if err != nil || len(studies) != 1 {
		t.Fatal(studies, err)
	}
	want, err := f.model.Generate(context.Background(), studies, memtrans.WithMaxLength(12))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(want[0].Text) == "" {
		t.Fatal("the fixture's model wrote an empty report: the SR needs text")
	}

	resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies?max_length=12", nil,
		dicomPart(ll), instPart{ctype: "text/plain", body: []byte("not a film")}, dicomPart(pa), dicomPart(stray))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	a := decodeStore(t, resp, b)
	if got := sopUIDs(a.stored); !slices.Equal(got, []string{study + ".1.1", study + ".2.1"}) {
		t.Errorf("stored %v", got)
	}
	if len(a.failed) != 2 || a.failed[0].Reason != 0xC000 || a.failed[0].InstanceUID != "" ||
		a.failed[1].Reason != 0xC409 || a.failed[1].InstanceUID != other+".1.1" {
		t.Errorf("failed %+v", a.failed)
	}
	if a.retrieveURL != "" || a.srURL != "" {
		t.Errorf("without a PACS, Retrieve URLs %q, %q", a.retrieveURL, a.srURL)
	}
	if a.text != want[0].Text {
		t.Errorf("text %q, Generate on StudiesFromDICOMDir's study %q", a.text, want[0].Text)
	}
	info, err := vision.ReadDICOMInfo(bytes.NewReader(a.sr), int64(len(a.sr)))
	if err != nil {
		t.Fatal(err)
	}
	series, instance := dicomsr.StudyUIDs(study, dicomsr.Model{Name: h.info.Name, Checksum: h.info.Checksum})
	if info.SOPClassUID != dicomsr.BasicTextSRStorage || info.StudyInstanceUID != study || info.SeriesInstanceUID != series ||
		info.SOPInstanceUID != instance || info.PatientID != "PID-1" {
		t.Errorf("SR %+v", info)
	}
	if !bytes.Contains(a.sr, []byte(want[0].Text)) || !bytes.Contains(a.sr, []byte(study+".1.1")) || !bytes.Contains(a.sr, []byte(study+".2.1")) {
		t.Error("the SR lacks the report or a reference to a view")
	}
	if a.fhir.ResourceType != "DiagnosticReport" || len(a.fhir.ImagingStudy) != 1 || a.fhir.ImagingStudy[0].Identifier.Value != "urn:oid:"+study ||
		!strings.Contains(a.fhir.Conclusion, want[0].Text) {
		t.Errorf("FHIR %+v", a.fhir)
	}

	// The study in the path, only its two films: 200; the SR alone.
	url := srv.URL + "/dicomweb/studies/" + study + "?max_length=12"
	resp, b = stow(t, srv.Client(), url, http.Header{"Accept": {`multipart/related; type="application/dicom"`}}, dicomPart(pa), dicomPart(ll))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var srs [][]byte
	if err := dicomweb.ReadMultipart(resp.Header.Get("Content-Type"), bytes.NewReader(b), dicomweb.PartLimits{Parts: 4, PartBytes: 1 << 20, TotalBytes: 1 << 20}, func(p dicomweb.Part) error {
		sr, err := io.ReadAll(p.Body)
		srs = append(srs, sr)
		return err
	}); err != nil || len(srs) != 1 {
		t.Fatalf("%v, %d parts", err, len(srs))
	}
	if info, err := vision.ReadDICOMInfo(bytes.NewReader(srs[0]), int64(len(srs[0]))); err != nil || info.SOPInstanceUID != instance {
		t.Errorf("the SR as multipart/related: %v %+v", err, info)
	}
	resp, b = stow(t, srv.Client(), url, http.Header{"Accept": {"application/fhir+json"}}, dicomPart(ll), dicomPart(pa))
	var dr fhir.DiagnosticReport
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/fhir+json" || json.Unmarshal(b, &dr) != nil || !strings.Contains(dr.Conclusion, want[0].Text) {
		t.Errorf("FHIR alone: %d %s", resp.StatusCode, b)
	}

	for _, m := range []struct {
		name string
		want float64
	}{
		{`radgen_requests_total{route="/dicomweb/studies",outcome="partial"}`, 1},
		{`radgen_requests_total{route="/dicomweb/studies/{study}",outcome="ok"}`, 2},
		{`radgen_report_duration_seconds_count`, 3}, // "partial" is a report too
	} {
		if got := metricValue(t, h, m.name); got != m.want {
			t.Errorf("%s = %v, want %v", m.name, got, m.want)
		}
	}
}

// TestSTOWHostile: what a STOW-RS client can get wrong or send on purpose
// is answered with its 4xx before any generation: the wrong media types,
// parts that are not DICOM (409, with a Store Instances Response naming
// them), a study without a frontal view, a film whose Pixel Data is short,
// a body over the limit (declared or not), too many instances, a stalled
// body, a bad study UID, an unknown option.
func TestSTOWHostile(t *testing.T) {
	const study = "1.2.826.0.1.3680043.8.498.2101"
	pa, ll := films(study)
	h := newHandler(t, WithMaxUploadBytes(64<<10), WithMaxInstances(3), WithUploadTimeout(200*time.Millisecond))
	g := newGate(h)
	close(g.open)
	srv := server(t, h)
	url := srv.URL + "/dicomweb/studies"
	short := orthanctest.Film{Study: study, Series: study + ".3", SOP: study + ".3.1", ViewPosition: "PA", PixelBytes: 8}.Bytes()

	for _, c := range []struct {
		name   string
		url    string
		hdr    http.Header
		parts  []instPart
		status int
		code   string
	}{
		{"form-data", url, http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}, []instPart{dicomPart(pa)}, 415, CodeUnsupportedMedia},
		{"a bare instance", url, http.Header{"Content-Type": {"application/dicom"}}, []instPart{dicomPart(pa)}, 415, CodeUnsupportedMedia},
		{"metadata and bulk data", url, http.Header{"Content-Type": {`multipart/related; type="application/dicom+xml"; boundary=x`}}, nil, 415, CodeUnsupportedMedia},
		{"no boundary", url, http.Header{"Content-Type": {`multipart/related; type="application/dicom"`}}, nil, 415, CodeUnsupportedMedia},
		{"no frontal view", url, nil, []instPart{dicomPart(ll)}, 422, CodeViewCount},
		{"no lateral view", url, nil, []instPart{dicomPart(pa)}, 422, CodeViewCount},
		{"short Pixel Data", url, nil, []instPart{dicomPart(short), dicomPart(ll)}, 422, CodeBadImage},
		{"too many instances", url, nil, []instPart{dicomPart(pa), dicomPart(ll), dicomPart(pa), dicomPart(ll)}, 413, CodeTooManyViews},
		{"too large", url, nil, []instPart{dicomPart(pa), dicomPart(bytes.Repeat([]byte{1}, 80<<10))}, 413, CodeUploadTooLarge},
		{"too large, undeclared", url, http.Header{"X-Test-Chunked": {"1"}}, []instPart{dicomPart(pa), dicomPart(bytes.Repeat([]byte{1}, 80<<10))}, 413, CodeUploadTooLarge},
		{"a study UID that is not one", url + "/1.2.03", nil, []instPart{dicomPart(pa)}, 400, CodeBadRequest},
		{"below a study", url + "/" + study + "/series", nil, []instPart{dicomPart(pa)}, 404, CodeNotFound},
		{"an unknown option", url + "?attention=1", nil, []instPart{dicomPart(pa), dicomPart(ll)}, 400, CodeInvalidOption},
		{"beam out of range", url + "?beam_size=99", nil, []instPart{dicomPart(pa), dicomPart(ll)}, 400, CodeInvalidOption},
		{"films of another study than the path's", url + "/1.2.3", nil, []instPart{dicomPart(pa), dicomPart(ll)}, 409, CodeInstancesRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := stow(t, srv.Client(), c.url, c.hdr, c.parts...)
			if resp.StatusCode != c.status {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status == 409 {
				a := decodeStore(t, resp, b)
				if len(a.stored) != 0 || len(a.failed) != 2 || a.failed[0].Reason != 0xC409 || a.sr != nil {
					t.Errorf("%+v", a)
				}
				return
			}
			if e := decodeError(t, b); e.Error.Code != c.code {
				t.Errorf("code %q, want %q: %s", e.Error.Code, c.code, b)
			}
		})
	}

	// Parts that are not DICOM: 409, each failed as not understood.
	resp, b := stow(t, srv.Client(), url, nil, instPart{ctype: "image/png", body: f0png(t)}, dicomPart([]byte("DICM, or not")))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if a := decodeStore(t, resp, b); len(a.failed) != 2 || a.failed[0].Reason != 0xC000 || a.failed[1].Reason != 0xC000 {
		t.Errorf("%+v", a)
	}
	if n := metricValue(t, h, `radgen_requests_total{route="/dicomweb/studies",outcome="instances_refused"}`); n != 1 {
		t.Errorf("instances_refused count %v", n)
	}

	// A body declared over the limit: 413 before it is read.
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /dicomweb/studies HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=B\r\nContent-Length: %d\r\n\r\n", 1<<30)
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r.Body)
	if r.StatusCode != 413 || decodeError(t, b).Error.Code != CodeUploadTooLarge {
		t.Errorf("declared 1 GiB: %d %s", r.StatusCode, b)
	}

	// A stalled body: 408 at the upload's deadline.
	c2, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "POST /dicomweb/studies HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=B\r\nContent-Length: 40000\r\n\r\n")
	fmt.Fprintf(c2, "--B\r\nContent-Type: application/dicom\r\n\r\n%s", pa[:200])
	r, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r.Body)
	if r.StatusCode != http.StatusRequestTimeout || decodeError(t, b).Error.Code != CodeUploadTimeout {
		t.Errorf("stalled: %d %s", r.StatusCode, b)
	}

	if n := len(g.entered); n != 0 {
		t.Errorf("%d generations for refused requests", n)
	}
	if n := h.m.admitted.Load(); n != 0 {
		t.Errorf("%d requests still admitted", n)
	}
	if n := h.mem.used.Load(); n != 0 {
		t.Errorf("%d bytes still reserved", n)
	}
	// The bearer token guards STOW-RS as it guards /v1.
	srv2 := server(t, newHandler(t, WithBearerToken("t0ken")))
	resp, b = stow(t, srv2.Client(), srv2.URL+"/dicomweb/studies", nil, dicomPart(pa), dicomPart(ll))
	if resp.StatusCode != 401 || decodeError(t, b).Error.Code != CodeUnauthorized {
		t.Errorf("without the token: %d %s", resp.StatusCode, b)
	}
	// GET is not STOW-RS.
	gr, err := srv.Client().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	gr.Body.Close()
	if gr.StatusCode != 405 || gr.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q", gr.StatusCode, gr.Header.Get("Allow"))
	}
}

// f0png is the fixture's first view, a PNG.
func f0png(t *testing.T) []byte { return tinyFixture(t).studies[0].files[0] }

// TestSTOWPACSDown: with a PACS that cannot be reached, the push fails
// with 502 pacs_error after the report is written.
func TestSTOWPACSDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	pacs, err := dicomweb.New("http://"+addr+"/dicom-web", dicomweb.WithRetry(dicomweb.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(t, WithPACS(pacs))
	srv := server(t, h)
	const study = "1.2.826.0.1.3680043.8.498.2201"
	pa, ll := films(study)
	resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies?max_length=6", nil, dicomPart(pa), dicomPart(ll))
	if resp.StatusCode != http.StatusBadGateway || decodeError(t, b).Error.Code != CodePACS {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

// TestSTOWOrthanc: with a real Orthanc as the PACS, a pushed study's SR is
// stored into the study there; pushed again (a retry), the study still
// holds exactly one radgen SR series of one instance (QIDO-RS), which
// WADO-RS returns. Then Orthanc, as a router would, pushes another study
// to the service with its own STOW-RS client (POST
// /dicom-web/servers/radgen/stow), which checks the Store Instances
// Response as a PACS does; that study too then holds one radgen SR series.
// One Orthanc serves both halves (each start and stop costs seconds).
func TestSTOWOrthanc(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) runs it against Orthanc; CI's race run saves the Orthanc's start and stop")
	}
	var h *Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	defer srv.Close()
	pacs := orthanctest.Start(t, orthanctest.WithDicomWebServer("radgen", srv.URL+"/dicomweb/"))
	ctx := context.Background()
	cl, err := dicomweb.New(pacs.URL, dicomweb.WithBasicAuth(orthanctest.User, orthanctest.Password))
	if err != nil {
		t.Fatal(err)
	}
	h = newHandler(t, WithPACS(cl))
	defer h.Close()
	model := dicomsr.Model{Name: h.info.Name, Checksum: h.info.Checksum}
	// oneSR checks that the study holds its films and one SR series of one
	// instance, the SR's UIDs.
	oneSR := func(study string) {
		t.Helper()
		series, instance := dicomsr.StudyUIDs(study, model)
		srs, err := cl.SearchSeries(ctx, study, dicomweb.Query{Modalities: []string{"SR"}, Fields: []string{"NumberOfSeriesRelatedInstances"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(srs) != 1 || srs[0].String(dicomweb.TagSeriesInstanceUID) != series {
			t.Fatalf("SR series of %s in Orthanc: %v", study, srs)
		}
		if n, _ := srs[0].Int(dicomweb.TagNumberOfSeriesInstances); n != 1 {
			t.Errorf("%d instances in the SR series of %s", n, study)
		}
		if all, err := cl.SearchSeries(ctx, study, dicomweb.Query{}); err != nil || len(all) != 3 {
			t.Errorf("series of %s: %d, %v", study, len(all), err)
		}
		var got []byte
		if err := cl.Retrieve(ctx, study, series, instance, func(p dicomweb.Part) error {
			got, err = io.ReadAll(p.Body)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if info, err := vision.ReadDICOMInfo(bytes.NewReader(got), int64(len(got))); err != nil || info.SOPClassUID != dicomsr.BasicTextSRStorage || info.SOPInstanceUID != instance {
			t.Errorf("the SR of %s from WADO-RS: %v %+v", study, err, info)
		}
	}

	const study = "1.2.826.0.1.3680043.8.498.2301"
	pa, ll := films(study)
	if _, err := cl.Store(ctx, study, pa, ll); err != nil {
		t.Fatal(err)
	}
	series, instance := dicomsr.StudyUIDs(study, model)
	for try := range 2 {
		resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies/"+study+"?max_length=8", nil, dicomPart(ll), dicomPart(pa))
		if resp.StatusCode != 200 {
			t.Fatalf("push %d: %d %s", try+1, resp.StatusCode, b)
		}
		a := decodeStore(t, resp, b)
		if a.retrieveURL != pacs.URL+"/studies/"+study || a.srURL != a.retrieveURL+"/series/"+series+"/instances/"+instance {
			t.Errorf("push %d: Retrieve URLs %q, %q", try+1, a.retrieveURL, a.srURL)
		}
	}
	oneSR(study)

	// Orthanc pushes a study.
	const pushed = "1.2.826.0.1.3680043.8.498.2501"
	pa, ll = films(pushed)
	if _, err := cl.Store(ctx, pushed, ll, pa); err != nil {
		t.Fatal(err)
	}
	rest := func(path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, pacs.REST+path, strings.NewReader(body))
		req.SetBasicAuth(orthanctest.User, orthanctest.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("Orthanc %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	var found []struct{ ID, Type string }
	if err := json.Unmarshal(rest("/tools/lookup", pushed), &found); err != nil || len(found) != 1 || found[0].Type != "Study" {
		t.Fatalf("lookup: %v %+v", err, found)
	}
	rest("/dicom-web/servers/radgen/stow", `{"Resources": ["`+found[0].ID+`"], "Synchronous": true}`)
	oneSR(pushed)
	for _, m := range []struct {
		name string
		want float64
	}{
		{`radgen_requests_total{route="/dicomweb/studies/{study}",outcome="ok"}`, 2},
		{`radgen_requests_total{route="/dicomweb/studies",outcome="ok"}`, 1}, // Orthanc's
	} {
		if got := metricValue(t, h, m.name); got != m.want {
			t.Errorf("%s = %v, want %v", m.name, got, m.want)
		}
	}
}

// FuzzReadSTOW feeds arbitrary bodies to the STOW-RS reader and the choice
// of views: it never panics, and what it accepts is one study's views
// within the limits.
func FuzzReadSTOW(f *testing.F) {
	const study = "1.2.826.0.1.3680043.8.498.2401"
	pa, ll := films(study)
	b, _ := stowBody(f, dicomPart(ll), dicomPart(pa), instPart{ctype: "text/plain", body: []byte("x")})
	f.Add(b.Bytes())
	b, _ = stowBody(f, dicomPart(pa[:300]), dicomPart(append(make([]byte, 128), "DICM"...)))
	f.Add(b.Bytes())
	f.Add([]byte("--B\r\nContent-Type: application/dicom\r\n\r\n\r\n--B--\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		boundary := "B"
		if i := bytes.Index(body, []byte("\r\n")); i > 2 && body[0] == '-' && body[1] == '-' {
			boundary = string(body[2:i])
		}
		ct := `multipart/related; type="application/dicom"; boundary="` + strings.ReplaceAll(boundary, `"`, "") + `"`
		const maxPixels = 128 * 128
		insts, e := readInstances(context.Background(), ct, bytes.NewReader(body), stowLimits{parts: 4, bytes: 1 << 20}, nil)
		if e != nil {
			if e.status < 400 || e.code == "" || e.message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if len(insts) == 0 || len(insts) > 4 {
			t.Fatalf("%d instances", len(insts))
		}
		st, up, e := pickStudy(insts, "", 2, maxPixels, nil)
		if e == nil {
			e = up.decode(context.Background(), 0, maxPixels, false, nil, context.Background())
		}
		if e != nil {
			if e.status < 400 || e.code == "" || e.message == "" {
				t.Fatalf("bad error %+v", e)
			}
			if e.status == http.StatusConflict {
				storeResponse(st, "", nil)
			}
			return
		}
		if len(up.views) != 2 || st.src == nil || st.src.Views[0].Kind != vision.ViewFrontal || st.src.Views[1].Kind != vision.ViewLateral {
			t.Fatalf("accepted %d views", len(up.views))
		}
		for _, v := range st.src.Views {
			if v.Info.StudyInstanceUID != st.uid {
				t.Fatalf("a view of study %q in study %q", v.Info.StudyInstanceUID, st.uid)
			}
		}
		for _, px := range up.views {
			if int64(px.W)*int64(px.H) > maxPixels || len(px.Pix) != px.W*px.H*px.C {
				t.Fatalf("view %dx%dx%d, %d bytes", px.W, px.H, px.C, len(px.Pix))
			}
		}
		if _, err := dicomweb.ParseJSON(storeResponse(st, "", nil), 1); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSTOWEdgeBodies: a push of 5,000 parts is refused at the first part
// past WithMaxInstances (413 too_many_views), and with a limit that lets
// them all in, every part that is not DICOM fails with 0xC000 (409);
// an empty body is a malformed one (400). The budget is whole after each.
func TestSTOWEdgeBodies(t *testing.T) {
	many := make([]instPart, 5000)
	for i := range many {
		many[i] = dicomPart([]byte(fmt.Sprintf("not DICOM %d", i)))
	}
	for _, c := range []struct {
		name   string
		opts   []Option
		parts  []instPart
		status int
		code   string
	}{
		{"5000 parts", nil, many, 413, CodeTooManyViews},
		{"5000 parts, all taken in", []Option{WithMaxInstances(5000)}, many, 409, CodeInstancesRefused},
		{"0 bytes", nil, nil, 400, CodeBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHandler(t, append(c.opts, WithMemoryBudget(16<<20))...)
			srv := server(t, h)
			var resp *http.Response
			var b []byte
			if c.parts == nil {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/dicomweb/studies", http.NoBody)
				req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=B`)
				r, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ = io.ReadAll(r.Body)
				r.Body.Close()
				resp = r
			} else {
				resp, b = stow(t, srv.Client(), srv.URL+"/dicomweb/studies", nil, c.parts...)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("%d, want %d: %.300s", resp.StatusCode, c.status, b)
			}
			if c.status == 409 {
				a := decodeStore(t, resp, b)
				if len(a.failed) != len(c.parts) || len(a.stored) != 0 || a.failed[4999].Reason != 0xC000 {
					t.Errorf("%d failed, %d stored", len(a.failed), len(a.stored))
				}
			} else if e := decodeError(t, b); e.Error.Code != c.code {
				t.Errorf("code %q, want %q", e.Error.Code, c.code)
			}
			if n := h.mem.used.Load(); n != 0 {
				t.Errorf("%d bytes still reserved", n)
			}
			if p := h.mem.peak.Load(); p > 16<<20 {
				t.Errorf("reserved %d bytes", p)
			}
		})
	}
}
