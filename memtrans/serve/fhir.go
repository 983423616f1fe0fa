package serve

import (
	"crypto/rand"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
)

// fhirStudy returns the study a FHIR report will name, before any
// generation: the first DICOM view's header (its UID, accession number,
// patient with the issuer's namespace, and its date and time), with the
// study UID the request gave, if any, in place of its; without either, a
// fresh UID under the UUID root 2.25 (ISO/IEC 9834-8). A header that cannot
// make a valid report is refused now, not after a generation.
func (h *Handler) fhirStudy(up *upload) (fhir.Study, *apiError) {
	var st fhir.Study
	if up.dicom != nil {
		st = fhir.StudyFromDICOMInfo(up.dicom, h.o.location)
	}
	if up.studyUID != "" {
		st.InstanceUID = up.studyUID
	}
	if st.InstanceUID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])  // crypto/rand.Read never fails
		b[6] = b[6]&0x0f | 0x40 // a version-4 UUID
		b[8] = b[8]&0x3f | 0x80
		st.InstanceUID = "2.25." + new(big.Int).SetBytes(b[:]).String()
	}
	probe := memtrans.Report{StudyID: up.studyID, Text: "-"}
	if _, err := fhir.NewDiagnosticReport(probe, st, fhir.Model{Name: h.info.Name, Checksum: h.info.Checksum}, time.Now()); err != nil {
		if errors.Is(err, fhir.ErrInput) && up.dicom != nil && up.studyUID == "" {
			return st, errorf(http.StatusUnprocessableEntity, CodeBadImage, "the DICOM header's study attributes cannot make a FHIR report")
		}
		return st, errorf(http.StatusBadRequest, CodeInvalidOption, "the study's identity cannot make a FHIR report (study_id, study_uid or the DICOM header)")
	}
	return st, nil
}

// fhirReport writes the report as a FHIR R4 DiagnosticReport about st
// (see fhirStudy).
func (h *Handler) fhirReport(rep memtrans.Report, st fhir.Study, issued time.Time) (any, *apiError) {
	if e := emptyReport(rep); e != nil {
		return nil, e
	}
	dr, err := fhir.NewDiagnosticReport(rep, st, fhir.Model{Name: h.info.Name, Checksum: h.info.Checksum}, issued)
	if err != nil {
		h.o.logger.Error("FHIR report", "err", err)
		return nil, errorf(http.StatusInternalServerError, CodeInternal, "the FHIR report could not be written")
	}
	return dr, nil
}

// emptyReport is the error for a report the model ended before any word:
// no FHIR report or SR can carry it, and it is the model's answer, not the
// service's failure.
func emptyReport(rep memtrans.Report) *apiError {
	if strings.TrimSpace(rep.Text) != "" {
		return nil
	}
	return errorf(http.StatusUnprocessableEntity, CodeEmptyReport, "the model wrote no text for this study: no FHIR report or SR can carry it")
}
