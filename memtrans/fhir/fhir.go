package fhir

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/vision"
)

// ErrInput is wrapped by the errors NewDiagnosticReport returns for input
// that cannot make a valid resource.
var ErrInput = errors.New("fhir: bad input")

// Code systems and codes the package writes.
const (
	SystemLOINC       = "http://loinc.org"
	SystemDICOMUID    = "urn:dicom:uid"
	SystemV2Table0074 = "http://terminology.hl7.org/CodeSystem/v2-0074"
	SystemV2Table0203 = "http://terminology.hl7.org/CodeSystem/v2-0203"
	SystemObsCategory = "http://terminology.hl7.org/CodeSystem/observation-category"
	SystemV3ObsValue  = "http://terminology.hl7.org/CodeSystem/v3-ObservationValue"
	CodeImagingStudy  = "18748-4" // LOINC "Diagnostic imaging study"
	CodeStudyFindings = "18782-3" // LOINC "Radiology Study observation (narrative)"
	CodeAIAsserted    = "AIAST"   // v3 ObservationValue "artificial intelligence asserted"
	// TruncatedNote is what a report cut off at its maximum length says,
	// in its conclusion and in a note on its finding.
	TruncatedNote       = "incomplete: the model reached its maximum length before ending the report; the last sentence may be cut off"
	deviceID, findingID = "model", "finding"
	// The types (text) of the Device's versions: the model's and the
	// software's that wrote the report (radgen.Version).
	versionModel, versionSoftware = "model", "radgen"
)

// Study identifies the imaging study a report describes. InstanceUID is
// required; the other fields are written when set.
type Study struct {
	InstanceUID     string // StudyInstanceUID (0020,000D), dotted decimal
	Reference       string // literal reference to the ImagingStudy resource, e.g. "ImagingStudy/42"
	AccessionNumber string // AccessionNumber (0008,0050): the order the report fulfils
	PatientID       string // PatientID (0010,0020): the subject, as a logical reference
	PatientSystem   string // namespace of PatientID (a URI), if known
	// PatientAssigner names the organisation that issued PatientID when
	// its namespace is known only by name (IssuerOfPatientID that is not
	// a URI or an OID).
	PatientAssigner string
	Patient         string // literal reference to the Patient resource, e.g. "Patient/7"
	// Time is when the images were taken (StudyDate/StudyTime); zero when
	// unknown, and then the report has no effectiveDateTime.
	Time time.Time
	// DateOnly says that only Time's date is known (a StudyDate without a
	// time or a zone): effectiveDateTime is the date alone, "2012-01-15".
	DateOnly bool
}

// Model identifies the report generator. Name is required.
type Model struct {
	Name         string // e.g. "radgen R2Gen IU X-Ray"
	Version      string
	Checksum     string // digest of the weights, e.g. "sha256:9f86d0…"
	Manufacturer string
}

// Option configures NewDiagnosticReport.
type Option func(*options) error

type options struct {
	lang string
	id   string
	ids  []Identifier
}

// WithLanguage sets the language of the text (a BCP-47 tag; default "en").
func WithLanguage(tag string) Option {
	return func(o *options) error {
		if !languageRE.MatchString(tag) {
			return fmt.Errorf("%w: language %q is not a BCP-47 tag", ErrInput, tag)
		}
		o.lang = tag
		return nil
	}
}

// WithID sets the resource's logical id (default none: the server assigns
// one).
func WithID(id string) Option {
	return func(o *options) error {
		if !idRE.MatchString(id) {
			return fmt.Errorf("%w: id %q (1-64 of A-Z a-z 0-9 - .)", ErrInput, id)
		}
		o.id = id
		return nil
	}
}

// WithIdentifier adds a business identifier of the report itself, such as
// the SOP Instance UID of the DICOM SR written for the same report
// (System "urn:dicom:uid", Value "urn:oid:<uid>").
func WithIdentifier(id Identifier) Option {
	return func(o *options) error {
		if id.Value == "" {
			return fmt.Errorf("%w: identifier without a value", ErrInput)
		}
		if err := checkText("identifier", id.Value); err != nil {
			return err
		}
		o.ids = append(o.ids, id)
		return nil
	}
}

var (
	uidRE      = regexp.MustCompile(`^[0-2](\.(0|[1-9][0-9]*))+$`)
	languageRE = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)
	idRE       = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)
)

