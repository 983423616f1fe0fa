package dicomsr

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/big"
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

// ErrInput is wrapped by the errors New returns for input that cannot
// make a valid document.
var ErrInput = errors.New("dicomsr: bad input")

// UIDs the package writes.
const (
	// BasicTextSRStorage is the SOP Class of the documents written.
	BasicTextSRStorage = "1.2.840.10008.5.1.4.1.1.88.11"
	// ImplementationClassUID identifies radgen as the writer of the file
	// (File Meta Information, (0002,0012)): a UUID-derived UID fixed for
	// the project.
	ImplementationClassUID = "2.25.138806990217337431890006535593185538385"
	// ImplementationVersionName is (0002,0013): "RADGEN_" and
	// radgen.Version.
	ImplementationVersionName = "RADGEN_" + radgen.Version

	explicitVRLittleEndian = "1.2.840.10008.1.2.1"
)

// Model identifies the report generator. Name is required.
type Model struct {
	Name         string // e.g. "radgen R2Gen IU X-Ray"
	Version      string
	Checksum     string // digest of the weights, e.g. "sha256:9f86d0…"
	Manufacturer string
}

// Option configures New.
type Option func(*options) error

type options struct {
	seriesUID, instanceUID string
	seriesNumber           int
	lang                   Code
	random                 io.Reader
}

// WithUIDs sets the Series and SOP Instance UIDs of the document instead
// of new random ones (for a caller that allocates UIDs under its own
// root).
func WithUIDs(series, instance string) Option {
	return func(o *options) error {
		for _, u := range []string{series, instance} {
			if !validUID(u) {
				return fmt.Errorf("%w: %q is not a DICOM UID", ErrInput, u)
			}
		}
		o.seriesUID, o.instanceUID = series, instance
		return nil
	}
}

// WithSeriesNumber sets the SR series' number (default 999).
func WithSeriesNumber(n int) Option {
	return func(o *options) error {
		if n < 0 || n > 2147483647 {
			return fmt.Errorf("%w: series number %d", ErrInput, n)
		}
		o.seriesNumber = n
		return nil
	}
}

// WithLanguage sets the language of the text, an RFC 5646 tag and its
// name (default "en", "English").
func WithLanguage(tag, name string) Option {
	return func(o *options) error {
		if !languageRE.MatchString(tag) || len(tag) > 16 || strings.TrimSpace(name) == "" || len(name) > 64 {
			return fmt.Errorf("%w: language %q (%q)", ErrInput, tag, name)
		}
		o.lang = Code{tag, "RFC5646", name}
		return nil
	}
}

// WithRandom sets the source of the random UUIDs behind new UIDs (default
// crypto/rand).
func WithRandom(r io.Reader) Option {
	return func(o *options) error {
		if r == nil {
			return fmt.Errorf("%w: nil random source", ErrInput)
		}
		o.random = r
		return nil
	}
}

