package serve

import (
	"crypto/rand"
	"errors"
	"math/big"
	"net/http"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// fhirReport writes the report as a FHIR R4 DiagnosticReport about the
// study of the uploaded DICOM files (its UID, accession number, patient and
// time, from the first DICOM view's header), with the study UID the request
// gave, if any, in place of theirs; without either, a fresh UID under the
// UUID root 2.25 (ISO/IEC 9834-8) names the study.
func (h *Handler) fhirReport(rep memtrans.Report, up *upload, issued time.Time) (any, *apiError) {
	var st fhir.Study
	if up.dicom != nil {
		st = fhir.StudyFromDICOM(&vision.DICOMStudy{StudyInstanceUID: up.dicom.StudyInstanceUID, Views: []vision.DICOMView{{Info: up.dicom}}}, nil)
	}
	if up.studyUID != "" {
		st.InstanceUID = up.studyUID
	}
	uid := st.InstanceUID
	if uid == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])  // crypto/rand.Read never fails
		b[6] = b[6]&0x0f | 0x40 // a version-4 UUID
		b[8] = b[8]&0x3f | 0x80
		uid = "2.25." + new(big.Int).SetBytes(b[:]).String()
	}
	st.InstanceUID = uid
	dr, err := fhir.NewDiagnosticReport(rep, st, fhir.Model{Name: h.info.Name, Checksum: h.info.Checksum}, issued)
	if errors.Is(err, fhir.ErrInput) && up.studyUID != "" {
		return nil, errorf(http.StatusBadRequest, CodeInvalidOption, "study_uid: not a DICOM UID (dotted decimal, at most 64 characters)")
	}
	if errors.Is(err, fhir.ErrInput) && up.dicom != nil {
		return nil, errorf(http.StatusUnprocessableEntity, CodeBadImage, "the DICOM header's study attributes cannot make a FHIR report")
	}
	if err != nil {
		h.o.logger.Error("FHIR report", "err", err)
		return nil, errorf(http.StatusInternalServerError, CodeInternal, "the FHIR report could not be written")
	}
	return dr, nil
}
