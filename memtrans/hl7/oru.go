package hl7

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/vision"
)

// Codes the message carries.
const (
	CodeImagingReport = "18748-4" // LOINC Diagnostic Imaging Report (OBR-4)
	CodeFindings      = "18782-3" // LOINC Radiology Study observation (narrative) (OBX-3)
	CodeStudyUID      = "110180"  // DCM Study Instance UID (OBX-3)
	Version           = "2.5.1"   // MSH-12
)

// Model identifies the report generator, the producer of the result.
// Name is required.
type Model struct {
	Name         string // e.g. "radgen R2Gen IU X-Ray"
	Version      string
	Checksum     string // digest of the weights, e.g. "sha256:9f86d0…"
	Manufacturer string
	// DeviceUID is the model's DICOM device UID (as the SR names it,
	// dicomsr.DeviceUID); written in OBX-18 when set.
	DeviceUID string
}

// Option configures NewORU.
type Option func(*options) error

type options struct {
	sendApp, sendFac, recvApp, recvFac string
	controlID                          string
	processingID                       string
}

// WithSender sets MSH-3 and MSH-4 (default RADGEN and empty).
func WithSender(application, facility string) Option {
	return func(o *options) error {
		o.sendApp, o.sendFac = application, facility
		return nil
	}
}

// WithReceiver sets MSH-5 and MSH-6, the receiving application and
// facility (default empty).
func WithReceiver(application, facility string) Option {
	return func(o *options) error {
		o.recvApp, o.recvFac = application, facility
		return nil
	}
}

// WithControlID sets MSH-10 instead of ControlID's derived one.
func WithControlID(id string) Option {
	return func(o *options) error {
		if id == "" || len(id) > 199 || Escape(id) != id {
			return fmt.Errorf("%w: control ID %q", ErrInput, truncate(id, 32))
		}
		o.controlID = id
		return nil
	}
}

// WithProcessingID sets MSH-11: P production (default), D debugging or T
// training.
func WithProcessingID(id string) Option {
	return func(o *options) error {
		if id != "P" && id != "D" && id != "T" {
			return fmt.Errorf("%w: processing ID %q", ErrInput, id)
		}
		o.processingID = id
		return nil
	}
}

// ControlID returns the message control ID (MSH-10) of model m's result
// for a study: 20 hex digits of a SHA-256 of the two, the same every time
// the same model reports the same study.
func ControlID(studyUID string, m Model) string {
	key := m.Checksum
	if key == "" {
		key = m.Name + "\x00" + m.Version
	}
	sum := sha256.Sum256([]byte("radgen oru\x00" + studyUID + "\x00" + key))
	return hex.EncodeToString(sum[:10])
}