var (
	uidRE      = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))+$`)
	languageRE = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)
)

func validUID(u string) bool { return len(u) <= 64 && uidRE.MatchString(u) }

// Document is a Basic Text SR instance ready to be written.
type Document struct {
	SeriesInstanceUID string
	SOPInstanceUID    string
	file              []byte
}

// WriteTo writes the Part 10 file.
func (d *Document) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(d.file)
	return int64(n), err
}

// Bytes returns the Part 10 file (shared with d: do not modify it).
func (d *Document) Bytes() []byte { return d.file }

// New builds the SR document for r (its Text is the finding), about the
// study whose views src names, written by model m at t (ContentDate and
// ContentTime, in t's location). Values longer than their attribute's VR
// allows are cut in the equipment and study attributes (the content tree
// keeps the model's name and checksum whole). It returns an error wrapping ErrInput when
// r has no text, when src has no view or a view lacks its SOP Class,
// SOP Instance or Series Instance UID, when the model has no name, or
// when a value cannot be carried by its VR (a UID that is not a UID, a
// control character in a name).
func New(r memtrans.Report, src *vision.DICOMStudy, m Model, t time.Time, opts ...Option) (*Document, error) {
	o := options{seriesNumber: 999, lang: Code{"en", "RFC5646", "English"}, random: rand.Reader}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	text := strings.TrimSpace(r.Text)
	if text == "" {
		return nil, fmt.Errorf("%w: the report has no text", ErrInput)
	}
	if !utf8.ValidString(text) || strings.ContainsFunc(text, func(c rune) bool { return unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t' }) {
		return nil, fmt.Errorf("%w: the report text is not printable UTF-8", ErrInput)
	}
	if src == nil || len(src.Views) == 0 || src.Views[0].Info == nil {
		return nil, fmt.Errorf("%w: no DICOM source views", ErrInput)
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, fmt.Errorf("%w: the model has no name", ErrInput)
	}
	if t.IsZero() || t.Year() < 1 || t.Year() > 9999 {
		return nil, fmt.Errorf("%w: time %v", ErrInput, t)
	}
	h := src.Header()
	if !validUID(h.StudyInstanceUID) {
		return nil, fmt.Errorf("%w: StudyInstanceUID %q", ErrInput, h.StudyInstanceUID)
	}
	for _, v := range src.Views {
		if v.Info == nil || v.Info.StudyInstanceUID != h.StudyInstanceUID {
			return nil, fmt.Errorf("%w: view %s is not of study %s", ErrInput, v.Path, h.StudyInstanceUID)
		}
		for _, u := range []struct{ what, uid string }{{"SOP Class", v.Info.SOPClassUID}, {"SOP Instance", v.Info.SOPInstanceUID}, {"Series Instance", v.Info.SeriesInstanceUID}} {
			if !validUID(u.uid) {
				return nil, fmt.Errorf("%w: view %s: %s UID %q", ErrInput, v.Path, u.what, u.uid)
			}
		}
	}
	for _, f := range []struct{ what, v string }{
		{"model name", m.Name}, {"model version", m.Version}, {"model checksum", m.Checksum}, {"manufacturer", m.Manufacturer},
		{"patient name", h.PatientName}, {"patient id", h.PatientID}, {"accession number", h.AccessionNumber},
		{"referring physician", h.ReferringPhysicianName}, {"study id", h.StudyID}, {"study description", h.StudyDescription},
	} {
		if !utf8.ValidString(f.v) || strings.ContainsFunc(f.v, unicode.IsControl) || strings.Contains(f.v, `\`) {
			return nil, fmt.Errorf("%w: %s %q", ErrInput, f.what, f.v)
		}
	}
	doc := &Document{SeriesInstanceUID: o.seriesUID, SOPInstanceUID: o.instanceUID}
	if doc.SeriesInstanceUID == "" {
		var err error
		if doc.SeriesInstanceUID, err = newUID(o.random); err != nil {
			return nil, err
		}
		if doc.SOPInstanceUID, err = newUID(o.random); err != nil {
			return nil, err
		}
	}

	// The character set: the default repertoire when every value is
	// ASCII, Latin-1 (ISO_IR 100) when it suffices, UTF-8 (ISO_IR 192)
	// otherwise.
	charset, enc := characterSet(text, m.Name, m.Version, m.Checksum, m.Manufacturer, h.PatientName, h.PatientID,
		h.AccessionNumber, h.ReferringPhysicianName, h.StudyID, h.StudyDescription)

	var ds dataset
	// SOP Common.
	if charset != "" {
		ds.str(0x00080005, "CS", charset)
	}
	ds.str(0x00080016, "UI", BasicTextSRStorage)
	ds.str(0x00080018, "UI", doc.SOPInstanceUID)
	date, clock := t.Format("20060102"), t.Format("150405.000000")
	ds.str(0x00080012, "DA", date) // Instance Creation Date
	ds.str(0x00080013, "TM", clock)
	// Patient (all Type 2).
	ds.str(0x00100010, "PN", enc(h.PatientName))
	ds.str(0x00100020, "LO", enc(h.PatientID))
	ds.str(0x00100030, "DA", dicomDate(h.PatientBirthDate))
	ds.str(0x00100040, "CS", sex(h.PatientSex))
	// General Study.
	ds.str(0x0020000d, "UI", h.StudyInstanceUID)
	ds.str(0x00080020, "DA", dicomDate(h.StudyDate))
	ds.str(0x00080030, "TM", dicomTime(h.StudyTime))
	ds.str(0x00080090, "PN", enc(h.ReferringPhysicianName))
	ds.str(0x00200010, "SH", enc(truncate(h.StudyID, 16)))
	ds.str(0x00080050, "SH", enc(truncate(h.AccessionNumber, 16)))
	if h.StudyDescription != "" {
		ds.str(0x00081030, "LO", enc(truncate(h.StudyDescription, 64)))
	}
	// SR Document Series.
	ds.str(0x00080060, "CS", "SR")
	ds.str(0x0020000e, "UI", doc.SeriesInstanceUID)
	ds.str(0x00200011, "IS", strconv.Itoa(o.seriesNumber))
	ds.str(0x0008103e, "LO", "AI-generated report (preliminary)")
	ds.seq(0x00081111) // Referenced Performed Procedure Step Sequence, Type 2, empty
	// General Equipment.
	ds.str(0x00080070, "LO", enc(truncate(m.Manufacturer, 64)))
	ds.str(0x00081090, "LO", enc(truncate(m.Name, 64)))
	ds.str(0x00181020, "LO", softwareVersions(m, enc))
	if m.Checksum != "" && utf8.RuneCountInString(m.Checksum) <= 64 {
		ds.str(0x00181000, "LO", enc(m.Checksum)) // too long: in the content tree only
	}
	// SOP Common: IHE AI Results (AIR) asks the algorithm to be named in
	// the Contributing Equipment Sequence, its purpose Processing
	// Algorithm.
	ds.seq(0x0018a001, contributingEquipment(m, enc, t))
	// SR Document General.
	ds.str(0x00200013, "IS", "1")
	ds.str(0x0040a491, "CS", "PARTIAL")
	ds.str(0x0040a492, "LO", "Generated by a machine-learning model")
	ds.str(0x0040a493, "CS", "UNVERIFIED")
	ds.str(0x0040a496, "CS", "PRELIMINARY")
	ds.str(0x00080023, "DA", date) // Content Date
	ds.str(0x00080033, "TM", clock)
	ds.seq(0x0040a372) // Performed Procedure Code Sequence, Type 2, empty
	ds.seq(0x0040a375, evidence(src))
	// SR Document Content: the root CONTAINER and its tree.
	ds.str(0x0040a040, "CS", "CONTAINER")
	ds.code(0x0040a043, Code{"18748-4", "LN", "Diagnostic Imaging Report"})
	ds.str(0x0040a050, "CS", "SEPARATE")
	var tmpl dataset
	tmpl.str(0x00080105, "CS", "DCMR")
	tmpl.str(0x0040db00, "CS", "2000")
	ds.seq(0x0040a504, tmpl)

	deviceName := enc(strings.TrimSpace(m.Name))
	modelName := deviceName
	if m.Version != "" {
		modelName += " " + enc(strings.TrimSpace(m.Version))
	}
	root := []dataset{
		codeItem("HAS CONCEPT MOD", Code{"121049", "DCM", "Language of Content Item and Descendants"}, o.lang),
		codeItem("HAS OBS CONTEXT", Code{"121005", "DCM", "Observer Type"}, Code{"121007", "DCM", "Device"}),
		uidItem("HAS OBS CONTEXT", Code{"121012", "DCM", "Device Observer UID"}, deviceUID(m)),
		textItem("HAS OBS CONTEXT", Code{"121013", "DCM", "Device Observer Name"}, deviceName),
	}
	if m.Manufacturer != "" {
		root = append(root, textItem("HAS OBS CONTEXT", Code{"121014", "DCM", "Device Observer Manufacturer"}, enc(strings.TrimSpace(m.Manufacturer))))
	}
	root = append(root, textItem("HAS OBS CONTEXT", Code{"121015", "DCM", "Device Observer Model Name"}, modelName))
	if m.Checksum != "" {
		root = append(root, textItem("HAS OBS CONTEXT", Code{"121016", "DCM", "Device Observer Serial Number"}, enc(m.Checksum)))
	}
	finding := textItem("CONTAINS", Code{"121071", "DCM", "Finding"}, enc(text))
	var images []dataset
	for _, v := range src.Views {
		var img dataset
		img.str(0x0040a010, "CS", "INFERRED FROM")
		img.str(0x0040a040, "CS", "IMAGE")
		img.seq(0x00081199, sopRef(v.Info.SOPClassUID, v.Info.SOPInstanceUID))
		images = append(images, img)
	}
	finding.seq(0x0040a730, images...)
	var findings dataset
	findings.str(0x0040a010, "CS", "CONTAINS")
	findings.str(0x0040a040, "CS", "CONTAINER")
	findings.code(0x0040a043, Code{"121070", "DCM", "Findings"})
	findings.str(0x0040a050, "CS", "SEPARATE")
	findings.seq(0x0040a730, finding)
	root = append(root, findings)
	ds.seq(0x0040a730, root...)

	doc.file = part10(BasicTextSRStorage, doc.SOPInstanceUID, encode(nil, ds))
	return doc, nil
}

// DefaultManufacturer is the Manufacturer written where the model names
// none (the Contributing Equipment Sequence requires one).
const DefaultManufacturer = "radgen"

// contributingEquipment is the item of the Contributing Equipment
// Sequence (PS3.3 C.12.1) that IHE AIR (Rad TF-3 6.5.3.2) asks of an AI
// result: purpose (Newcode1, 99IHE, "Processing Algorithm"),
// manufacturer, model name, software version and device UID.
func contributingEquipment(m Model, enc func(string) string, t time.Time) dataset {
	var it dataset
	manufacturer := strings.TrimSpace(m.Manufacturer)
	if manufacturer == "" {
		manufacturer = DefaultManufacturer
	}
	it.str(0x00080070, "LO", enc(truncate(manufacturer, 64)))
	it.str(0x00081090, "LO", enc(truncate(m.Name, 64)))
	it.str(0x00181020, "LO", softwareVersions(m, enc))
	it.str(0x00181002, "UI", deviceUID(m))
	it.str(0x0018a002, "DT", t.Format("20060102150405.000000-0700"))
	it.str(0x0018a003, "ST", "Report generation")
	it.code(0x0040a170, Code{"Newcode1", "99IHE", "Processing Algorithm"})
	return it
}

// software is the value of Software Versions (0018,1020) that names the
// program that wrote a document: "radgen" and radgen.Version.
const software = "radgen " + radgen.Version

// softwareVersions is the value of Software Versions (0018,1020), LO of
// VM 1-n: the model's version when it has one, then software.
func softwareVersions(m Model, enc func(string) string) string {
	if v := strings.TrimSpace(m.Version); v != "" {
		return enc(truncate(v, 64)) + `\` + software
	}
	return software
}

// StudyUIDs returns the Series and SOP Instance UIDs of model m's document
// about the study studyUID, derived from the two (the study's UID and the
// model's device UID, which follows its checksum): the same model on the
// same study always gets the same UIDs, so that a document stored twice,
// by a retry or by a worker restarted after a crash, is one instance in
// the PACS, and a PACS can be asked whether it holds it. Pass them to
// WithUIDs. Each is "2.25." and a name-based UUID (version 8, RFC 9562)
// of SHA-256.
func StudyUIDs(studyUID string, m Model) (series, instance string) {
	base := "radgen sr\x00" + studyUID + "\x00" + deviceUID(m)
	return hashUID(base + "\x00series"), hashUID(base + "\x00instance")
}

// characterSet returns the Specific Character Set that holds every value
// ("" for the default repertoire) and the conversion of a UTF-8 value to
// it.
func characterSet(values ...string) (string, func(string) string) {
	maxRune := rune(0)
	for _, v := range values {
		for _, c := range v {
			maxRune = max(maxRune, c)
		}
	}
	switch {
	case maxRune < 0x80:
		return "", func(s string) string { return s }
	case maxRune <= 0xff:
		return "ISO_IR 100", func(s string) string {
			b := make([]byte, 0, len(s))
			for _, c := range s {
				b = append(b, byte(c)) // Latin-1 is the first 256 code points
			}
			return string(b)
		}
	}
	return "ISO_IR 192", func(s string) string { return s }
}

// evidence lists the source study, its series and the instances of the
// views used (Hierarchical SOP Instance Reference Macro, PS3.3 C.17.2.1).
func evidence(src *vision.DICOMStudy) dataset {
	var series []dataset
	index := map[string]int{}
	var refs [][]dataset
	for _, v := range src.Views {
		i, ok := index[v.Info.SeriesInstanceUID]
		if !ok {
			i = len(series)
			index[v.Info.SeriesInstanceUID] = i
			var s dataset
			s.str(0x0020000e, "UI", v.Info.SeriesInstanceUID)
			series = append(series, s)
			refs = append(refs, nil)
		}
		refs[i] = append(refs[i], sopRef(v.Info.SOPClassUID, v.Info.SOPInstanceUID))
	}
	for i := range series {
		series[i].seq(0x00081199, refs[i]...)
	}
	var study dataset
	study.str(0x0020000d, "UI", src.Header().StudyInstanceUID)
	study.seq(0x00081115, series...)
	return study
}

func sopRef(class, instance string) dataset {
	var r dataset
	r.str(0x00081150, "UI", class)
	r.str(0x00081155, "UI", instance)
	return r
}

func item(rel, valueType string, name Code) dataset {
	var d dataset
	d.str(0x0040a010, "CS", rel)
	d.str(0x0040a040, "CS", valueType)
	d.code(0x0040a043, name)
	return d
}

func codeItem(rel string, name, value Code) dataset {
	d := item(rel, "CODE", name)
	d.code(0x0040a168, value)
	return d
}

func textItem(rel string, name Code, text string) dataset {
	d := item(rel, "TEXT", name)
	d.str(0x0040a160, "UT", text)
	return d
}

func uidItem(rel string, name Code, uid string) dataset {
	d := item(rel, "UIDREF", name)
	d.str(0x0040a124, "UI", uid)
	return d
}

// newUID returns "2.25." and the decimal value of a random version 4 UUID.
func newUID(random io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(random, u[:]); err != nil {
		return "", fmt.Errorf("dicomsr: drawing a UID: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return "2.25." + new(big.Int).SetBytes(u[:]).String(), nil
}

// DeviceUID returns the UID the document gives model m as a device (the
// Device Observer UID and the Contributing Equipment's Device UID), for
// other messages about the same result (an HL7 v2 OBX-18) to name it the
// same way.
func DeviceUID(m Model) string { return deviceUID(m) }

// deviceUID derives the Device Observer UID from the model's checksum (or
// its name and version): the same weights get the same UID. It is
// "2.25." and a name-based UUID (version 8, RFC 9562) of SHA-256.
func deviceUID(m Model) string {
	key := m.Checksum
	if key == "" {
		key = m.Name + "\x00" + m.Version
	}
	return hashUID("radgen device\x00" + key)
}

// hashUID returns "2.25." and the UUID (version 8, RFC 9562) made of the
// first 16 bytes of key's SHA-256.
func hashUID(key string) string {
	sum := sha256.Sum256([]byte(key))
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return "2.25." + new(big.Int).SetBytes(u).String()
}

// dicomDate keeps a DA value that is one (YYYYMMDD), and empties others
// (a Type 2 attribute may be empty; a malformed one may not be copied).
func dicomDate(s string) string {
	if len(s) != 8 || strings.Trim(s, "0123456789") != "" {
		return ""
	}
	return s
}

// dicomTime keeps a TM value that is one (HH[MM[SS[.F{1,6}]]]).
func dicomTime(s string) string {
	if !tmRE.MatchString(s) {
		return ""
	}
	return s
}

var tmRE = regexp.MustCompile(`^([01][0-9]|2[0-3])([0-5][0-9]([0-5][0-9](\.[0-9]{1,6})?)?)?$`)

// sex keeps the defined terms of Patient's Sex.
func sex(s string) string {
	switch s {
	case "M", "F", "O":
		return s
	}
	return ""
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
