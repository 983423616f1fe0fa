package data

import (
	"fmt"
	"path/filepath"
)

// Example is one tokenized study of a [Dataset].
type Example struct {
	ID                 string
	StudyID, SubjectID int64    // MIMIC-CXR identifiers; 0 for IU X-Ray
	Report             string   // as in the annotation
	Images             []string // the views used, relative to the image directory
	// IDs are R2Gen's ids, [0, words…, 0] truncated to MaxSeqLen. R2Gen
	// scores generated reports against tok.Decode(IDs[1:]), this truncated
	// text with <unk> for rare words, not against Report.
	IDs    []int
	Labels []int8 // optional CheXpert-style labels (synthetic films)
}

// Dataset is one split of an annotation, tokenized: R2Gen's
// IuxrayMultiImageDataset / MimiccxrSingleImageDataset without the images,
// which a [Loader] reads.
type Dataset struct {
	Corpus    Corpus
	Split     string
	ImageDir  string // root of the image paths ("" for text only)
	Views     int    // images per example
	MaxSeqLen int
	Examples  []Example
}

// DatasetConfig holds the choices of [NewDataset]; zero fields take the
// corpus defaults.
type DatasetConfig struct {
	ImageDir  string // directory the image paths are relative to
	MaxSeqLen int    // default Corpus.MaxSeqLen(): 60 IU X-Ray, 100 MIMIC-CXR
	Views     int    // default Corpus.Views(): 2 IU X-Ray, 1 MIMIC-CXR
}

// NewDataset tokenizes one split of ann with tok (whose corpus it takes).
// IU X-Ray studies use their first two images, MIMIC-CXR studies their
// first. A missing split, or a study with too few images, is an error naming
// the study. Images are not opened here.
func NewDataset(ann *Annotation, split string, tok *Tokenizer, cfg DatasetConfig) (*Dataset, error) {
	studies, err := ann.Split(split)
	if err != nil {
		return nil, err
	}
	c := tok.Corpus()
	d := &Dataset{Corpus: c, Split: split, ImageDir: cfg.ImageDir, Views: cfg.Views, MaxSeqLen: cfg.MaxSeqLen}
	if d.Views == 0 {
		d.Views = c.Views()
	}
	if d.MaxSeqLen == 0 {
		d.MaxSeqLen = c.MaxSeqLen()
	}
	if d.Views < 1 || d.MaxSeqLen < 2 {
		return nil, fmt.Errorf("data: dataset config: %d views, max_seq_length %d", d.Views, d.MaxSeqLen)
	}
	d.Examples = make([]Example, len(studies))
	for i := range studies {
		s := &studies[i]
		if len(s.ImagePath) < d.Views {
			return nil, fmt.Errorf("%w %q (%s[%d]): %d image paths, %s needs %d", ErrBadStudy, s.ID, split, i, len(s.ImagePath), c, d.Views)
		}
		if s.ID == "" || pyStrip(s.Report) == "" {
			return nil, fmt.Errorf("%w %q (%s[%d]): empty id or report", ErrBadStudy, s.ID, split, i)
		}
		d.Examples[i] = Example{
			ID: s.ID, StudyID: s.StudyID, SubjectID: s.SubjectID, Report: s.Report,
			Images: s.ImagePath[:d.Views:d.Views],
			IDs:    tok.Encode(nil, s.Report, d.MaxSeqLen),
			Labels: s.Labels,
		}
	}
	return d, nil
}

// Len returns the number of examples.
func (d *Dataset) Len() int { return len(d.Examples) }

// ImagePath returns the file path of view v of example i.
func (d *Dataset) ImagePath(i, v int) string {
	return filepath.Join(d.ImageDir, filepath.FromSlash(d.Examples[i].Images[v]))
}
