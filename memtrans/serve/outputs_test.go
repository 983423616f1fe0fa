package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// dicomStudy returns the fixture study's views as DICOM files with a
// patient, a study date and time, a zone and an issuer.
func dicomStudy(t *testing.T, s testStudy) []part {
	var ps []part
	for i, b := range s.files {
		px, err := vision.Decode(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		g := make([]byte, px.W*px.H)
		for k := range g {
			g[k] = px.Pix[k*px.C]
		}
		file := testutil.DICOMImage(px.W, px.H, g, map[uint32]string{
			testutil.TagPatientName: "DOE^JANE^Q", testutil.TagPatientID: "P-42", testutil.TagIssuerOfPatientID: "1.2.826.0.1.3680043.8.498.7",
			testutil.TagStudyDate: "20120115", testutil.TagStudyTime: "093015", testutil.TagTimezoneOffsetFromUTC: "+0100",
			testutil.TagAccessionNumber: "ACC-9", testutil.TagStudyInstanceUID: "1.2.826.0.1.3680043.8.498.1000",
			testutil.TagStudyDescription: "CHEST 2 VIEWS", testutil.TagModality: "DX",
		})
		ps = append(ps, part{field: "view", name: s.names[i][:1] + ".dcm", body: file})
	}
	return ps
}

// TestDICOMIdentityAndFHIR: a DICOM study's identity reaches the answer
// (for the page) and the FHIR report: effectiveDateTime from StudyDate,
// StudyTime and the header's zone, the patient identifier with the issuer
// as its system, the request's study_id as an identifier; a report cut
// at max_length says so in the JSON and the FHIR report.
func TestDICOMIdentityAndFHIR(t *testing.T) {
	f := tinyFixture(t)
	srv := server(t, newHandler(t))
	parts := append(dicomStudy(t, f.studies[0]), part{field: "fhir", body: []byte("1")}, part{field: "study_id", body: []byte("CXR-7")},
		part{field: "max_length", body: []byte("3")}, part{field: "images", body: []byte("1")})
	resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, parts...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := decodeReport(t, b)
	want := studyInfo{PatientName: "DOE, JANE Q", PatientID: "P-42", IssuerOfPatientID: "1.2.826.0.1.3680043.8.498.7", StudyInstanceUID: "1.2.826.0.1.3680043.8.498.1000",
		AccessionNumber: "ACC-9", StudyDate: "2012-01-15", StudyTime: "09:30:15", StudyDescription: "CHEST 2 VIEWS", Modality: "DX"}
	if r.Study == nil || *r.Study != want {
		t.Errorf("study %+v, want %+v", r.Study, want)
	}
	if len(r.Views) != 2 || !r.Views[0].DICOM {
		t.Errorf("views %+v", r.Views)
	}
	if len(r.Tokens) != 3 || r.Tokens[2] == 0 || !r.Truncated {
		t.Errorf("max_length 3: tokens %v, truncated %v", r.Tokens, r.Truncated)
	}
	fh, _ := json.Marshal(r.FHIR)
	var dr fhir.DiagnosticReport
	if err := json.Unmarshal(fh, &dr); err != nil {
		t.Fatal(err)
	}
	if dr.EffectiveDateTime != "2012-01-15T09:30:15+01:00" {
		t.Errorf("effectiveDateTime %q", dr.EffectiveDateTime)
	}
	if id := dr.Subject.Identifier; id == nil || id.Value != "P-42" || id.System != "urn:oid:1.2.826.0.1.3680043.8.498.7" {
		t.Errorf("patient identifier %+v", id)
	}
	if len(dr.Identifier) != 1 || dr.Identifier[0].Value != "CXR-7" {
		t.Errorf("report identifiers %+v", dr.Identifier)
	}
	if !strings.Contains(dr.Conclusion, fhir.TruncatedNote) || dr.ImagingStudy[0].Identifier.Value != "urn:oid:1.2.826.0.1.3680043.8.498.1000" {
		t.Errorf("conclusion %q, study %+v", dr.Conclusion, dr.ImagingStudy[0].Identifier)
	}

	// Without a study date, no effectiveDateTime (not the issue time).
	resp, b = post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0], "fhir", "1")...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	fh, _ = json.Marshal(decodeReport(t, b).FHIR)
	if strings.Contains(string(fh), "effectiveDateTime") {
		t.Errorf("a study without a date has an effectiveDateTime: %s", fh)
	}
}

// TestValidationBeforeGeneration: a bad study_uid, or a study_id with
// control characters, is refused before any generation.
func TestValidationBeforeGeneration(t *testing.T) {
	f := tinyFixture(t)
	h := newHandler(t)
	g := newGate(h)
	close(g.open)
	srv := server(t, h)
	for _, c := range [][]string{
		{"fhir", "1", "study_uid", "1.2.03"}, {"study_uid", "x"},
		{"study_id", "a\x00b"}, {"study_id", "a\x1b[31m"}, {"study_id", "a\r\nb"}, {"study_id", "a\u0085b"},
	} {
		resp, b := post(t, srv.Client(), srv.URL+"/v1/reports", nil, studyParts(f.studies[0], c...)...)
		if resp.StatusCode != 400 || decodeError(t, b).Error.Code != CodeInvalidOption {
			t.Errorf("%q: %d %s", c, resp.StatusCode, b)
		}
	}
	if n := len(g.entered); n != 0 {
		t.Errorf("%d generations for refused requests", n)
	}
}

// TestAuthSchemeCase: the bearer scheme is case-insensitive.
func TestAuthSchemeCase(t *testing.T) {
	srv := server(t, newHandler(t, WithBearerToken("s3cret")))
	for tok, want := range map[string]int{"bearer s3cret": 200, "BEARER s3cret": 200, "Bearer  s3cret": 200, "Bearer": 401, "bearer": 401, "Bearers3cret": 401} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/model", nil)
		req.Header.Set("Authorization", tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%q: %d, want %d", tok, resp.StatusCode, want)
		}
	}
}

// TestStaticNotFound: a missing page file counts as not_found.
func TestStaticNotFound(t *testing.T) {
	h := newHandler(t)
	srv := server(t, h)
	resp, err := srv.Client().Get(srv.URL + "/web/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("%d", resp.StatusCode)
	}
	if n := metricValue(t, h, `radgen_requests_total{route="/",outcome="not_found"}`); n != 1 {
		t.Errorf("not_found count %v", n)
	}
}

// TestPersonName checks the display of DICOM person names.
func TestPersonName(t *testing.T) {
	for in, want := range map[string]string{"DOE^JANE": "DOE, JANE", "DOE^JANE^Q^DR": "DOE, JANE Q", "DOE": "DOE", "^JANE": "JANE", "DOE^JANE=ドウ": "DOE, JANE", "": ""} {
		if got := personName(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// A report the model ended before any word is its answer, not a failure of
// the service: asked for FHIR or an SR, the service says 422 empty_report
// instead of 500.
func TestEmptyReportIsUnprocessable(t *testing.T) {
	for _, text := range []string{"", "  "} {
		e := emptyReport(memtrans.Report{Text: text})
		if e == nil || e.status != http.StatusUnprocessableEntity || e.code != CodeEmptyReport {
			t.Fatalf("empty report %q: %+v", text, e)
		}
	}
	if e := emptyReport(memtrans.Report{Text: "the heart is normal ."}); e != nil {
		t.Fatalf("a report with text: %+v", e)
	}
}