// NewDiagnosticReport builds the DiagnosticReport for r (its Text is the
// findings), about study s, written by model m and issued at t. r.StudyID,
// when set and other than the study's UID, is written as an identifier of
// the report (the requester's name for the study); a report cut off at its
// maximum length (r.Truncated) says so in its conclusion and in a note on
// the finding. It returns
// an error wrapping ErrInput when r has no text, when a field holds what
// FHIR cannot carry (control characters, invalid UTF-8, a malformed UID or
// reference) or when t is zero or outside years 1-9999.
func NewDiagnosticReport(r memtrans.Report, s Study, m Model, t time.Time, opts ...Option) (*DiagnosticReport, error) {
	o := options{lang: "en"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	text := strings.TrimSpace(r.Text)
	if text == "" {
		return nil, fmt.Errorf("%w: the report has no text", ErrInput)
	}
	if err := checkText("report text", text); err != nil {
		return nil, err
	}
	if len(s.InstanceUID) > 64 || !uidRE.MatchString(s.InstanceUID) {
		return nil, fmt.Errorf("%w: StudyInstanceUID %q is not a DICOM UID", ErrInput, s.InstanceUID)
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, fmt.Errorf("%w: the model has no name", ErrInput)
	}
	for _, f := range []struct{ what, v string }{
		{"model name", m.Name}, {"model version", m.Version}, {"model checksum", m.Checksum}, {"manufacturer", m.Manufacturer},
		{"accession number", s.AccessionNumber}, {"patient id", s.PatientID}, {"patient assigner", s.PatientAssigner},
		{"study id", r.StudyID},
	} {
		if err := checkText(f.what, f.v); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ what, v string }{
		{"study reference", s.Reference}, {"patient reference", s.Patient}, {"patient system", s.PatientSystem}, {"model checksum", m.Checksum},
	} {
		if strings.IndexFunc(f.v, unicode.IsSpace) >= 0 || strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("%w: %s %q has spaces", ErrInput, f.what, f.v)
		}
	}
	issued, err := instant(t)
	if err != nil {
		return nil, err
	}
	var effective string
	switch {
	case s.Time.IsZero():
	case s.DateOnly:
		if y := s.Time.Year(); y < 1 || y > 9999 {
			return nil, fmt.Errorf("%w: study time %v", ErrInput, s.Time)
		}
		effective = s.Time.Format(time.DateOnly)
	default:
		if effective, err = instant(s.Time); err != nil {
			return nil, err
		}
	}

	security := &Meta{Security: []Coding{{System: SystemV3ObsValue, Code: CodeAIAsserted, Display: "artificial intelligence asserted"}}}
	var subject *Reference
	if s.Patient != "" || s.PatientID != "" {
		subject = &Reference{Reference: s.Patient, Type: "Patient"}
		if s.PatientID != "" {
			subject.Identifier = &Identifier{System: s.PatientSystem, Value: strings.TrimSpace(s.PatientID)}
			if a := strings.TrimSpace(s.PatientAssigner); a != "" {
				subject.Identifier.Assigner = &Reference{Display: a}
			}
		}
	}
	dev := &Device{
		ResourceType: "Device",
		ID:           deviceID,
		Meta:         security,
		Status:       "active",
		DeviceName:   []DeviceName{{Name: strings.TrimSpace(m.Name), Type: "model-name"}},
		Type:         &CodeableConcept{Text: "radiology report generator (machine-learning model)"},
		Manufacturer: strings.TrimSpace(m.Manufacturer),
	}
	if v := strings.TrimSpace(m.Version); v != "" {
		dev.Version = append(dev.Version, DeviceVersion{Type: &CodeableConcept{Text: versionModel}, Value: v})
	}
	dev.Version = append(dev.Version, DeviceVersion{Type: &CodeableConcept{Text: versionSoftware}, Value: radgen.Version})
	if m.Checksum != "" {
		dev.Identifier = []Identifier{{Type: &CodeableConcept{Text: "checksum of the model weights"}, Value: m.Checksum}}
	}
	obs := &Observation{
		ResourceType:      "Observation",
		ID:                findingID,
		Meta:              security,
		Status:            "preliminary",
		Category:          []CodeableConcept{{Coding: []Coding{{System: SystemObsCategory, Code: "imaging", Display: "Imaging"}}}},
		Code:              CodeableConcept{Coding: []Coding{{System: SystemLOINC, Code: CodeStudyFindings, Display: "Radiology Study observation (narrative)"}}, Text: "Findings"},
		Subject:           subject,
		EffectiveDateTime: effective,
		Issued:            issued,
		ValueString:       text,
		Device:            &Reference{Reference: "#" + deviceID},
		Note:              []Annotation{{Text: "Written by an AI model (" + dev.DeviceName[0].Name + "); preliminary, to be reviewed by a radiologist."}},
	}
	conclusion := text
	if r.Truncated {
		obs.Note = append(obs.Note, Annotation{Text: TruncatedNote})
		conclusion += " [" + TruncatedNote + "]"
	}
	ids := o.ids
	if id := strings.TrimSpace(r.StudyID); id != "" && id != s.InstanceUID {
		ids = append(ids, Identifier{Type: &CodeableConcept{Text: "study identifier"}, Value: id})
	}
	study := Reference{Type: "ImagingStudy", Reference: s.Reference, Identifier: &Identifier{System: SystemDICOMUID, Value: "urn:oid:" + s.InstanceUID}}
	dr := &DiagnosticReport{
		ResourceType:      "DiagnosticReport",
		ID:                o.id,
		Meta:              security,
		Language:          o.lang,
		Contained:         []ContainedResource{{Device: dev}, {Observation: obs}},
		Identifier:        ids,
		Status:            "preliminary",
		Category:          []CodeableConcept{{Coding: []Coding{{System: SystemV2Table0074, Code: "RAD", Display: "Radiology"}}}},
		Code:              CodeableConcept{Coding: []Coding{{System: SystemLOINC, Code: CodeImagingStudy, Display: "Diagnostic imaging study"}}},
		Subject:           subject,
		EffectiveDateTime: effective,
		Issued:            issued,
		Result:            []Reference{{Reference: "#" + findingID}},
		ImagingStudy:      []Reference{study},
		Conclusion:        conclusion,
		PresentedForm: []Attachment{{
			ContentType: "text/plain; charset=utf-8",
			Language:    o.lang,
			Data:        base64.StdEncoding.EncodeToString([]byte(text)),
			Title:       "Findings",
			Creation:    issued,
		}},
	}
	if a := strings.TrimSpace(s.AccessionNumber); a != "" {
		dr.BasedOn = []Reference{{Type: "ServiceRequest", Identifier: &Identifier{
			Type:  &CodeableConcept{Coding: []Coding{{System: SystemV2Table0203, Code: "ACSN", Display: "Accession ID"}}},
			Value: a,
		}}}
	}
	return dr, nil
}