// NewORU writes r (its Text is the report) about the study src names as
// an ORU^R01 message at time t, in ER7 with CR between segments. It
// returns an error wrapping ErrInput when r has no text, src has no view,
// the model has no name or a value is not UTF-8.
func NewORU(r memtrans.Report, src *vision.DICOMStudy, m Model, t time.Time, opts ...Option) ([]byte, error) {
	o := options{sendApp: "RADGEN", processingID: "P"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	text := strings.TrimSpace(r.Text)
	if text == "" {
		return nil, fmt.Errorf("%w: the report has no text", ErrInput)
	}
	if src == nil || len(src.Views) == 0 || src.Views[0].Info == nil {
		return nil, fmt.Errorf("%w: no DICOM source views", ErrInput)
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, fmt.Errorf("%w: the model has no name", ErrInput)
	}
	if t.IsZero() {
		return nil, fmt.Errorf("%w: no time", ErrInput)
	}
	h := src.Header()
	values := []string{text, m.Name, m.Version, m.Checksum, m.Manufacturer, m.DeviceUID, o.sendApp, o.sendFac, o.recvApp, o.recvFac,
		h.PatientID, h.PatientName, h.AccessionNumber, h.StudyInstanceUID}
	ascii := true
	for _, v := range values {
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: %q is not UTF-8", ErrInput, truncate(v, 32))
		}
		for _, c := range v {
			ascii = ascii && c < 0x80
		}
	}
	if o.controlID == "" {
		o.controlID = ControlID(h.StudyInstanceUID, m)
	}
	charset := ""
	if !ascii {
		charset = "UNICODE UTF-8"
	}
	now := t.Format("20060102150405-0700")
	studyTime := hl7Time(h.StudyDate, h.StudyTime)
	accession := Escape(h.AccessionNumber)
	modelText := strings.TrimSpace(m.Name + " " + m.Version)
	producerID := m.DeviceUID
	if producerID == "" {
		producerID = m.Name
	}
	producer := Escape(producerID) + "^" + Escape(modelText) + "^99RADGEN"
	equipment := Escape(m.Name)
	if m.DeviceUID != "" {
		equipment += "^^" + Escape(m.DeviceUID) + "^ISO"
	}

	segs := []string{
		segment("MSH", map[int]string{2: `^~\&`, 3: Escape(o.sendApp), 4: Escape(o.sendFac), 5: Escape(o.recvApp), 6: Escape(o.recvFac),
			7: now, 9: "ORU^R01^ORU_R01", 10: o.controlID, 11: o.processingID, 12: Version, 18: charset}),
		segment("PID", map[int]string{1: "1", 3: Escape(h.PatientID), 5: personName(h.PatientName), 7: dateOnly(h.PatientBirthDate), 8: sex(h.PatientSex)}),
		segment("ORC", map[int]string{1: "RE", 3: accession}),
		segment("OBR", map[int]string{1: "1", 3: accession, 4: CodeImagingReport + "^Diagnostic Imaging Report^LN", 7: studyTime,
			18: accession, 22: now, 24: "RAD", 25: "P"}),
		segment("ZDS", map[int]string{1: Escape(h.StudyInstanceUID) + "^RADGEN^Application^DICOM"}),
	}
	n := 0
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		n++
		segs = append(segs, segment("OBX", map[int]string{1: fmt.Sprint(n), 2: "TX", 3: CodeFindings + "^Radiology Study observation (narrative)^LN",
			4: "1", 5: Escape(line), 11: "P", 14: now, 15: producer, 18: equipment}))
	}
	n++
	segs = append(segs, segment("OBX", map[int]string{1: fmt.Sprint(n), 2: "ST", 3: CodeStudyUID + "^Study Instance UID^DCM",
		4: "2", 5: Escape(h.StudyInstanceUID), 11: "P", 14: now, 15: producer, 18: equipment}))
	return []byte(strings.Join(segs, "\r") + "\r"), nil
}

// personName maps a DICOM person name (family^given^middle^prefix^suffix)
// to an HL7 XPN (family^given^middle^suffix^prefix).
func personName(pn string) string {
	c := strings.Split(strings.SplitN(pn, "=", 2)[0], "^") // the alphabetic group
	for len(c) < 5 {
		c = append(c, "")
	}
	for i := range c {
		c[i] = Escape(strings.TrimSpace(c[i]))
	}
	return strings.TrimRight(strings.Join([]string{c[0], c[1], c[2], c[4], c[3]}, "^"), "^")
}

func dateOnly(da string) string {
	if len(da) == 8 && strings.Trim(da, "0123456789") == "" {
		return da
	}
	return ""
}

// hl7Time joins a DICOM date and time (HHMMSS.FFFFFF) into an HL7 DTM.
func hl7Time(da, tm string) string {
	d := dateOnly(da)
	if d == "" {
		return ""
	}
	tm = strings.TrimSpace(tm)
	if i := strings.IndexByte(tm, '.'); i >= 0 {
		tm = tm[:i]
	}
	if len(tm)%2 == 1 || len(tm) > 6 || strings.Trim(tm, "0123456789") != "" {
		tm = ""
	}
	return d + tm
}

func sex(s string) string {
	switch s {
	case "M", "F", "O":
		return s
	}
	return ""
}
