package dicomsr_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/vision"
)

const reportText = "the heart is normal in size . the lungs are clear . no pneumothorax ."

var (
	srTime  = time.Date(2026, 11, 24, 9, 30, 15, 123456000, time.UTC)
	srModel = dicomsr.Model{Name: "radgen R2Gen IU X-Ray", Version: "0.1.0", Checksum: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Manufacturer: "radgen"}
)

// testSource is a two-view study: a PA and a lateral in two series.
func testSource() *vision.DICOMStudy {
	head := vision.DICOMInfo{
		StudyInstanceUID: "1.2.826.0.1.3680043.8.498.1", PatientName: "Müller^Jörg", PatientID: "PID-7",
		PatientBirthDate: "19700101", PatientSex: "M", StudyDate: "20261123", StudyTime: "140500",
		AccessionNumber: "ACC42", ReferringPhysicianName: "Who^Doctor", StudyID: "S1", StudyDescription: "XR CHEST PA AND LATERAL",
	}
	pa, lat := head, head
	pa.SOPClassUID, pa.SOPInstanceUID, pa.SeriesInstanceUID, pa.ViewPosition = "1.2.840.10008.5.1.4.1.1.1.1", "1.2.826.0.1.3680043.8.498.1.1.1", "1.2.826.0.1.3680043.8.498.1.1", "PA"
	lat.SOPClassUID, lat.SOPInstanceUID, lat.SeriesInstanceUID, lat.ViewPosition = "1.2.840.10008.5.1.4.1.1.1.1", "1.2.826.0.1.3680043.8.498.1.2.1", "1.2.826.0.1.3680043.8.498.1.2", "LL"
	return &vision.DICOMStudy{
		StudyInstanceUID: head.StudyInstanceUID,
		Views:            []vision.DICOMView{{Path: "pa.dcm", Kind: vision.ViewFrontal, Info: &pa}, {Path: "lat.dcm", Kind: vision.ViewLateral, Info: &lat}},
	}
}

// node is a parsed data element: a value or, for SQ, items.
type node struct {
	tag   uint32
	vr    string
	value []byte
	items [][]node
}

// parseSR reads a Part 10 file, explicit VR little endian with defined
// lengths (what the package writes), into its file meta elements and its
// data set.
func parseSR(b []byte) (meta, ds []node, err error) {
	if len(b) < 132 || string(b[128:132]) != "DICM" {
		return nil, nil, errors.New("no DICM preamble")
	}
	all, err := parseElements(b[132:], 0)
	if err != nil {
		return nil, nil, err
	}
	for i, n := range all {
		if n.tag>>16 != 0x0002 {
			return all[:i], all[i:], nil
		}
	}
	return all, nil, nil
}

func parseElements(b []byte, depth int) ([]node, error) {
	if depth > 16 {
		return nil, errors.New("too deep")
	}
	var out []node
	var last uint32
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("truncated element header")
		}
		t := uint32(binary.LittleEndian.Uint16(b))<<16 | uint32(binary.LittleEndian.Uint16(b[2:]))
		if len(out) > 0 && t <= last {
			return nil, fmt.Errorf("(%08x) after (%08x): not in ascending order", t, last)
		}
		last = t
		vr := string(b[4:6])
		var vl uint32
		switch vr {
		case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
			if len(b) < 12 {
				return nil, fmt.Errorf("truncated long header")
			}
			vl, b = binary.LittleEndian.Uint32(b[8:]), b[12:]
		default:
			vl, b = uint32(binary.LittleEndian.Uint16(b[6:])), b[8:]
		}
		if int64(vl) > int64(len(b)) || vl%2 == 1 {
			return nil, fmt.Errorf("(%08x) %s: length %d of %d left", t, vr, vl, len(b))
		}
		n := node{tag: t, vr: vr, value: b[:vl]}
		if vr == "SQ" {
			rest := b[:vl]
			for len(rest) > 0 {
				if len(rest) < 8 || binary.LittleEndian.Uint32(rest) != 0xe000fffe {
					return nil, fmt.Errorf("(%08x): not an item", t)
				}
				il := binary.LittleEndian.Uint32(rest[4:])
				if int64(il) > int64(len(rest)-8) {
					return nil, fmt.Errorf("(%08x): item of %d bytes", t, il)
				}
				item, err := parseElements(rest[8:8+il], depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
				rest = rest[8+il:]
			}
		}
		out = append(out, n)
		b = b[vl:]
	}
	return out, nil
}

func find(ds []node, tag uint32) *node {
	for i := range ds {
		if ds[i].tag == tag {
			return &ds[i]
		}
	}
	return nil
}

