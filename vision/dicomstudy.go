package vision

import "strings"

// ViewKind is the projection of a chest film.
type ViewKind int

// The projections told apart.
const (
	ViewOther   ViewKind = iota // neither, or not stated
	ViewFrontal                 // postero-anterior (PA) or antero-posterior (AP)
	ViewLateral                 // left or right lateral
)

// String returns "frontal", "lateral" or "other".
func (k ViewKind) String() string {
	switch k {
	case ViewFrontal:
		return "frontal"
	case ViewLateral:
		return "lateral"
	}
	return "other"
}

// DICOMView is one image of a study read from DICOM: its file, its header
// and its projection.
type DICOMView struct {
	Path string
	Kind ViewKind
	Info *DICOMInfo
}

// DICOMStudy is a study read from DICOM files: the views a model reads, in
// order, and the study's other images (not used: a third view, an oblique,
// a decubitus film). The patient and study attributes (PatientID,
// AccessionNumber, StudyDate, …) are those of Views[0].Info. It is what
// memtrans.StudiesFromDICOMDir keeps in Study.DICOM, and what report
// writers (FHIR, DICOM SR) cite.
type DICOMStudy struct {
	StudyInstanceUID string
	Views            []DICOMView
	Others           []DICOMView
}

// Header returns the header of the study's first view, which holds its
// patient and study attributes.
func (s *DICOMStudy) Header() *DICOMInfo { return s.Views[0].Info }

// SNOMED CT codes of CID 4010 (DX View) for chest projections.
var viewCodes = map[string]ViewKind{
	"272479007": ViewFrontal, // postero-anterior
	"399348003": ViewFrontal, // antero-posterior
	"399033003": ViewFrontal, // frontal
	"399067008": ViewLateral, // lateral
	"399198007": ViewLateral, // right lateral
	"399173006": ViewLateral, // left lateral
	"399260004": ViewLateral, // medial-lateral
	"399352003": ViewLateral, // lateral-medial
}

// Code Meanings of the same projections, for other coding schemes.
var viewMeanings = map[string]ViewKind{
	"postero-anterior": ViewFrontal, "posteroanterior": ViewFrontal, "pa": ViewFrontal,
	"antero-posterior": ViewFrontal, "anteroposterior": ViewFrontal, "ap": ViewFrontal, "frontal": ViewFrontal,
	"lateral": ViewLateral, "left lateral": ViewLateral, "right lateral": ViewLateral,
	"medial-lateral": ViewLateral, "lateral-medial": ViewLateral,
}

// View tells the image's projection from View Position and View Code
// Sequence; when both state one and they differ, it is ViewOther.
func (info *DICOMInfo) View() ViewKind {
	byPosition := ViewOther
	switch strings.ToUpper(strings.TrimSpace(info.ViewPosition)) {
	case "PA", "AP":
		byPosition = ViewFrontal
	case "LL", "RL", "LATERAL", "LAT":
		byPosition = ViewLateral
	}
	byCode := ViewOther
	for _, c := range info.ViewCodes {
		k := ViewOther
		if c.Scheme == "SCT" {
			k = viewCodes[c.Value]
		} else {
			k = viewMeanings[strings.ToLower(strings.TrimSpace(c.Meaning))]
		}
		if k != ViewOther {
			byCode = k
			break
		}
	}
	switch {
	case byPosition == ViewOther:
		return byCode
	case byCode == ViewOther || byCode == byPosition:
		return byPosition
	}
	return ViewOther
}
