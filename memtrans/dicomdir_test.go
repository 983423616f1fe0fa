package memtrans

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/vision"
)

// testFilm describes a small DICOM film for the folder tests.
type testFilm struct {
	path, study, series, sop, patient string
	viewPosition                      string
	code                              [3]string // View Code Sequence item: value, scheme, meaning
	w, h                              int
	seriesNo, instance                string
	noPixels                          bool
}

type testElem struct {
	tag uint32
	vr  string
	val []byte
}

// writeTestFilm writes f as a Part 10 file, explicit VR little endian,
// 8-bit MONOCHROME2 pixels (a gradient).
func writeTestFilm(t *testing.T, dir string, f testFilm) string {
	t.Helper()
	str := func(tag uint32, vr, s string) testElem {
		b := []byte(s)
		if len(b)%2 == 1 {
			pad := byte(' ')
			if vr == "UI" {
				pad = 0
			}
			b = append(b, pad)
		}
		return testElem{tag, vr, b}
	}
	us := func(tag uint32, v int) testElem {
		return testElem{tag, "US", binary.LittleEndian.AppendUint16(nil, uint16(v))}
	}
	els := []testElem{
		str(0x00080016, "UI", "1.2.840.10008.5.1.4.1.1.1.1"),
		str(0x00080018, "UI", f.sop),
		str(0x00080020, "DA", "20240102"),
		str(0x00080060, "CS", "DX"),
		str(0x00100010, "PN", "Doe^Jane"),
		str(0x00100020, "LO", f.patient),
		str(0x0020000d, "UI", f.study),
		str(0x0020000e, "UI", f.series),
		str(0x00200011, "IS", f.seriesNo),
		str(0x00200013, "IS", f.instance),
	}
	if f.viewPosition != "" {
		els = append(els, str(0x00185101, "CS", f.viewPosition))
	}
	if f.code[0] != "" {
		var item bytes.Buffer
		for _, e := range []testElem{str(0x00080100, "SH", f.code[0]), str(0x00080102, "SH", f.code[1]), str(0x00080104, "LO", f.code[2])} {
			writeTestElem(&item, e)
		}
		var sq bytes.Buffer
		sq.Write([]byte{0xfe, 0xff, 0x00, 0xe0})
		sq.Write(binary.LittleEndian.AppendUint32(nil, uint32(item.Len())))
		sq.Write(item.Bytes())
		els = append(els, testElem{0x00540220, "SQ", sq.Bytes()})
	}
	if !f.noPixels {
		pix := make([]byte, f.w*f.h+f.w*f.h%2)
		for i := range f.w * f.h {
			pix[i] = byte(i % 251)
		}
		els = append(els, us(0x00280002, 1), str(0x00280004, "CS", "MONOCHROME2"), us(0x00280010, f.h), us(0x00280011, f.w),
			us(0x00280100, 8), us(0x00280101, 8), us(0x00280102, 7), us(0x00280103, 0), testElem{0x7fe00010, "OB", pix})
	}
	slices.SortFunc(els, func(a, b testElem) int {
		return int(a.tag>>16)<<16 + int(a.tag&0xffff) - (int(b.tag>>16)<<16 + int(b.tag&0xffff))
	})
	var meta bytes.Buffer
	for _, e := range []testElem{
		{0x00020001, "OB", []byte{0, 1}},
		str(0x00020002, "UI", "1.2.840.10008.5.1.4.1.1.1.1"),
		str(0x00020003, "UI", f.sop),
		str(0x00020010, "UI", "1.2.840.10008.1.2.1"),
	} {
		writeTestElem(&meta, e)
	}
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	writeTestElem(&out, testElem{0x00020000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(meta.Len()))})
	out.Write(meta.Bytes())
	for _, e := range els {
		writeTestElem(&out, e)
	}
	p := filepath.Join(dir, f.path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeTestElem(w io.Writer, e testElem) {
	var h []byte
	h = binary.LittleEndian.AppendUint16(h, uint16(e.tag>>16))
	h = binary.LittleEndian.AppendUint16(h, uint16(e.tag))
	h = append(h, e.vr...)
	switch e.vr {
	case "OB", "OW", "SQ", "UN", "UT":
		h = append(h, 0, 0)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(e.val)))
	default:
		h = binary.LittleEndian.AppendUint16(h, uint16(len(e.val)))
	}
	w.Write(h)
	w.Write(e.val)
}

func testFilmOf(path, study, sop, vp string, w, h int) testFilm {
	return testFilm{path: path, study: study, series: study + ".1", sop: sop, patient: "P1", viewPosition: vp, w: w, h: h, seriesNo: "1", instance: "1"}
}

func TestStudiesFromDICOMDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// Study 1.1: a PA, an AP (not chosen), a lateral by its SNOMED CT code.
	pa := writeTestFilm(t, dir, testFilmOf("a/pa.dcm", "1.1", "1.1.1", "PA", 40, 30))
	ap := writeTestFilm(t, dir, testFilmOf("a/ap.dcm", "1.1", "1.1.2", "AP", 36, 30))
	lat := testFilmOf("a/sub/lat", "1.1", "1.1.3", "", 30, 40) // no .dcm: found by its content
	lat.code = [3]string{"399067008", "SCT", "lateral"}
	latPath := writeTestFilm(t, dir, lat)
	// Study 1.2: a lateral only (by a retired SRT code's meaning).
	only := testFilmOf("b/lat.dcm", "1.2", "1.2.1", "", 32, 32)
	only.code = [3]string{"R-10232", "SRT", "lateral"}
	writeTestFilm(t, dir, only)
	// Study 1.3: frontal only.
	writeTestFilm(t, dir, testFilmOf("c/pa.dcm", "1.3", "1.3.1", "PA", 32, 32))
	// Noise: a text file and a DICOM object without pixels.
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("exported by a PACS"), 0o644)
	sr := testFilmOf("a/sr.dcm", "1.1", "1.1.9", "", 0, 0)
	sr.noPixels = true
	writeTestFilm(t, dir, sr)

	studies, err := StudiesFromDICOMDir(ctx, dir, 2)
	if !errors.Is(err, ErrNoFrontalView) || !errors.Is(err, ErrNoLateralView) || !errors.Is(err, ErrStudy) {
		t.Fatalf("error %v: want ErrNoFrontalView (1.2) and ErrNoLateralView (1.3)", err)
	}
	if !strings.Contains(err.Error(), "study 1.2") || !strings.Contains(err.Error(), "study 1.3") {
		t.Errorf("error does not name the studies: %v", err)
	}
	if len(studies) != 1 {
		t.Fatalf("%d studies, want 1", len(studies))
	}
	s := studies[0]
	if s.ID != "1.1" || len(s.Views) != 2 || s.DICOM == nil || s.DICOM.StudyInstanceUID != "1.1" {
		t.Fatalf("study %+v", s)
	}
	if b := s.Views[0].Bounds(); b.Dx() != 40 || b.Dy() != 30 {
		t.Errorf("frontal is %v, want the 40×30 PA", b)
	}
	if b := s.Views[1].Bounds(); b.Dx() != 30 || b.Dy() != 40 {
		t.Errorf("lateral is %v, want 30×40", b)
	}
	v := s.DICOM.Views
	if v[0].Path != pa || v[0].Kind != vision.ViewFrontal || v[1].Path != latPath || v[1].Kind != vision.ViewLateral {
		t.Errorf("views %s (%v), %s (%v)", v[0].Path, v[0].Kind, v[1].Path, v[1].Kind)
	}
	if v[0].Info.SOPInstanceUID != "1.1.1" || s.DICOM.Header().PatientID != "P1" {
		t.Errorf("header %+v", v[0].Info)
	}
	if len(s.DICOM.Others) != 1 || s.DICOM.Others[0].Path != ap {
		t.Errorf("others %+v, want the AP", s.DICOM.Others)
	}

	// One view: the frontal of each study that has one.
	studies, err = StudiesFromDICOMDir(ctx, dir, 1)
	if !errors.Is(err, ErrNoFrontalView) || errors.Is(err, ErrNoLateralView) {
		t.Fatalf("error %v", err)
	}
	if len(studies) != 2 || studies[0].ID != "1.1" || studies[1].ID != "1.3" || len(studies[0].Views) != 1 {
		t.Fatalf("%d studies", len(studies))
	}
}

func TestStudiesFromDICOMDirErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := StudiesFromDICOMDir(ctx, t.TempDir(), 2); !errors.Is(err, ErrNoDICOM) {
		t.Errorf("empty folder: %v", err)
	}
	if _, err := StudiesFromDICOMDir(ctx, t.TempDir(), 3); !errors.Is(err, ErrStudy) {
		t.Errorf("3 views: %v", err)
	}
	if _, err := StudiesFromDICOMDir(ctx, filepath.Join(t.TempDir(), "missing"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing folder: %v", err)
	}

	dir := t.TempDir()
	writeTestFilm(t, dir, testFilmOf("pa.dcm", "2.1", "2.1.1", "PA", 16, 16))
	other := testFilmOf("lat.dcm", "2.1", "2.1.2", "LL", 16, 16)
	other.patient = "P2"
	writeTestFilm(t, dir, other)
	if _, err := StudiesFromDICOMDir(ctx, dir, 2); err == nil || !strings.Contains(err.Error(), "other patients") {
		t.Errorf("mixed patients: %v", err)
	}
	if _, err := StudiesFromDICOMDir(ctx, dir, 1, WithMaxDICOMFiles(1)); err == nil || !strings.Contains(err.Error(), "more than 1 files") {
		t.Errorf("file limit: %v", err)
	}
	small := t.TempDir()
	writeTestFilm(t, small, testFilmOf("pa.dcm", "2.2", "2.2.1", "PA", 16, 16))
	if _, err := StudiesFromDICOMDir(ctx, small, 1, WithDICOMDecodeOptions(vision.WithMaxPixels(100))); !errors.Is(err, vision.ErrTooLarge) {
		t.Errorf("pixel limit: %v", err)
	}
	if s, err := StudiesFromDICOMDir(ctx, small, 1, WithDICOMDecodeOptions(vision.WithMaxPixels(256))); err != nil || len(s) != 1 {
		t.Errorf("within the pixel limit: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := StudiesFromDICOMDir(cctx, dir, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	// A malformed DICOM file is an error naming it.
	bad := t.TempDir()
	b := make([]byte, 200)
	copy(b[128:], "DICM")
	os.WriteFile(filepath.Join(bad, "bad.dcm"), b, 0o644)
	if _, err := StudiesFromDICOMDir(ctx, bad, 1); !errors.Is(err, ErrNoDICOM) || !errors.Is(err, vision.ErrDICOM) || !strings.Contains(err.Error(), "bad.dcm") {
		t.Errorf("malformed file alone: %v", err)
	}
	// Beside a good study, it is reported and the study still read.
	writeTestFilm(t, bad, testFilmOf("pa.dcm", "2.3", "2.3.1", "PA", 16, 16))
	if s, err := StudiesFromDICOMDir(ctx, bad, 1); len(s) != 1 || !errors.Is(err, vision.ErrDICOM) || !strings.Contains(err.Error(), "bad.dcm") {
		t.Errorf("malformed file beside a study: %d studies, %v", len(s), err)
	}
}

func TestViewKind(t *testing.T) {
	for _, c := range []struct {
		vp   string
		code [3]string
		want vision.ViewKind
	}{
		{"PA", [3]string{}, vision.ViewFrontal},
		{"AP", [3]string{}, vision.ViewFrontal},
		{"LL", [3]string{}, vision.ViewLateral},
		{"RL", [3]string{}, vision.ViewLateral},
		{"LATERAL", [3]string{}, vision.ViewLateral},
		{"RLD", [3]string{}, vision.ViewOther}, // decubitus
		{"", [3]string{"272479007", "SCT", "postero-anterior"}, vision.ViewFrontal},
		{"", [3]string{"399348003", "SCT", "antero-posterior"}, vision.ViewFrontal},
		{"", [3]string{"399173006", "SCT", "left lateral"}, vision.ViewLateral},
		{"", [3]string{"399182000", "SCT", "oblique"}, vision.ViewOther},
		{"", [3]string{"R-10214", "SRT", "postero-anterior"}, vision.ViewFrontal},
		{"", [3]string{"X", "99LOCAL", "Left Lateral"}, vision.ViewLateral},
		{"PA", [3]string{"272479007", "SCT", "postero-anterior"}, vision.ViewFrontal},
		{"PA", [3]string{"399067008", "SCT", "lateral"}, vision.ViewOther}, // disagree
		{"", [3]string{}, vision.ViewOther},
	} {
		dir := t.TempDir()
		f := testFilmOf("x.dcm", "3.1", "3.1.1", c.vp, 8, 8)
		f.code = c.code
		info, ok, err := readDICOMHeader(writeTestFilm(t, dir, f))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if got := info.View(); got != c.want {
			t.Errorf("view position %q, code %v: %v, want %v", c.vp, c.code, got, c.want)
		}
	}
}

// TestStudiesFromDICOMDirReal groups real files: the SIIM chest film and
// the NEMA CR (a bare data set), PA by View Position, make one-view
// studies; the TCIA CR, which states no view, is refused with
// ErrNoFrontalView.
func TestStudiesFromDICOMDirReal(t *testing.T) {
	src := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
	dir := t.TempDir()
	var want []string
	for _, name := range []string{"nema_cr_mono1_no_preamble.dcm", "siim_cr_jpeg_baseline.dcm", "src_cr_10bit_mono1.dcm"} { // in path order, as studies come
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Skipf("%s: %v", name, err)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
		info, ok, err := readDICOMHeader(filepath.Join(dir, name))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if info.View() == vision.ViewFrontal {
			want = append(want, info.StudyInstanceUID)
		}
	}
	studies, err := StudiesFromDICOMDir(context.Background(), dir, 1)
	if len(want) < 3 && !errors.Is(err, ErrNoFrontalView) {
		t.Errorf("error %v, want ErrNoFrontalView for the film without a view", err)
	}
	var got []string
	for _, s := range studies {
		got = append(got, s.ID)
		info := s.DICOM.Header()
		b := s.Views[0].Bounds()
		if b.Dx() != info.Columns || b.Dy() != info.Rows {
			t.Errorf("%s: decoded %v, header %d×%d", s.ID, b, info.Columns, info.Rows)
		}
		t.Logf("study %s: %s %s, %v", s.ID, s.DICOM.Views[0].Path, info.ViewPosition, b)
	}
	if !slices.Equal(got, want) {
		t.Errorf("studies %v, want %v", got, want)
	}
}