// checkText refuses what a FHIR string cannot hold: invalid UTF-8 and
// control characters other than tab, line feed and carriage return.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInput, what)
	}
	for _, c := range s {
		if unicode.IsControl(c) && c != '\t' && c != '\n' && c != '\r' {
			return fmt.Errorf("%w: %s holds control character %U", ErrInput, what, c)
		}
	}
	return nil
}

// instant formats t as a FHIR instant (seconds, an optional fraction and a
// zone).
func instant(t time.Time) (string, error) {
	if t.IsZero() || t.Year() < 1 || t.Year() > 9999 {
		return "", fmt.Errorf("%w: time %v", ErrInput, t)
	}
	return t.Format(time.RFC3339Nano), nil
}

// StudyFromDICOM returns the Study of a study read from DICOM files
// (memtrans.Study.DICOM): its StudyInstanceUID, AccessionNumber and
// PatientID with IssuerOfPatientID (as the identifier's system when it is
// a URI or an OID, else as its assigner's name), and its time from
// StudyDate and StudyTime. DICOM times carry no zone: they are read in the
// header's TimezoneOffsetFromUTC when it has one, else in loc, the zone of
// the site that took the images; with neither, or without a StudyTime,
// Time holds the date alone (DateOnly). A study without a valid StudyDate
// has a zero Time.
func StudyFromDICOM(src *vision.DICOMStudy, loc *time.Location) Study {
	if src == nil || len(src.Views) == 0 || src.Views[0].Info == nil {
		return Study{}
	}
	return StudyFromDICOMInfo(src.Header(), loc)
}

// StudyFromDICOMInfo is StudyFromDICOM on one file's header.
func StudyFromDICOMInfo(h *vision.DICOMInfo, loc *time.Location) Study {
	if h == nil {
		return Study{}
	}
	s := Study{InstanceUID: h.StudyInstanceUID, AccessionNumber: h.AccessionNumber, PatientID: h.PatientID}
	if iss := strings.TrimSpace(h.IssuerOfPatientID); iss != "" && s.PatientID != "" {
		switch u, err := url.Parse(iss); {
		case uidRE.MatchString(iss) && len(iss) <= 64:
			s.PatientSystem = "urn:oid:" + iss
		case err == nil && u.Scheme != "" && (u.Opaque != "" || u.Host != "") && strings.IndexFunc(iss, unicode.IsSpace) < 0:
			s.PatientSystem = iss
		default:
			s.PatientAssigner = iss
		}
	}
	if len(h.StudyDate) != 8 {
		return s
	}
	if z, ok := dicomZone(h.TimezoneOffsetFromUTC); ok {
		loc = z
	}
	clock := strings.TrimSpace(h.StudyTime)
	if i := strings.IndexByte(clock, '.'); i >= 0 {
		clock = clock[:i]
	}
	if len(clock) == 4 || len(clock) == 2 {
		clock += "0000"[:6-len(clock)]
	}
	if loc == nil || len(clock) != 6 {
		if t, err := time.Parse("20060102", h.StudyDate); err == nil {
			s.Time, s.DateOnly = t, true
		}
		return s
	}
	if t, err := time.ParseInLocation("20060102150405", h.StudyDate+clock, loc); err == nil {
		s.Time = t
	}
	return s
}

// dicomZone reads a TimezoneOffsetFromUTC value, "+HHMM" or "-HHMM".
func dicomZone(v string) (*time.Location, bool) {
	v = strings.TrimSpace(v)
	if len(v) != 5 || (v[0] != '+' && v[0] != '-') {
		return nil, false
	}
	hh, err1 := strconv.Atoi(v[1:3])
	mm, err2 := strconv.Atoi(v[3:5])
	if err1 != nil || err2 != nil || hh > 14 || mm > 59 {
		return nil, false
	}
	off := (hh*60 + mm) * 60
	if v[0] == '-' {
		off = -off
	}
	return time.FixedZone("", off), true
}
