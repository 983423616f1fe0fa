package cli

// Hospital files in and out for radgen generate: folders of DICOM files as
// input, FHIR DiagnosticReports (-fhir) and DICOM Basic Text SRs (-sr) as
// output.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/fhir"
)

// hospital holds the flags and the reports of the DICOM input and output.
type hospital struct {
	fhirOut, srOut       *string
	hl7Out               *string
	modelName, modelVers *string
	reports              []memtrans.Report
	now                  func() time.Time
}

// hospitalFlags registers -fhir, -sr, -model-name and -model-version.
func hospitalFlags(fs *flag.FlagSet) *hospital {
	return &hospital{
		fhirOut:   fs.String("fhir", "", "write FHIR R4 DiagnosticReports: a .json file (one study) or a directory (<StudyInstanceUID>.json each); needs DICOM folders as input"),
		srOut:     fs.String("sr", "", "write DICOM Basic Text SRs: a .dcm file (one study) or a directory (<StudyInstanceUID>.dcm each); needs DICOM folders as input"),
		hl7Out:    fs.String("hl7", "", "write HL7 v2 ORU^R01 messages: a .hl7 file (one study) or a directory (<StudyInstanceUID>.hl7 each); needs DICOM folders as input"),
		modelName: fs.String("model-name", "", "the model's name in FHIR and SR reports (default: radgen and the architecture)"),
		modelVers: fs.String("model-version", "", "the model's version in FHIR and SR reports"),
		now:       time.Now,
	}
}

// folders reports whether the command's arguments are folders (of DICOM
// files) rather than image files.
func (h *hospital) folders(args []string) bool {
	if len(args) == 0 {
		return false
	}
	st, err := os.Stat(args[0])
	return err == nil && st.IsDir()
}

// studies reads every folder's DICOM studies for a model of the given
// views (frontal; frontal and lateral).
func (h *hospital) studies(ctx context.Context, args []string, views int) ([]memtrans.Study, error) {
	var out []memtrans.Study
	for _, dir := range args {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: give folders of DICOM files or image files, not both", dir)
		}
		s, err := memtrans.StudiesFromDICOMDir(ctx, dir, views)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// keep records generated reports for write.
func (h *hospital) keep(reps []memtrans.Report) { h.reports = append(h.reports, reps...) }

// write writes the FHIR and SR files asked for.
func (h *hospital) write(modelPath string, arch string, studies []memtrans.Study) error {
	if *h.fhirOut == "" && *h.srOut == "" && *h.hl7Out == "" {
		return nil
	}
	if len(h.reports) != len(studies) {
		return fmt.Errorf("%d reports for %d studies", len(h.reports), len(studies))
	}
	for _, s := range studies {
		if s.DICOM == nil {
			return fmt.Errorf("study %s is not from DICOM files: -fhir, -sr and -hl7 need folders of DICOM files as input", s.ID)
		}
	}
	sum, err := fileSHA256(modelPath)
	if err != nil {
		return err
	}
	name := *h.modelName
	if name == "" {
		name = "radgen " + string(arch)
	}
	issued := h.now()
	for i, s := range studies {
		rep := h.reports[i]
		var srUID string
		if *h.srOut != "" {
			doc, err := dicomsr.New(rep, s.DICOM, dicomsr.Model{Name: name, Version: *h.modelVers, Checksum: sum}, issued)
			if err != nil {
				return fmt.Errorf("study %s: %w", s.ID, err)
			}
			srUID = doc.SOPInstanceUID
			if err := writeOutput(*h.srOut, s.ID, ".dcm", len(studies), doc.Bytes()); err != nil {
				return err
			}
		}
		if *h.hl7Out != "" {
			if err := writeHL7(*h.hl7Out, s, rep, dicomsr.Model{Name: name, Version: *h.modelVers, Checksum: sum}, issued, len(studies)); err != nil {
				return err
			}
		}
		if *h.fhirOut != "" {
			var opts []fhir.Option
			if srUID != "" {
				opts = append(opts, fhir.WithIdentifier(fhir.Identifier{System: fhir.SystemDICOMUID, Value: "urn:oid:" + srUID}))
			}
			dr, err := fhir.NewDiagnosticReport(rep, fhir.StudyFromDICOM(s.DICOM, time.Local),
				fhir.Model{Name: name, Version: *h.modelVers, Checksum: sum}, issued, opts...)
			if err != nil {
				return fmt.Errorf("study %s: %w", s.ID, err)
			}
			b, err := json.MarshalIndent(dr, "", " ")
			if err != nil {
				return err
			}
			if err := writeOutput(*h.fhirOut, s.ID, ".json", len(studies), append(b, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeOutput writes one study's file: into dest when it is a directory
// (an existing one, or a path ending in a separator), as dest itself when
// the run has one study.
func writeOutput(dest, id, ext string, n int, b []byte) error {
	st, err := os.Stat(dest)
	isDir := err == nil && st.IsDir() || strings.HasSuffix(dest, string(os.PathSeparator)) || strings.HasSuffix(dest, "/")
	if isDir {
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return err
		}
		return writeFile(filepath.Join(dest, safeName(id)+ext), b)
	}
	if n > 1 {
		return fmt.Errorf("%d studies: give %s a directory", n, dest)
	}
	return writeFile(dest, b)
}

// safeName keeps a file name to digits, letters, dots and dashes (a
// StudyInstanceUID is digits and dots).
func safeName(id string) string {
	s := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, id)
	if s == "" || s == "." || s == ".." {
		return "study"
	}
	return s
}

// fileSHA256 returns "sha256:" and the file's digest in hex.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum of %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
