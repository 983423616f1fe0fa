package oracletest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/memtrans/serve"
	"github.com/radgen/radgen/vision"
)

// schemaPath is the FHIR R4 JSON schema (HL7, CC0) kept beside the fhir
// package's tests.
var schemaPath = filepath.Join("..", "..", "memtrans", "fhir", "testdata", "fhir.schema.json.gz")

var (
	schemaOnce sync.Once
	r4         *jsonschema.Schema
	r4Err      error
)

// r4Schema compiles the R4 schema (draft-06) once.
func r4Schema(t testing.TB) *jsonschema.Schema {
	schemaOnce.Do(func() {
		f, err := os.Open(schemaPath)
		if err != nil {
			r4Err = err
			return
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			r4Err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(zr)
		if err != nil {
			r4Err = err
			return
		}
		c := jsonschema.NewCompiler()
		if r4Err = c.AddResource("fhir.schema.json", doc); r4Err != nil {
			return
		}
		r4, r4Err = c.Compile("fhir.schema.json")
	})
	if r4Err != nil {
		t.Fatal(r4Err)
	}
	return r4
}

// validateFHIR validates a JSON document against the R4 schema.
func validateFHIR(t testing.TB, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return r4Schema(t).Validate(v)
}

const (
	studyUID = "1.2.826.0.1.3680043.8.498.12345678901234567890"
	text     = "the heart is normal in size . the lungs are clear . no pneumothorax ."
)

var (
	issued = time.Date(2026, 11, 24, 9, 30, 15, 250_000_000, time.UTC)
	model  = fhir.Model{Name: "radgen R2Gen IU X-Ray", Version: "0.1.0", Checksum: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Manufacturer: "radgen"}
	study  = fhir.Study{
		InstanceUID:     studyUID,
		Reference:       "ImagingStudy/cxr-1",
		AccessionNumber: "ACC 0042",
		PatientID:       "PID-7",
		PatientSystem:   "urn:oid:1.2.826.0.1.3680043.8.498.7",
		Time:            time.Date(2026, 11, 23, 14, 5, 0, 0, time.FixedZone("", 3600)),
	}
)

func build(t *testing.T, r memtrans.Report, s fhir.Study, opts ...fhir.Option) []byte {
	t.Helper()
	dr, err := fhir.NewDiagnosticReport(r, s, model, issued, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(dr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSchema validates the resources NewDiagnosticReport writes, with and
// without the optional fields, against the FHIR R4 JSON schema.
func TestSchema(t *testing.T) {
	full := memtrans.Report{StudyID: "CXR-1", Text: text}
	cases := map[string]struct {
		r    memtrans.Report
		s    fhir.Study
		opts []fhir.Option
	}{
		"full":      {full, study, []fhir.Option{fhir.WithID("report-1"), fhir.WithLanguage("en-US"), fhir.WithIdentifier(fhir.Identifier{System: fhir.SystemDICOMUID, Value: "urn:oid:2.25.1234"})}},
		"minimal":   {memtrans.Report{Text: text}, fhir.Study{InstanceUID: "1.2.3"}, nil},
		"patient":   {full, fhir.Study{InstanceUID: "1.2.3", Patient: "Patient/7"}, nil},
		"date only": {full, fhir.Study{InstanceUID: "1.2.3", Time: time.Date(2012, 1, 15, 0, 0, 0, 0, time.UTC), DateOnly: true}, nil},
		"assigner":  {full, fhir.Study{InstanceUID: "1.2.3", PatientID: "P1", PatientAssigner: "St Elsewhere"}, nil},
		"truncated": {memtrans.Report{Text: "the heart is", Truncated: true}, study, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := build(t, c.r, c.s, c.opts...)
			if err := validateFHIR(t, b); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
		})
	}
}

// TestSchemaRejects shows the validator catching broken reports: each
// mutation of a valid report must fail validation. (Each validation of
// a report walks the schema's oneOf of every resource type: a fraction of
// a second, so the list keeps to one mutation per kind of rule.)
func TestSchemaRejects(t *testing.T) {
	good := build(t, memtrans.Report{Text: text}, study)
	first := func(m map[string]any, key string) map[string]any { return m[key].([]any)[0].(map[string]any) }
	mutations := map[string]func(m map[string]any){
		"status not in the value set": func(m map[string]any) { m["status"] = "draft" },
		"unknown property":            func(m map[string]any) { m["findings"] = text },
		"code missing":                func(m map[string]any) { delete(m, "code") },
		"issued without a zone":       func(m map[string]any) { m["issued"] = "2026-11-24T09:30:15" },
		"effective with a bad month":  func(m map[string]any) { m["effectiveDateTime"] = "2012-13-15" },
		"contained resource unknown":  func(m map[string]any) { first(m, "contained")["resourceType"] = "Model" },
		"patient system not a uri": func(m map[string]any) {
			m["subject"].(map[string]any)["identifier"].(map[string]any)["system"] = "has spaces"
		},
		"study identifier as a number": func(m map[string]any) { first(m, "imagingStudy")["identifier"].(map[string]any)["value"] = 7 },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			b, _ := json.Marshal(m)
			if err := validateFHIR(t, b); err == nil {
				t.Fatalf("the validator accepted the broken report:\n%s", b)
			}
		})
	}
}

// TestSchemaRealStudy: the report of a real DICOM study (the SIIM chest
// film, read by memtrans.StudiesFromDICOMDir) validates.
func TestSchemaRealStudy(t *testing.T) {
	src := os.Getenv("RADGEN_REAL_DICOM")
	if src == "" {
		src = filepath.Join("..", "..", "..", "shared", "real", "dicom") // beside the repository
	}
	b, err := os.ReadFile(filepath.Join(src, "siim_cr_jpeg_baseline.dcm"))
	if err != nil {
		t.Skipf("no SIIM film: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "film.dcm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	studies, err := memtrans.StudiesFromDICOMDir(context.Background(), dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := fhir.StudyFromDICOM(studies[0].DICOM, time.UTC)
	out := build(t, memtrans.Report{Text: text, StudyID: studies[0].ID}, s)
	if err := validateFHIR(t, out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestServedFHIRValidates: the FHIR report the service answers for a DICOM
// upload (study date and zone, patient and issuer, study id, cut at
// max_length) validates against the schema.
func TestServedFHIRValidates(t *testing.T) {
	cfg := data.SynthConfig{Train: 1, Width: 64, Height: 64, Seed: 4}
	st, err := data.GenerateStudy(cfg, "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The browser test's model, trained to write the synthetic reports'
	// sentences: an untrained one may end its report before any word,
	// which no FHIR report can carry (the service answers 422).
	run, _ := trainedModel(t)
	h, err := serve.New(run.Model)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for v, film := range st.Films {
		px := vision.FromImage(nil, film)
		g := make([]byte, px.W*px.H)
		for i := range g {
			g[i] = px.Pix[i*px.C]
		}
		f, _ := w.CreateFormFile("view", string(rune('0'+v))+".dcm")
		f.Write(testutil.DICOMImage(px.W, px.H, g, map[uint32]string{
			testutil.TagPatientName: "DOE^JANE", testutil.TagPatientID: "P-1", testutil.TagIssuerOfPatientID: "2.16.840.1.113883.19.5",
			testutil.TagStudyDate: "20120115", testutil.TagStudyTime: "093000", testutil.TagTimezoneOffsetFromUTC: "-0500",
			testutil.TagStudyInstanceUID: "1.2.826.0.1.3680043.8.498.3", testutil.TagAccessionNumber: "A-3",
		}))
	}
	w.WriteField("fhir", "1")
	w.WriteField("study_id", "CXR 3")
	w.WriteField("max_length", "4")
	w.Close()
	resp, err := http.Post(srv.URL+"/v1/reports", w.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var r struct {
		FHIR json.RawMessage `json:"fhir"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if err := validateFHIR(t, r.FHIR); err != nil {
		t.Fatalf("%v\n%s", err, r.FHIR)
	}
	var dr fhir.DiagnosticReport
	json.Unmarshal(r.FHIR, &dr)
	if dr.EffectiveDateTime != "2012-01-15T09:30:00-05:00" || dr.Subject.Identifier.System != "urn:oid:2.16.840.1.113883.19.5" {
		t.Errorf("effective %q, patient %+v", dr.EffectiveDateTime, dr.Subject.Identifier)
	}
}
