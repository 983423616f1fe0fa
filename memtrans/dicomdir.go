package memtrans

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/radgen/radgen/internal/dicomviews"
	"github.com/radgen/radgen/vision"
)

// Errors of StudiesFromDICOMDir about one study, each wrapped with the
// study's StudyInstanceUID (and ErrStudy).
var (
	// ErrNoFrontalView: none of the study's images is a frontal (PA or
	// AP) view by its View Position or View Code Sequence.
	ErrNoFrontalView = dicomviews.ErrNoFrontal
	// ErrNoLateralView: a two-view model needs a lateral view and the
	// study has none.
	ErrNoLateralView = dicomviews.ErrNoLateral
	// ErrNoDICOM: the folder holds no DICOM image at all.
	ErrNoDICOM = errors.New("memtrans: no DICOM images")
)

// DICOMDirOption configures StudiesFromDICOMDir.
type DICOMDirOption func(*dicomDirOptions) error

type dicomDirOptions struct {
	maxFiles int
	decode   []vision.Option
}

// WithDICOMDecodeOptions sets the options the chosen views are decoded
// with (vision.WithMaxPixels, vision.WithMaxFileBytes, …), as
// a Model's WithImageOptions takes them; by default vision's default limits.
func WithDICOMDecodeOptions(opts ...vision.Option) DICOMDirOption {
	return func(o *dicomDirOptions) error {
		o.decode = append(o.decode, opts...)
		return nil
	}
}

// WithMaxDICOMFiles bounds the files StudiesFromDICOMDir looks at (default
// 100000); a folder holding more is refused before any is read.
func WithMaxDICOMFiles(n int) DICOMDirOption {
	return func(o *dicomDirOptions) error {
		if n <= 0 {
			return fmt.Errorf("memtrans: max DICOM files %d", n)
		}
		o.maxFiles = n
		return nil
	}
}

// StudiesFromDICOMDir reads the DICOM images under dir (its subfolders
// included; other files are ignored), groups them by StudyInstanceUID
// (0020,000D) and builds a Study for each: its frontal view, then, when
// views is 2, its lateral view, decoded as StudyFromFiles does. Study.ID is
// the StudyInstanceUID and Study.DICOM names the files used. Studies come in
// the order of their first file (paths in lexical order).
//
// A view's projection comes from View Position (0018,5101): PA or AP is
// frontal; LL, RL, LATERAL or LAT is lateral. When View Position is absent
// or says neither, the items of View Code Sequence (0054,0220) decide:
// SNOMED CT (CID 4010) 272479007 postero-anterior, 399348003
// antero-posterior and 399033003 frontal; 399067008 lateral, 399198007
// right lateral, 399173006 left lateral, 399260004 medial-lateral and
// 399352003 lateral-medial; or, for other schemes (the retired SNOMED-RT
// SRT codes among them), a Code Meaning naming one of these projections.
// An image whose View Position and view code disagree is used for neither.
// Of several frontal views the PA is preferred; of several laterals the LL;
// then the lowest Series and Instance Number, then the path.
//
// Only images are considered (a header reaching Pixel Data, with Rows and
// Columns); Structured Reports, presentation states and the like are
// skipped, and so are files that are not DICOM. A DICOM file whose header
// is malformed or lacks a StudyInstanceUID is left out with an error
// naming it. A study whose files disagree on the PatientID, that has no
// frontal view (ErrNoFrontalView) or, for views 2, no lateral
// (ErrNoLateralView), or whose chosen views fail to decode, is left out
// with an error naming the study. These errors are joined into the
// returned error, which is then non-nil alongside the studies that were
// read. A folder with no
// DICOM image gives ErrNoDICOM. Header reading is bounded as
// vision.ReadDICOMInfo states; decoding applies vision's default limits
// unless WithDICOMDecodeOptions sets others.
func StudiesFromDICOMDir(ctx context.Context, dir string, views int, opts ...DICOMDirOption) ([]Study, error) {
	if views != 1 && views != 2 {
		return nil, fmt.Errorf("%w: %d views per study (1: frontal, 2: frontal and lateral)", ErrStudy, views)
	}
	o := dicomDirOptions{maxFiles: 100000}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if len(paths) == o.maxFiles {
				return fmt.Errorf("memtrans: %s holds more than %d files", dir, o.maxFiles)
			}
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	type group struct {
		uid   string
		views []vision.DICOMView
	}
	var groups []*group
	byUID := map[string]*group{}
	var errs []error
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, ok, err := readDICOMHeader(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || !info.HasPixelData || info.Rows == 0 || info.Columns == 0 {
			continue
		}
		if info.StudyInstanceUID == "" {
			errs = append(errs, fmt.Errorf("%w: %s has no StudyInstanceUID", vision.ErrDICOM, p))
			continue
		}
		g := byUID[info.StudyInstanceUID]
		if g == nil {
			g = &group{uid: info.StudyInstanceUID}
			byUID[g.uid] = g
			groups = append(groups, g)
		}
		g.views = append(g.views, vision.DICOMView{Path: p, Kind: info.View(), Info: info})
	}
	if len(groups) == 0 {
		return nil, errors.Join(append([]error{fmt.Errorf("%w under %s", ErrNoDICOM, dir)}, errs...)...)
	}
	var studies []Study
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		src, err := chooseViews(g.uid, g.views, views)
		if err == nil {
			var s Study
			paths := make([]string, len(src.Views))
			for i, v := range src.Views {
				paths[i] = v.Path
			}
			if s, err = studyFromFilesWith(g.uid, paths, o.decode...); err == nil {
				s.DICOM = src
				studies = append(studies, s)
				continue
			}
		}
		errs = append(errs, err)
	}
	return studies, errors.Join(errs...)
}

// readDICOMHeader reads a file's DICOM header; ok is false for a file that
// is not DICOM.
func readDICOMHeader(p string) (*vision.DICOMInfo, bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var head [132]byte
	n, _ := f.ReadAt(head[:], 0)
	if vision.Sniff(head[:n]) != "dicom" {
		return nil, false, nil
	}
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	info, err := vision.ReadDICOMInfo(f, st.Size())
	if err != nil {
		return nil, false, fmt.Errorf("memtrans: %s: %w", p, err)
	}
	return info, true, nil
}

// chooseViews picks a study's frontal (and lateral) view, by the rule the
// report service's STOW-RS route shares (internal/dicomviews).
func chooseViews(uid string, all []vision.DICOMView, views int) (*vision.DICOMStudy, error) {
	src, err := dicomviews.Choose(uid, all, views)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStudy, err)
	}
	return src, nil
}
