package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// writeFilm writes a w×h 8-bit MONOCHROME2 DICOM film (Part 10, explicit
// VR little endian) of the given study and view position.
func writeFilm(t *testing.T, path, study, sop, viewPosition string, w, h int) {
	t.Helper()
	type el struct {
		tag uint32
		vr  string
		val []byte
	}
	str := func(tag uint32, vr, s string) el {
		b := []byte(s)
		if len(b)%2 == 1 {
			b = append(b, map[bool]byte{true: 0, false: ' '}[vr == "UI"])
		}
		return el{tag, vr, b}
	}
	us := func(tag uint32, v int) el { return el{tag, "US", binary.LittleEndian.AppendUint16(nil, uint16(v))} }
	pix := make([]byte, w*h+w*h%2)
	for i := range w * h {
		pix[i] = byte((i*7 + len(sop)) % 256)
	}
	els := []el{
		str(0x00080016, "UI", "1.2.840.10008.5.1.4.1.1.1.1"), str(0x00080018, "UI", sop), str(0x00080020, "DA", "20240102"),
		str(0x00080030, "TM", "101500"), str(0x00080050, "SH", "ACC-"+study[len(study)-1:]), str(0x00080060, "CS", "DX"),
		str(0x00100010, "PN", "Doe^Jane"), str(0x00100020, "LO", "PID-1"), str(0x00185101, "CS", viewPosition),
		str(0x0020000d, "UI", study), str(0x0020000e, "UI", study+".1"), str(0x00200013, "IS", "1"),
		us(0x00280002, 1), str(0x00280004, "CS", "MONOCHROME2"), us(0x00280010, h), us(0x00280011, w),
		us(0x00280100, 8), us(0x00280101, 8), us(0x00280102, 7), us(0x00280103, 0), {0x7fe00010, "OB", pix},
	}
	enc := func(dst []byte, e el) []byte {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(e.tag>>16))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(e.tag))
		dst = append(dst, e.vr...)
		if e.vr == "OB" {
			dst = append(dst, 0, 0)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.val)))
		} else {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.val)))
		}
		return append(dst, e.val...)
	}
	var meta []byte
	for _, e := range []el{{0x00020001, "OB", []byte{0, 1}}, str(0x00020002, "UI", "1.2.840.10008.5.1.4.1.1.1.1"), str(0x00020003, "UI", sop), str(0x00020010, "UI", "1.2.840.10008.1.2.1")} {
		meta = enc(meta, e)
	}
	file := append(make([]byte, 128), "DICM"...)
	file = enc(file, el{0x00020000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(len(meta)))})
	file = append(file, meta...)
	for _, e := range els {
		file = enc(file, e)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tinyModel saves an untrained tiny two-view generator.
func tinyModel(t *testing.T, dir string) string {
	t.Helper()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal. The lungs are clear.", "No pneumothorax or effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	m, err := memtrans.New(cfg, tok, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(dir, "tiny.radgen")
	if err := m.SaveFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGenerateDICOMFolder: radgen generate reads a folder of DICOM films
// (two two-view studies) and writes a FHIR DiagnosticReport and a DICOM SR
// for each, linked to each other and to the source study.
func TestGenerateDICOMFolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model := tinyModel(t, dir)
	in := filepath.Join(dir, "export")
	studies := []string{"1.2.826.0.1.3680043.8.498.71", "1.2.826.0.1.3680043.8.498.72"}
	for i, s := range studies {
		writeFilm(t, filepath.Join(in, "s"+string(rune('a'+i)), "IM0001"), s, s+".1.1", "PA", 80, 72)
		writeFilm(t, filepath.Join(in, "s"+string(rune('a'+i)), "IM0002"), s, s+".1.2", "LL", 72, 80)
	}
	fhirDir, srDir, reports := filepath.Join(dir, "fhir")+"/", filepath.Join(dir, "sr")+"/", filepath.Join(dir, "reports.json")
	if err := generate(ctx, []string{"-model", model, "-beam", "1", "-o", reports, "-fhir", fhirDir, "-sr", srDir, "-model-version", "test-1", in}); err != nil {
		t.Fatal(err)
	}
	var gens []generated
	b, _ := os.ReadFile(reports)
	if err := json.Unmarshal(b, &gens); err != nil || len(gens) != 2 {
		t.Fatalf("reports.json: %v, %d reports", err, len(gens))
	}
	mb, _ := os.ReadFile(model)
	sum := sha256.Sum256(mb)
	checksum := "sha256:" + hex.EncodeToString(sum[:])
	for i, uid := range studies {
		if gens[i].ID != uid {
			t.Errorf("report %d is for %q, want %q", i, gens[i].ID, uid)
		}
		fb, err := os.ReadFile(filepath.Join(fhirDir, uid+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var dr struct {
			Status     string
			Conclusion string
			Identifier []struct{ System, Value string }
			Contained  []struct {
				ResourceType string
				Identifier   []struct{ Value string }
				Version      []struct{ Value string }
			}
			ImagingStudy []struct {
				Identifier struct{ System, Value string }
			}
			PresentedForm []struct{ Data string }
		}
		if err := json.Unmarshal(fb, &dr); err != nil {
			t.Fatal(err)
		}
		text, _ := base64.StdEncoding.DecodeString(dr.PresentedForm[0].Data)
		// An untrained model's report runs to the maximum length: the
		// conclusion then says it is incomplete.
		conclusion := strings.TrimSuffix(dr.Conclusion, " ["+fhir.TruncatedNote+"]")
		if dr.Status != "preliminary" || conclusion != gens[i].Report || string(text) != gens[i].Report || dr.ImagingStudy[0].Identifier.Value != "urn:oid:"+uid {
			t.Errorf("FHIR %s: status %q conclusion %q imaging study %v", uid, dr.Status, dr.Conclusion, dr.ImagingStudy)
		}
		dev := dr.Contained[0]
		if dev.ResourceType != "Device" || dev.Identifier[0].Value != checksum || dev.Version[0].Value != "test-1" {
			t.Errorf("FHIR device %+v, want checksum %s", dev, checksum)
		}
		info, err := vision.ReadDICOMInfoFile(filepath.Join(srDir, uid+".dcm"))
		if err != nil {
			t.Fatal(err)
		}
		if info.Modality != "SR" || info.StudyInstanceUID != uid || info.PatientID != "PID-1" || info.AccessionNumber != "ACC-"+uid[len(uid)-1:] {
			t.Errorf("SR %s: %+v", uid, info)
		}
		if len(dr.Identifier) != 1 || dr.Identifier[0].Value != "urn:oid:"+info.SOPInstanceUID {
			t.Errorf("FHIR identifier %v, SR instance %s", dr.Identifier, info.SOPInstanceUID)
		}
		sr, _ := os.ReadFile(filepath.Join(srDir, uid+".dcm"))
		for _, ref := range []string{uid + ".1.1", uid + ".1.2", gens[i].Report} {
			if !bytes.Contains(sr, []byte(ref)) {
				t.Errorf("SR %s does not hold %q", uid, ref)
			}
		}
	}
}

func TestGenerateDICOMErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model := tinyModel(t, dir)
	two := filepath.Join(dir, "two")
	for i, s := range []string{"1.2.3.1", "1.2.3.2"} {
		writeFilm(t, filepath.Join(two, string(rune('a'+i))+"pa.dcm"), s, s+".1", "PA", 64, 64)
		writeFilm(t, filepath.Join(two, string(rune('a'+i))+"ll.dcm"), s, s+".2", "LL", 64, 64)
	}
	out := filepath.Join(dir, "out.json")
	if err := generate(ctx, []string{"-model", model, "-beam", "1", "-o", out, "-fhir", filepath.Join(dir, "one.json"), two}); err == nil || !strings.Contains(err.Error(), "give") {
		t.Errorf("two studies into one file: %v", err)
	}
	// A study without a lateral view, for a two-view model.
	noLat := filepath.Join(dir, "nolat")
	writeFilm(t, filepath.Join(noLat, "pa.dcm"), "1.2.4", "1.2.4.1", "PA", 64, 64)
	if err := generate(ctx, []string{"-model", model, "-o", out, noLat}); !errors.Is(err, memtrans.ErrNoLateralView) {
		t.Errorf("no lateral: %v", err)
	}
	// -fhir and -sr need DICOM input.
	png := filepath.Join(dir, "pa.dcm")
	writeFilm(t, png, "1.2.5", "1.2.5.1", "PA", 64, 64)
	if err := generate(ctx, []string{"-model", model, "-beam", "1", "-o", out, "-sr", filepath.Join(dir, "x.dcm"), png, png}); err == nil || !strings.Contains(err.Error(), "DICOM") {
		t.Errorf("-sr with image files: %v", err)
	}
	// Folders and files mixed.
	if err := generate(ctx, []string{"-model", model, "-o", out, two, png}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("mixed arguments: %v", err)
	}
	// One study: -fhir and -sr name files.
	one := filepath.Join(dir, "one")
	writeFilm(t, filepath.Join(one, "pa.dcm"), "1.2.6", "1.2.6.1", "PA", 64, 64)
	writeFilm(t, filepath.Join(one, "ll.dcm"), "1.2.6", "1.2.6.2", "LL", 64, 64)
	fj, sd := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.dcm")
	if err := generate(ctx, []string{"-model", model, "-beam", "1", "-o", out, "-fhir", fj, "-sr", sd, one}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fj, sd} {
		if st, err := os.Stat(f); err != nil || st.Size() < 200 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if got := safeName("../1.2/x"); strings.ContainsAny(got, "/") || slices.Contains([]string{".", ".."}, got) {
		t.Errorf("safeName: %q", got)
	}
}
