package fhir_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

var (
	schemaOnce sync.Once
	r4         *schema
)

func r4Schema(t testing.TB) *schema {
	schemaOnce.Do(func() { r4 = loadSchema(t, "testdata/fhir.schema.json.gz") })
	if r4 == nil {
		t.Fatal("schema did not load")
	}
	return r4
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
		Time:            time.Date(2026, 11, 23, 14, 5, 0, 0, time.FixedZone("", 3600)),
	}
)

func build(t *testing.T, s fhir.Study, opts ...fhir.Option) (*fhir.DiagnosticReport, []byte) {
	t.Helper()
	dr, err := fhir.NewDiagnosticReport(memtrans.Report{StudyID: "s1", Text: text}, s, model, issued, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(dr, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return dr, b
}

// TestSchema validates the resources NewDiagnosticReport writes, with and
// without the optional fields, against the FHIR R4 JSON schema.
func TestSchema(t *testing.T) {
	sc := r4Schema(t)
	cases := map[string]struct {
		s    fhir.Study
		opts []fhir.Option
	}{
		"full":    {study, []fhir.Option{fhir.WithID("report-1"), fhir.WithLanguage("en-US"), fhir.WithIdentifier(fhir.Identifier{System: fhir.SystemDICOMUID, Value: "urn:oid:2.25.1234"})}},
		"minimal": {fhir.Study{InstanceUID: "1.2.3"}, nil},
		"patient": {fhir.Study{InstanceUID: "1.2.3", Patient: "Patient/7"}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, b := build(t, c.s, c.opts...)
			if err := sc.Validate(b); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
		})
	}
}

// TestSchemaRejects shows the validator catching broken reports: each
// mutation of a valid report must fail validation. (The R4 schema gives
// complex types no "type": "object" and base64Binary no pattern, so a
// string in place of a Reference, or data that is not base64, pass it;
// TestContent decodes the data instead.)
func TestSchemaRejects(t *testing.T) {
	sc := r4Schema(t)
	_, good := build(t, study)
	mutations := map[string]func(m map[string]any){
		"status not in the value set": func(m map[string]any) { m["status"] = "draft" },
		"unknown property":            func(m map[string]any) { m["findings"] = text },
		"code missing":                func(m map[string]any) { delete(m, "code") },
		"issued without a zone":       func(m map[string]any) { m["issued"] = "2026-11-24T09:30:15" },
		"conclusion as a number":      func(m map[string]any) { m["conclusion"] = 42 },
		"creation in month 13":        func(m map[string]any) { first(m, "presentedForm")["creation"] = "2026-13-01T00:00:00Z" },
		"language with spaces":        func(m map[string]any) { first(m, "presentedForm")["language"] = "en  US" },
		"device name type unknown": func(m map[string]any) {
			first(first(m, "contained"), "deviceName")["type"] = "ai-name"
		},
		"contained resource unknown": func(m map[string]any) {
			first(m, "contained")["resourceType"] = "Model"
		},
		"study identifier value as an object": func(m map[string]any) {
			first(m, "imagingStudy")["identifier"].(map[string]any)["value"] = map[string]any{"oid": studyUID}
		},
		"reference type with a space": func(m map[string]any) { first(m, "basedOn")["type"] = "Service Request" },
		"device status unknown": func(m map[string]any) {
			first(m, "contained")["status"] = "running"
		},
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			b, _ := json.Marshal(m)
			err := sc.Validate(b)
			if err == nil {
				t.Fatalf("validator accepted the broken report:\n%s", b)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

func first(m map[string]any, key string) map[string]any {
	return m[key].([]any)[0].(map[string]any)
}

// TestContent checks what the resource says, field by field.
func TestContent(t *testing.T) {
	dr, b := build(t, study)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["resourceType"] != "DiagnosticReport" || m["status"] != "preliminary" || m["conclusion"] != text {
		t.Errorf("resourceType %v status %v conclusion %v", m["resourceType"], m["status"], m["conclusion"])
	}
	code := first(m["code"].(map[string]any), "coding")
	if code["system"] != "http://loinc.org" || code["code"] != "18748-4" {
		t.Errorf("code %v", code)
	}
	pf := first(m, "presentedForm")
	data, err := base64.StdEncoding.DecodeString(pf["data"].(string))
	if err != nil || string(data) != text || pf["contentType"] != "text/plain; charset=utf-8" || pf["language"] != "en" {
		t.Errorf("presentedForm %v (decoded %q, %v)", pf, data, err)
	}
	is := first(m, "imagingStudy")
	id := is["identifier"].(map[string]any)
	if is["reference"] != "ImagingStudy/cxr-1" || id["system"] != "urn:dicom:uid" || id["value"] != "urn:oid:"+studyUID {
		t.Errorf("imagingStudy %v", is)
	}
	acc := first(m, "basedOn")["identifier"].(map[string]any)
	if acc["value"] != "ACC 0042" || first(acc["type"].(map[string]any), "coding")["code"] != "ACSN" {
		t.Errorf("basedOn %v", acc)
	}
	if m["issued"] != "2026-11-24T09:30:15.25Z" || m["effectiveDateTime"] != "2026-11-23T14:05:00+01:00" {
		t.Errorf("issued %v effective %v", m["issued"], m["effectiveDateTime"])
	}
	dev := dr.Device()
	if dev == nil || dev.DeviceName[0].Name != model.Name || dev.Version[0].Value != model.Version || dev.Identifier[0].Value != model.Checksum || dev.Manufacturer != model.Manufacturer {
		t.Fatalf("device %+v", dev)
	}
	// The device is reachable: result -> contained Observation -> device.
	contained := m["contained"].([]any)
	byID := map[string]map[string]any{}
	for _, c := range contained {
		r := c.(map[string]any)
		byID["#"+r["id"].(string)] = r
	}
	obs := byID[first(m, "result")["reference"].(string)]
	if obs == nil || obs["resourceType"] != "Observation" || obs["valueString"] != text || obs["status"] != "preliminary" {
		t.Fatalf("result does not reach the finding: %v", obs)
	}
	devRes := byID[obs["device"].(map[string]any)["reference"].(string)]
	if devRes == nil || devRes["resourceType"] != "Device" {
		t.Fatalf("the finding does not reach the device: %v", obs["device"])
	}
	sec := first(m["meta"].(map[string]any), "security")
	if sec["code"] != "AIAST" {
		t.Errorf("security label %v", sec)
	}
	if s := first(m, "result"); s["reference"] != "#finding" {
		t.Errorf("result %v", s)
	}
	if sub := m["subject"].(map[string]any); sub["identifier"].(map[string]any)["value"] != "PID-7" {
		t.Errorf("subject %v", sub)
	}
}

func TestBadInput(t *testing.T) {
	good := memtrans.Report{Text: text}
	cases := []struct {
		name string
		r    memtrans.Report
		s    fhir.Study
		m    fhir.Model
		t    time.Time
		opts []fhir.Option
	}{
		{"empty text", memtrans.Report{Text: "  "}, study, model, issued, nil},
		{"invalid utf-8", memtrans.Report{Text: "lungs \xff clear"}, study, model, issued, nil},
		{"control character", memtrans.Report{Text: "lungs \x00 clear"}, study, model, issued, nil},
		{"no study uid", good, fhir.Study{}, model, issued, nil},
		{"uid with a leading zero", good, fhir.Study{InstanceUID: "1.02.3"}, model, issued, nil},
		{"uid too long", good, fhir.Study{InstanceUID: "1." + strings.Repeat("1", 63)}, model, issued, nil},
		{"no model name", good, study, fhir.Model{Version: "1"}, issued, nil},
		{"reference with a space", good, fhir.Study{InstanceUID: "1.2", Reference: "ImagingStudy/ 1"}, model, issued, nil},
		{"zero time", good, study, model, time.Time{}, nil},
		{"year 10000", good, study, model, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), nil},
		{"bad language", good, study, model, issued, []fhir.Option{fhir.WithLanguage("english please")}},
		{"bad id", good, study, model, issued, []fhir.Option{fhir.WithID("report 1")}},
		{"empty identifier", good, study, model, issued, []fhir.Option{fhir.WithIdentifier(fhir.Identifier{System: "x"})}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dr, err := fhir.NewDiagnosticReport(c.r, c.s, c.m, c.t, c.opts...)
			if !errors.Is(err, fhir.ErrInput) || dr != nil {
				t.Fatalf("got %v, %v; want an ErrInput", dr, err)
			}
		})
	}
}

func TestStudyFromDICOM(t *testing.T) {
	info := &vision.DICOMInfo{StudyInstanceUID: "1.2.3", AccessionNumber: "A1", PatientID: "P1", StudyDate: "20240102", StudyTime: "1015"}
	src := &vision.DICOMStudy{StudyInstanceUID: "1.2.3", Views: []vision.DICOMView{{Info: info}}}
	s := fhir.StudyFromDICOM(src, time.UTC)
	if s.InstanceUID != "1.2.3" || s.AccessionNumber != "A1" || s.PatientID != "P1" || !s.Time.Equal(time.Date(2024, 1, 2, 10, 15, 0, 0, time.UTC)) {
		t.Errorf("%+v", s)
	}
	info.StudyTime = "101530.25"
	if s := fhir.StudyFromDICOM(src, time.UTC); !s.Time.Equal(time.Date(2024, 1, 2, 10, 15, 30, 0, time.UTC)) {
		t.Errorf("%v", s.Time)
	}
	if s := fhir.StudyFromDICOM(src, nil); !s.Time.IsZero() {
		t.Errorf("no zone: %v", s.Time)
	}
	info.StudyDate = "2024"
	if s := fhir.StudyFromDICOM(src, time.UTC); !s.Time.IsZero() {
		t.Errorf("bad date: %v", s.Time)
	}
	if s := fhir.StudyFromDICOM(nil, time.UTC); s.InstanceUID != "" {
		t.Errorf("nil source: %+v", s)
	}
}

func TestContainedResource(t *testing.T) {
	if _, err := json.Marshal(fhir.ContainedResource{}); err == nil {
		t.Error("an empty contained resource marshalled")
	}
	if _, err := json.Marshal(fhir.ContainedResource{Device: &fhir.Device{}, Observation: &fhir.Observation{}}); err == nil {
		t.Error("a contained resource holding two marshalled")
	}
}

// TestSchemaRealStudy: the report of a real DICOM study (the SIIM chest
// film, read by memtrans.StudiesFromDICOMDir) validates against the R4
// schema, its study time taken from the file.
func TestSchemaRealStudy(t *testing.T) {
	src := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
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
	dr, err := fhir.NewDiagnosticReport(memtrans.Report{Text: text}, s, model, issued)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(dr)
	if err := r4Schema(t).Validate(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if dr.ImagingStudy[0].Identifier.Value != "urn:oid:"+studies[0].ID || dr.EffectiveDateTime != s.Time.Format(time.RFC3339Nano) {
		t.Errorf("imaging study %v, effective %s", dr.ImagingStudy[0].Identifier, dr.EffectiveDateTime)
	}
}