// str returns a text element's value without padding ("" when absent).
func str(ds []node, tag uint32) string {
	n := find(ds, tag)
	if n == nil {
		return ""
	}
	return strings.TrimRight(string(n.value), "\x00 ")
}

func codeOf(ds []node, tag uint32) dicomsr.Code {
	n := find(ds, tag)
	if n == nil || len(n.items) != 1 {
		return dicomsr.Code{}
	}
	it := n.items[0]
	return dicomsr.Code{Value: str(it, 0x00080100), Scheme: str(it, 0x00080102), Meaning: str(it, 0x00080104)}
}

func newDoc(t *testing.T, opts ...dicomsr.Option) *dicomsr.Document {
	t.Helper()
	doc, err := dicomsr.New(memtrans.Report{StudyID: "x", Text: reportText}, testSource(), srModel, srTime, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestRoundTrip parses the written file and checks every module.
func TestRoundTrip(t *testing.T) {
	doc := newDoc(t)
	meta, ds, err := parseSR(doc.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if str(meta, 0x00020010) != "1.2.840.10008.1.2.1" || str(meta, 0x00020002) != dicomsr.BasicTextSRStorage || str(meta, 0x00020003) != doc.SOPInstanceUID {
		t.Errorf("file meta: %q %q %q", str(meta, 0x00020010), str(meta, 0x00020002), str(meta, 0x00020003))
	}
	gl := find(meta, 0x00020000)
	var metaLen int
	for _, n := range meta[1:] {
		metaLen += 8 + len(n.value)
		if n.vr == "OB" {
			metaLen += 4
		}
	}
	if gl == nil || int(binary.LittleEndian.Uint32(gl.value)) != metaLen {
		t.Errorf("group length %v, want %d", gl, metaLen)
	}
	src := testSource()
	h := src.Header()
	for tag, want := range map[uint32]string{
		0x00080005: "ISO_IR 100", 0x00080016: dicomsr.BasicTextSRStorage, 0x00080018: doc.SOPInstanceUID,
		0x00100010: "M\xfcller^J\xf6rg", 0x00100020: h.PatientID, 0x00100030: h.PatientBirthDate, 0x00100040: h.PatientSex,
		0x0020000d: h.StudyInstanceUID, 0x00080020: h.StudyDate, 0x00080030: h.StudyTime, 0x00080050: h.AccessionNumber,
		0x00080090: h.ReferringPhysicianName, 0x00200010: h.StudyID, 0x00081030: h.StudyDescription,
		0x00080060: "SR", 0x0020000e: doc.SeriesInstanceUID, 0x00200011: "999", 0x00200013: "1",
		0x0040a491: "PARTIAL", 0x0040a493: "UNVERIFIED", 0x0040a496: "PRELIMINARY",
		0x00080023: "20261124", 0x00080033: "093015.123456",
		0x00080070: "radgen", 0x00081090: srModel.Name, 0x00181020: srModel.Version + `\` + "radgen " + radgen.Version,
		0x0040a040: "CONTAINER", 0x0040a050: "SEPARATE",
	} {
		if got := str(ds, tag); got != want {
			t.Errorf("(%04X,%04X) = %q, want %q", tag>>16, tag&0xffff, got, want)
		}
	}
	if find(ds, 0x00181000) != nil {
		t.Errorf("a checksum of 71 characters written as Device Serial Number (LO, 64)")
	}
	for _, tag := range []uint32{0x00081111, 0x0040a372} {
		if n := find(ds, tag); n == nil || len(n.items) != 0 {
			t.Errorf("Type 2 sequence (%04X,%04X): %+v", tag>>16, tag&0xffff, n)
		}
	}
	// Evidence: the study, its two series, one instance each.
	ev := find(ds, 0x0040a375)
	if ev == nil || len(ev.items) != 1 || str(ev.items[0], 0x0020000d) != h.StudyInstanceUID {
		t.Fatalf("evidence %+v", ev)
	}
	series := find(ev.items[0], 0x00081115)
	if series == nil || len(series.items) != 2 {
		t.Fatalf("evidence series %+v", series)
	}
	for i, v := range src.Views {
		s := series.items[i]
		refs := find(s, 0x00081199)
		if str(s, 0x0020000e) != v.Info.SeriesInstanceUID || refs == nil || len(refs.items) != 1 ||
			str(refs.items[0], 0x00081150) != v.Info.SOPClassUID || str(refs.items[0], 0x00081155) != v.Info.SOPInstanceUID {
			t.Errorf("evidence series %d: %+v", i, s)
		}
	}
	// Template and content tree.
	tmpl := find(ds, 0x0040a504)
	if tmpl == nil || str(tmpl.items[0], 0x00080105) != "DCMR" || str(tmpl.items[0], 0x0040db00) != "2000" {
		t.Errorf("template %+v", tmpl)
	}
	if c := codeOf(ds, 0x0040a043); c != (dicomsr.Code{Value: "18748-4", Scheme: "LN", Meaning: "Diagnostic Imaging Report"}) {
		t.Errorf("title %+v", c)
	}
	content := find(ds, 0x0040a730)
	if content == nil {
		t.Fatal("no content sequence")
	}
	got := map[string]string{}
	var findings []node
	for _, it := range content.items {
		name := codeOf(it, 0x0040a043)
		key := str(it, 0x0040a010) + " " + str(it, 0x0040a040) + " " + name.Value
		switch str(it, 0x0040a040) {
		case "CODE":
			got[key] = codeOf(it, 0x0040a168).Value
		case "TEXT":
			got[key] = str(it, 0x0040a160)
		case "UIDREF":
			got[key] = str(it, 0x0040a124)
		case "CONTAINER":
			findings = it
			got[key] = ""
		}
	}
	devUID := got["HAS OBS CONTEXT UIDREF 121012"]
	if !regexp.MustCompile(`^2\.25\.[1-9][0-9]*$`).MatchString(devUID) || len(devUID) > 64 {
		t.Errorf("device observer UID %q", devUID)
	}
	want := map[string]string{
		"HAS CONCEPT MOD CODE 121049":   "en",
		"HAS OBS CONTEXT CODE 121005":   "121007",
		"HAS OBS CONTEXT UIDREF 121012": devUID,
		"HAS OBS CONTEXT TEXT 121013":   srModel.Name,
		"HAS OBS CONTEXT TEXT 121014":   srModel.Manufacturer,
		"HAS OBS CONTEXT TEXT 121015":   srModel.Name + " " + srModel.Version,
		"HAS OBS CONTEXT TEXT 121016":   srModel.Checksum,
		"CONTAINS CONTAINER 121070":     "",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("root items\n got %v\nwant %v", got, want)
	}
	fc := find(findings, 0x0040a730)
	if fc == nil || len(fc.items) != 1 {
		t.Fatalf("findings container %+v", fc)
	}
	f := fc.items[0]
	if str(f, 0x0040a010) != "CONTAINS" || str(f, 0x0040a040) != "TEXT" || codeOf(f, 0x0040a043).Value != "121071" || str(f, 0x0040a160) != reportText {
		t.Errorf("finding %q %q %+v %q", str(f, 0x0040a010), str(f, 0x0040a040), codeOf(f, 0x0040a043), str(f, 0x0040a160))
	}
	imgs := find(f, 0x0040a730)
	if imgs == nil || len(imgs.items) != 2 {
		t.Fatalf("finding's images %+v", imgs)
	}
	for i, v := range src.Views {
		it := imgs.items[i]
		ref := find(it, 0x00081199)
		if str(it, 0x0040a010) != "INFERRED FROM" || str(it, 0x0040a040) != "IMAGE" || ref == nil || str(ref.items[0], 0x00081155) != v.Info.SOPInstanceUID {
			t.Errorf("image %d: %+v", i, it)
		}
	}
}

// TestSoftwareVersions: Software Versions (0018,1020) of the General
// Equipment and of the Contributing Equipment item name the model's version
// when it has one, then radgen's; the File Meta Information's
// Implementation Version Name is radgen's, within its 16 characters (SH).
func TestSoftwareVersions(t *testing.T) {
	if want := "RADGEN_" + radgen.Version; dicomsr.ImplementationVersionName != want || len(want) > 16 {
		t.Errorf("ImplementationVersionName %q, want %q of at most 16 characters", dicomsr.ImplementationVersionName, want)
	}
	unversioned := srModel
	unversioned.Version = ""
	for _, c := range []struct {
		m    dicomsr.Model
		want string
	}{
		{srModel, "0.1.0\\radgen " + radgen.Version},
		{unversioned, "radgen " + radgen.Version},
	} {
		doc, err := dicomsr.New(memtrans.Report{Text: reportText}, testSource(), c.m, srTime)
		if err != nil {
			t.Fatal(err)
		}
		meta, ds, err := parseSR(doc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if got := str(meta, 0x00020013); got != "RADGEN_"+radgen.Version {
			t.Errorf("(0002,0013) %q", got)
		}
		if got := str(ds, 0x00181020); got != c.want {
			t.Errorf("model version %q: General Equipment's (0018,1020) %q, want %q", c.m.Version, got, c.want)
		}
		eq := find(ds, 0x0018a001)
		if eq == nil || len(eq.items) != 1 {
			t.Fatalf("Contributing Equipment Sequence %+v", eq)
		}
		if got := str(eq.items[0], 0x00181020); got != c.want {
			t.Errorf("model version %q: Contributing Equipment's (0018,1020) %q, want %q", c.m.Version, got, c.want)
		}
	}
}

// TestReadBack: the project's own DICOM header reader reads the SR.
func TestReadBack(t *testing.T) {
	doc := newDoc(t)
	info, err := vision.ReadDICOMInfo(bytes.NewReader(doc.Bytes()), int64(len(doc.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	h := testSource().Header()
	if info.SOPInstanceUID != doc.SOPInstanceUID || info.SeriesInstanceUID != doc.SeriesInstanceUID || info.StudyInstanceUID != h.StudyInstanceUID ||
		info.PatientName != h.PatientName || info.Modality != "SR" || info.SOPClassUID != dicomsr.BasicTextSRStorage || info.HasPixelData || info.UnknownCharacter {
		t.Errorf("read back %+v", info)
	}
}

func TestUIDs(t *testing.T) {
	a, b := newDoc(t), newDoc(t)
	uid := regexp.MustCompile(`^2\.25\.(0|[1-9][0-9]*)$`)
	for _, u := range []string{a.SOPInstanceUID, a.SeriesInstanceUID, b.SOPInstanceUID} {
		if !uid.MatchString(u) || len(u) > 64 {
			t.Errorf("UID %q", u)
		}
	}
	if a.SOPInstanceUID == b.SOPInstanceUID || a.SeriesInstanceUID == b.SeriesInstanceUID || a.SOPInstanceUID == a.SeriesInstanceUID {
		t.Errorf("UIDs repeat: %s %s %s", a.SOPInstanceUID, b.SOPInstanceUID, a.SeriesInstanceUID)
	}
	// A seeded source makes the document deterministic.
	seeded := func() *dicomsr.Document {
		return newDoc(t, dicomsr.WithRandom(rand.NewChaCha8([32]byte{1})))
	}
	if !bytes.Equal(seeded().Bytes(), seeded().Bytes()) {
		t.Error("two documents from the same seed differ")
	}
	fixed := newDoc(t, dicomsr.WithUIDs("1.2.3.4", "1.2.3.4.5"), dicomsr.WithSeriesNumber(7))
	_, ds, err := parseSR(fixed.Bytes())
	if err != nil || fixed.SOPInstanceUID != "1.2.3.4.5" || str(ds, 0x0020000e) != "1.2.3.4" || str(ds, 0x00200011) != "7" {
		t.Errorf("fixed UIDs: %v %s %s", err, str(ds, 0x0020000e), str(ds, 0x00200011))
	}
}

// TestStudyUIDs: the derived UIDs are valid, the same for the same study
// and model, and differ between studies, between models and between the
// series and the instance.
func TestStudyUIDs(t *testing.T) {
	uid := regexp.MustCompile(`^2\.25\.(0|[1-9][0-9]*)$`)
	s1, i1 := dicomsr.StudyUIDs("1.2.3", srModel)
	s2, i2 := dicomsr.StudyUIDs("1.2.3", srModel)
	s3, i3 := dicomsr.StudyUIDs("1.2.4", srModel)
	other := srModel
	other.Checksum = "sha256:00"
	s4, i4 := dicomsr.StudyUIDs("1.2.3", other)
	for _, u := range []string{s1, i1, s3, i3, s4, i4} {
		if !uid.MatchString(u) || len(u) > 64 {
			t.Errorf("UID %q", u)
		}
	}
	if s1 != s2 || i1 != i2 {
		t.Errorf("same study and model, different UIDs: %s %s, %s %s", s1, i1, s2, i2)
	}
	if len(map[string]bool{s1: true, i1: true, s3: true, i3: true, s4: true, i4: true}) != 6 {
		t.Errorf("UIDs repeat: %s %s %s %s %s %s", s1, i1, s3, i3, s4, i4)
	}
}

func TestBadInput(t *testing.T) {
	good := memtrans.Report{Text: reportText}
	noClass := testSource()
	noClass.Views[1].Info.SOPClassUID = ""
	otherStudy := testSource()
	otherStudy.Views[1].Info.StudyInstanceUID = "1.2.3"
	badName := testSource()
	badName.Views[0].Info.PatientName = "A\x00B"
	cases := []struct {
		name string
		r    memtrans.Report
		src  *vision.DICOMStudy
		m    dicomsr.Model
		t    time.Time
		opts []dicomsr.Option
	}{
		{"empty text", memtrans.Report{Text: " "}, testSource(), srModel, srTime, nil},
		{"invalid utf-8", memtrans.Report{Text: "a\xffb"}, testSource(), srModel, srTime, nil},
		{"nil source", good, nil, srModel, srTime, nil},
		{"no views", good, &vision.DICOMStudy{}, srModel, srTime, nil},
		{"view without SOP class", good, noClass, srModel, srTime, nil},
		{"view of another study", good, otherStudy, srModel, srTime, nil},
		{"control character in a name", good, badName, srModel, srTime, nil},
		{"no model name", good, testSource(), dicomsr.Model{}, srTime, nil},
		{"zero time", good, testSource(), srModel, time.Time{}, nil},
		{"bad UID option", good, testSource(), srModel, srTime, []dicomsr.Option{dicomsr.WithUIDs("1.02", "1.2")}},
		{"bad language", good, testSource(), srModel, srTime, []dicomsr.Option{dicomsr.WithLanguage("en us", "English")}},
		{"failing random source", good, testSource(), srModel, srTime, []dicomsr.Option{dicomsr.WithRandom(bytes.NewReader(nil))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := dicomsr.New(c.r, c.src, c.m, c.t, c.opts...)
			if err == nil || doc != nil {
				t.Fatalf("got %v, %v", doc, err)
			}
			if c.name != "failing random source" && !errors.Is(err, dicomsr.ErrInput) {
				t.Fatalf("%v does not wrap ErrInput", err)
			}
		})
	}
}

// TestCharacterSets: the document uses the smallest character set that
// holds its text, and reads back as the same UTF-8.
func TestCharacterSets(t *testing.T) {
	for _, c := range []struct{ name, charset string }{
		{"Doe^Jane", ""},
		{"Müller^Jörg", "ISO_IR 100"},
		{"李^雷", "ISO_IR 192"},
	} {
		src := testSource()
		for _, v := range src.Views {
			v.Info.PatientName = c.name
		}
		doc, err := dicomsr.New(memtrans.Report{Text: reportText}, src, srModel, srTime)
		if err != nil {
			t.Fatal(err)
		}
		_, ds, err := parseSR(doc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if got := str(ds, 0x00080005); got != c.charset || (c.charset == "") != (find(ds, 0x00080005) == nil) {
			t.Errorf("%s: Specific Character Set %q, want %q", c.name, got, c.charset)
		}
		info, err := vision.ReadDICOMInfo(bytes.NewReader(doc.Bytes()), int64(len(doc.Bytes())))
		if err != nil || info.PatientName != c.name || info.UnknownCharacter {
			t.Errorf("%s: read back %q (%v)", c.name, info.PatientName, err)
		}
	}
}

// FuzzNew: whatever text and names New accepts, it writes a file that
// parses, in ascending tag order with even lengths, and reads back (with
// the project's DICOM reader) to the same patient name and study.
func FuzzNew(f *testing.F) {
	f.Add(reportText, "Müller^Jörg", "PID-7")
	f.Add("a", "李^雷", "X")
	f.Add("lungs\nclear", "", "")
	f.Add("é", "Doe^Jane", "ÄÖÜ")
	f.Fuzz(func(t *testing.T, text, name, id string) {
		src := testSource()
		for _, v := range src.Views {
			v.Info.PatientName, v.Info.PatientID = name, id
		}
		doc, err := dicomsr.New(memtrans.Report{Text: text}, src, srModel, srTime, dicomsr.WithRandom(rand.NewChaCha8([32]byte{})))
		if err != nil {
			if !errors.Is(err, dicomsr.ErrInput) {
				t.Fatalf("error %v does not wrap ErrInput", err)
			}
			return
		}
		if _, _, err := parseSR(doc.Bytes()); err != nil {
			t.Fatalf("written file does not parse: %v", err)
		}
		info, err := vision.ReadDICOMInfo(bytes.NewReader(doc.Bytes()), int64(len(doc.Bytes())))
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if info.PatientName != strings.TrimSpace(name) || info.PatientID != strings.TrimSpace(id) || info.StudyInstanceUID != src.StudyInstanceUID || info.UnknownCharacter {
			t.Fatalf("read back name %q id %q, wrote %q %q", info.PatientName, info.PatientID, name, id)
		}
	})
}
