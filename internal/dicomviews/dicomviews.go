// Package dicomviews chooses the views of a chest study among its DICOM
// images: the rule memtrans.StudiesFromDICOMDir applies to a folder and
// the report service's STOW-RS route applies to the instances of one
// request, kept in one place so that both pick the same films.
package dicomviews

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/radgen/radgen/vision"
)

// Errors of Choose. memtrans exports the first two as ErrNoFrontalView and
// ErrNoLateralView.
var (
	// ErrNoFrontal: none of the images is a frontal (PA or AP) view by
	// its View Position or View Code Sequence.
	ErrNoFrontal = errors.New("memtrans: no usable frontal view")
	// ErrNoLateral: a two-view model needs a lateral view and the study
	// has none.
	ErrNoLateral = errors.New("memtrans: no usable lateral view")
	// ErrPatients: the images do not agree on the PatientID.
	ErrPatients = errors.New("files of other patients")
)

// Choose picks the frontal view of the study uid among all (each with its
// Kind and Info set), then, when views is 2, its lateral view. Of several
// frontal views the PA is preferred, of several laterals the LL; then the
// lowest Series Number, the lowest Instance Number, and the Path (in
// lexical order). The images not chosen are the study's Others. It
// fails with an error naming the study and wrapping ErrPatients,
// ErrNoFrontal or ErrNoLateral. views must be 1 or 2 and all not empty.
func Choose(uid string, all []vision.DICOMView, views int) (*vision.DICOMStudy, error) {
	fail := func(err error, format string, args ...any) error {
		return fmt.Errorf("study %s: %w"+format, append([]any{uid, err}, args...)...)
	}
	for _, v := range all[1:] {
		if v.Info.PatientID != all[0].Info.PatientID {
			return nil, fail(ErrPatients, ": %s has PatientID %q, %s has %q", all[0].Path, all[0].Info.PatientID, v.Path, v.Info.PatientID)
		}
	}
	ranked := slices.Clone(all)
	slices.SortStableFunc(ranked, func(a, b vision.DICOMView) int {
		return cmp.Or(
			cmp.Compare(preference(a), preference(b)),
			cmp.Compare(atoiOr(a.Info.SeriesNumber), atoiOr(b.Info.SeriesNumber)),
			cmp.Compare(atoiOr(a.Info.InstanceNumber), atoiOr(b.Info.InstanceNumber)),
			strings.Compare(a.Path, b.Path),
		)
	})
	pick := func(k vision.ViewKind) int {
		return slices.IndexFunc(ranked, func(v vision.DICOMView) bool { return v.Kind == k })
	}
	src := &vision.DICOMStudy{StudyInstanceUID: uid}
	f := pick(vision.ViewFrontal)
	if f < 0 {
		return nil, fail(ErrNoFrontal, " (%d images: %s)", len(all), Describe(all))
	}
	src.Views = append(src.Views, ranked[f])
	if views == 2 {
		l := pick(vision.ViewLateral)
		if l < 0 {
			return nil, fail(ErrNoLateral, " (%d images: %s)", len(all), Describe(all))
		}
		src.Views = append(src.Views, ranked[l])
	}
	for _, v := range all {
		if !slices.ContainsFunc(src.Views, func(u vision.DICOMView) bool { return u.Path == v.Path }) {
			src.Others = append(src.Others, v)
		}
	}
	return src, nil
}

// Describe lists the images' names (the base of each Path), View
// Positions and view-code counts, for error messages.
func Describe(all []vision.DICOMView) string {
	parts := make([]string, len(all))
	for i, v := range all {
		vp := v.Info.ViewPosition
		if vp == "" {
			vp = "no View Position"
		}
		parts[i] = fmt.Sprintf("%s: %s, %d view codes", filepath.Base(v.Path), vp, len(v.Info.ViewCodes))
	}
	return strings.Join(parts, "; ")
}

// preference ranks views of one kind: PA before AP, LL before RL.
func preference(v vision.DICOMView) int {
	switch strings.ToUpper(v.Info.ViewPosition) {
	case "PA", "LL":
		return 0
	case "AP", "RL":
		return 1
	}
	return 2
}

func atoiOr(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return int(^uint(0) >> 1) // absent numbers sort last
	}
	return n
}
