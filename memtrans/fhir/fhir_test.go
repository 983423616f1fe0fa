package fhir_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

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

// TestDeviceVersions: the contained Device's versions, read from the JSON
// written, are the model's (when it has one) and radgen's, each typed.
func TestDeviceVersions(t *testing.T) {
	unversioned := model
	unversioned.Version = "  "
	for _, c := range []struct {
		m    fhir.Model
		want string
	}{
		{model, `[{"type":{"text":"model"},"value":"0.1.0"},{"type":{"text":"radgen"},"value":"` + radgen.Version + `"}]`},
		{unversioned, `[{"type":{"text":"radgen"},"value":"` + radgen.Version + `"}]`},
	} {
		dr, err := fhir.NewDiagnosticReport(memtrans.Report{StudyID: "s1", Text: text}, study, c.m, issued)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(dr)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Contained []struct {
				ResourceType string          `json:"resourceType"`
				Version      json.RawMessage `json:"version"`
			} `json:"contained"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range m.Contained {
			if r.ResourceType == "Device" {
				got = append(got, string(r.Version))
			}
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("model version %q: the Device's versions %q, want [%s]", c.m.Version, got, c.want)
		}
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
	if s.InstanceUID != "1.2.3" || s.AccessionNumber != "A1" || s.PatientID != "P1" || s.DateOnly || !s.Time.Equal(time.Date(2024, 1, 2, 10, 15, 0, 0, time.UTC)) {
		t.Errorf("%+v", s)
	}
	info.StudyTime = "101530.25"
	if s := fhir.StudyFromDICOM(src, time.UTC); !s.Time.Equal(time.Date(2024, 1, 2, 10, 15, 30, 0, time.UTC)) {
		t.Errorf("%v", s.Time)
	}
	// No zone: the date alone.
	if s := fhir.StudyFromDICOM(src, nil); !s.DateOnly || s.Time.Format(time.DateOnly) != "2024-01-02" {
		t.Errorf("no zone: %v (date only %v)", s.Time, s.DateOnly)
	}
	// The header's zone wins over the caller's.
	info.TimezoneOffsetFromUTC = "-0500"
	if s := fhir.StudyFromDICOM(src, time.UTC); s.DateOnly || s.Time.Format(time.RFC3339) != "2024-01-02T10:15:30-05:00" {
		t.Errorf("zone -0500: %v", s.Time)
	}
	info.TimezoneOffsetFromUTC = "+2500"
	if s := fhir.StudyFromDICOM(src, nil); !s.DateOnly {
		t.Errorf("a bad zone used: %v", s.Time)
	}
	info.StudyTime = ""
	if s := fhir.StudyFromDICOM(src, time.UTC); !s.DateOnly {
		t.Errorf("no time: %v", s.Time)
	}
	info.StudyDate = "2024"
	if s := fhir.StudyFromDICOM(src, time.UTC); !s.Time.IsZero() {
		t.Errorf("bad date: %v", s.Time)
	}
	if s := fhir.StudyFromDICOM(nil, time.UTC); s.InstanceUID != "" {
		t.Errorf("nil source: %+v", s)
	}
	// The issuer of the patient id: an OID or a URI as the system, a name
	// as the assigner.
	for issuer, want := range map[string][2]string{
		"1.2.840.113619.2.5":                            {"urn:oid:1.2.840.113619.2.5", ""},
		"https://hospital.example/mrn":                  {"https://hospital.example/mrn", ""},
		"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66": {"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", ""},
		"St Elsewhere MRN":                              {"", "St Elsewhere MRN"},
	} {
		info.IssuerOfPatientID = issuer
		s := fhir.StudyFromDICOM(src, nil)
		if s.PatientSystem != want[0] || s.PatientAssigner != want[1] {
			t.Errorf("issuer %q: system %q, assigner %q", issuer, s.PatientSystem, s.PatientAssigner)
		}
	}
}

// TestEffectiveAndIdentifiers: effectiveDateTime is the study's time, its
// date alone, or absent; the report's study id is an identifier; the
// patient's assigner is written; a truncated report says so.
func TestEffectiveAndIdentifiers(t *testing.T) {
	cases := []struct {
		s    fhir.Study
		want string
	}{
		{fhir.Study{InstanceUID: "1.2.3"}, ""},
		{fhir.Study{InstanceUID: "1.2.3", Time: time.Date(2012, 1, 15, 0, 0, 0, 0, time.UTC), DateOnly: true}, "2012-01-15"},
		{fhir.Study{InstanceUID: "1.2.3", Time: time.Date(2012, 1, 15, 9, 30, 0, 0, time.FixedZone("", -5*3600))}, "2012-01-15T09:30:00-05:00"},
	}
	for _, c := range cases {
		dr, err := fhir.NewDiagnosticReport(memtrans.Report{Text: text}, c.s, model, issued)
		if err != nil {
			t.Fatal(err)
		}
		if dr.EffectiveDateTime != c.want || dr.Contained[1].Observation.EffectiveDateTime != c.want {
			t.Errorf("%+v: effective %q, want %q", c.s, dr.EffectiveDateTime, c.want)
		}
	}
	dr, err := fhir.NewDiagnosticReport(memtrans.Report{StudyID: "CXR 7", Text: "the heart is", Truncated: true},
		fhir.Study{InstanceUID: "1.2.3", PatientID: "P1", PatientAssigner: "St Elsewhere"}, model, issued)
	if err != nil {
		t.Fatal(err)
	}
	if len(dr.Identifier) != 1 || dr.Identifier[0].Value != "CXR 7" || dr.Identifier[0].Type.Text != "study identifier" {
		t.Errorf("identifiers %+v", dr.Identifier)
	}
	if a := dr.Subject.Identifier.Assigner; a == nil || a.Display != "St Elsewhere" {
		t.Errorf("assigner %+v", a)
	}
	obs := dr.Contained[1].Observation
	if dr.Conclusion != "the heart is ["+fhir.TruncatedNote+"]" || obs.ValueString != "the heart is" || obs.Note[len(obs.Note)-1].Text != fhir.TruncatedNote {
		t.Errorf("truncated: conclusion %q, value %q, notes %+v", dr.Conclusion, obs.ValueString, obs.Note)
	}
	// The study id equal to the UID is not repeated; control characters are refused.
	dr, _ = fhir.NewDiagnosticReport(memtrans.Report{StudyID: "1.2.3", Text: text}, fhir.Study{InstanceUID: "1.2.3"}, model, issued)
	if len(dr.Identifier) != 0 {
		t.Errorf("the UID as a study id: %+v", dr.Identifier)
	}
	if _, err := fhir.NewDiagnosticReport(memtrans.Report{StudyID: "a\x1bb", Text: text}, fhir.Study{InstanceUID: "1.2.3"}, model, issued); !errors.Is(err, fhir.ErrInput) {
		t.Errorf("a study id with ESC: %v", err)
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

// FuzzStudyFromDICOMInfo feeds arbitrary header values to
// StudyFromDICOMInfo: it never panics, and the report it leads to is
// either built or refused with ErrInput, its effectiveDateTime the date
// of StudyDate when there is one.
func FuzzStudyFromDICOMInfo(f *testing.F) {
	f.Add("20120115", "093015.5", "+0100", "1.2.3", "urn:oid:1.2", "P1")
	f.Add("2012", "", "-1300", "St Elsewhere", "", "")
	f.Add("99991231", "2359", "+1400", "https://h.example/x y", "1.2.3", "\x00")
	f.Fuzz(func(t *testing.T, date, clock, zone, issuer, uid, pid string) {
		info := &vision.DICOMInfo{StudyDate: date, StudyTime: clock, TimezoneOffsetFromUTC: zone, IssuerOfPatientID: issuer, StudyInstanceUID: uid, PatientID: pid}
		s := fhir.StudyFromDICOMInfo(info, nil)
		s.InstanceUID = "1.2.3"
		dr, err := fhir.NewDiagnosticReport(memtrans.Report{Text: text}, s, model, issued)
		if err != nil {
			if !errors.Is(err, fhir.ErrInput) {
				t.Fatalf("%+v: %v", s, err)
			}
			return
		}
		if !s.Time.IsZero() && !strings.HasPrefix(dr.EffectiveDateTime, date[:4]+"-"+date[4:6]+"-"+date[6:8]) {
			t.Fatalf("StudyDate %q gave effectiveDateTime %q", date, dr.EffectiveDateTime)
		}
	})
}
