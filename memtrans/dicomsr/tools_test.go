package dicomsr_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/vision"
)

// tool returns the path of an installed DICOM tool, or skips the test.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (apt-get install %s): the written SR is not checked by it", name, pkg)
	}
	return p
}

// srFiles writes the SR of the synthetic two-view study and, when the
// real DICOM files are present, of the real SIIM chest film found by
// StudiesFromDICOMDir, and returns the files with the source each refers
// to.
func srFiles(t *testing.T) map[string]*vision.DICOMStudy {
	dir := t.TempDir()
	out := map[string]*vision.DICOMStudy{}
	src := testSource()
	p := filepath.Join(dir, "synthetic.dcm")
	if err := os.WriteFile(p, newDoc(t).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out[p] = src

	real := os.Getenv("RADGEN_REAL_DICOM")
	if real == "" {
		real = testutil.SharedPath("real/dicom")
	}
	b, err := os.ReadFile(filepath.Join(real, "siim_cr_jpeg_baseline.dcm"))
	if err != nil {
		t.Logf("no real film (%v): checking the synthetic study only", err)
		return out
	}
	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "film.dcm"), b, 0o644)
	studies, err := memtrans.StudiesFromDICOMDir(context.Background(), in, 1)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dicomsr.New(memtrans.Report{Text: reportText}, studies[0].DICOM, srModel, srTime)
	if err != nil {
		t.Fatal(err)
	}
	p = filepath.Join(dir, "siim.dcm")
	if err := os.WriteFile(p, doc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out[p] = studies[0].DICOM
	return out
}

// TestDsrdump: dcmtk's SR reader reads the document without a warning and
// shows its title, flags, observer and finding.
func TestDsrdump(t *testing.T) {
	dsrdump := tool(t, "dsrdump", "dcmtk")
	for file := range srFiles(t) {
		out, err := exec.Command(dsrdump, "-Ee", "-Ec", file).CombinedOutput()
		t.Logf("dsrdump %s:\n%s", filepath.Base(file), out)
		if err != nil {
			t.Fatalf("dsrdump: %v", err)
		}
		for _, want := range []string{"Basic Text SR Document", "Verification Flag   : UNVERIFIED", "Preliminary Flag    : PRELIMINARY",
			`"Diagnostic Imaging Report"`, `=(121007,DCM,"Device")`, `"Finding")="the heart is normal`, "<inferred from IMAGE:"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("dsrdump output lacks %q", want)
			}
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "W:") || strings.HasPrefix(line, "E:") {
				t.Errorf("dsrdump: %s", line)
			}
		}
	}
}

// TestDcmdump: the references to the source study, series and instances
// are in the file as dcmtk reads it.
func TestDcmdump(t *testing.T) {
	dcmdump := tool(t, "dcmdump", "dcmtk")
	for file, src := range srFiles(t) {
		out, err := exec.Command(dcmdump, "+L", file).CombinedOutput()
		if err != nil {
			t.Fatalf("dcmdump: %v\n%s", err, out)
		}
		text := string(out)
		if i := strings.Index(text, "(0040,a375)"); i < 0 {
			t.Fatalf("no Current Requested Procedure Evidence Sequence:\n%s", text)
		} else {
			t.Logf("dcmdump %s, evidence:\n%s", filepath.Base(file), text[i:i+strings.Index(text[i:], "(0040,a491)")])
		}
		wants := []string{"[" + src.StudyInstanceUID + "]",
			// IHE AIR's Contributing Equipment: the algorithm, its purpose and identity.
			"(0018,a001) SQ", "(0040,a170) SQ", "(0008,0100) SH [Newcode1]", "(0008,0102) SH [99IHE]", "(0008,0104) LO [Processing Algorithm]",
			"(0008,1090) LO [" + srModel.Name + "]", "(0018,1020) LO [" + srModel.Version + `\` + "radgen " + radgen.Version + "]", "(0002,0013) SH [RADGEN_" + radgen.Version + "]", "(0018,1002) UI [2.25."}
		for _, v := range src.Views {
			wants = append(wants, "(0020,000e) UI ["+v.Info.SeriesInstanceUID+"]", "(0008,1155) UI ["+v.Info.SOPInstanceUID+"]")
		}
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("dcmdump output lacks %s", w)
			}
		}
	}
}

// TestDciodvfy: dicom3tools' IOD verifier finds no error in the document.
func TestDciodvfy(t *testing.T) {
	dciodvfy := tool(t, "dciodvfy", "dicom3tools")
	for file := range srFiles(t) {
		out, _ := exec.Command(dciodvfy, file).CombinedOutput()
		t.Logf("dciodvfy %s:\n%s", filepath.Base(file), out)
		if !strings.Contains(string(out), "BasicTextSR") {
			t.Errorf("dciodvfy did not recognise a Basic Text SR")
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "E:") || strings.HasPrefix(line, "Error") {
				t.Errorf("dciodvfy: %s", line)
			}
		}
	}
}
