package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/radgen/radgen/internal/boundedio"
)

// Splits are the split names of an annotation.json, in file order.
var Splits = [...]string{"train", "val", "test"}

// Errors for bad annotations; they are wrapped with the split and the study.
var (
	// ErrMissingSplit: the annotation has no such split.
	ErrMissingSplit = errors.New("data: split missing from the annotation")
	// ErrBadStudy: a study lacks an id, a report or images, or holds
	// invalid UTF-8.
	ErrBadStudy = errors.New("data: bad study")
)

// Study is one entry of R2Gen's annotation.json:
//
//	IU X-Ray:  {"id": "CXR2384_IM-0942", "report": "…",
//	            "image_path": ["CXR2384_IM-0942/0.png", "CXR2384_IM-0942/1.png"], "split": "train"}
//	MIMIC-CXR: {"id": "<dicom id>", "study_id": 50414267, "subject_id": 10000032, "report": "…",
//	            "image_path": ["p10/p10000032/s50414267/<dicom>.jpg"], "split": "train"}
//
// Image paths are relative to the image directory. Labels is not R2Gen's: the
// synthetic films ([WriteSynthetic]) record their 14 CheXpert-style labels
// there (1 present, 0 absent, in [LabelNames] order).
type Study struct {
	ID        string   `json:"id"`
	StudyID   int64    `json:"study_id,omitempty"`
	SubjectID int64    `json:"subject_id,omitempty"`
	Report    string   `json:"report"`
	ImagePath []string `json:"image_path"`
	Split     string   `json:"split"`
	Labels    []int8   `json:"labels,omitempty"`
}

// Annotation is a parsed annotation.json: {"train": […], "val": […],
// "test": […]}.
type Annotation struct {
	splits map[string][]Study
	order  []string // keys in file order
}

// NewAnnotation builds an annotation from studies per split.
func NewAnnotation(splits map[string][]Study) *Annotation {
	a := &Annotation{splits: make(map[string][]Study, len(splits))}
	for k, v := range splits {
		a.splits[k] = v
		a.order = append(a.order, k)
	}
	slices.SortFunc(a.order, func(x, y string) int { return splitRank(x) - splitRank(y) })
	return a
}

func splitRank(s string) int {
	if i := slices.Index(Splits[:], s); i >= 0 {
		return i
	}
	return len(Splits)
}

// Split returns the studies of one split (shared, not copied). A split the
// file lacks gives [ErrMissingSplit], naming the splits present.
func (a *Annotation) Split(name string) ([]Study, error) {
	s, ok := a.splits[name]
	if !ok {
		have := make([]string, len(a.order))
		for i, k := range a.order {
			have[i] = strconv.Quote(k)
		}
		return nil, fmt.Errorf("%w: %q (the annotation has %s)", ErrMissingSplit, name, strings.Join(have, ", "))
	}
	return s, nil
}

// Reports returns the report texts of one split, for [BuildTokenizer].
func (a *Annotation) Reports(split string) ([]string, error) {
	s, err := a.Split(split)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].Report
	}
	return out, nil
}

// SplitNames returns the splits present, train/val/test first.
func (a *Annotation) SplitNames() []string { return slices.Clone(a.order) }

// MarshalJSON writes the annotation in R2Gen's layout, splits in order.
func (a *Annotation) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range a.order {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(": ")
		studies := a.splits[k]
		if studies == nil {
			studies = []Study{}
		}
		sb, err := json.Marshal(studies)
		if err != nil {
			return nil, err
		}
		b.Write(sb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// DefaultMaxAnnotationBytes bounds an annotation.json: 1 GiB, several times
// MIMIC-CXR's (about 150 MB for 270k studies). Parsing streams study by
// study, so memory is about the size of the studies kept, not a multiple
// of the file's.
const DefaultMaxAnnotationBytes = 1 << 30

// ErrTooLarge is wrapped by the error for an input over its size limit.
var ErrTooLarge = boundedio.ErrTooLarge

// ErrNotRegular is wrapped by the error for a FIFO, device or other
// non-regular file given where a file is read, unless allowed
// ([WithNonRegularFiles]).
var ErrNotRegular = boundedio.ErrNotRegular

// FileOption configures how [OpenAnnotation] reads a file.
type FileOption func(*fileOptions) error

type fileOptions struct {
	maxBytes   int64
	nonRegular bool
}

// WithMaxFileBytes bounds the bytes read (default
// DefaultMaxAnnotationBytes); n must be positive.
func WithMaxFileBytes(n int64) FileOption {
	return func(o *fileOptions) error {
		if n <= 0 {
			return fmt.Errorf("data: file size limit %d", n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithNonRegularFiles allows FIFOs, character devices and the like (for
// example /dev/stdin); they are refused by default, since a FIFO without a
// writer blocks forever. The size limit still applies.
func WithNonRegularFiles() FileOption {
	return func(o *fileOptions) error { o.nonRegular = true; return nil }
}

// ReadAnnotation parses an annotation.json of at most
// DefaultMaxAnnotationBytes (see [ReadAnnotationLimit]). Every study needs a
// non-empty id, a report with some non-space text and at least one image
// path; the strings must be valid UTF-8 (JSON escapes of lone surrogates
// included). Errors name the split, the position and the study id.
// study_id and subject_id may be numbers or numeric strings.
func ReadAnnotation(r io.Reader) (*Annotation, error) {
	return ReadAnnotationLimit(r, DefaultMaxAnnotationBytes)
}

// ReadAnnotationLimit is ReadAnnotation reading at most maxBytes bytes; a
// longer input gives an error wrapping [ErrTooLarge]. The JSON is decoded
// study by study as it streams in. A split named twice is an error.
func ReadAnnotationLimit(r io.Reader, maxBytes int64) (*Annotation, error) {
	dec := json.NewDecoder(boundedio.Reader(r, maxBytes, "data: annotation"))
	fail := func(err error) (*Annotation, error) {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("data: annotation: %w", err)
	}
	delim := func(want json.Delim) error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); !ok || d != want {
			return fmt.Errorf("want %v, have %v", want, t)
		}
		return nil
	}
	a := &Annotation{splits: map[string][]Study{}}
	t, err := dec.Token()
	if err != nil {
		return fail(err)
	}
	switch t {
	case nil: // null: no splits, as json.Unmarshal makes of it
	case json.Delim('{'):
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			k := kt.(string) // object keys are strings
			if _, dup := a.splits[k]; dup {
				return nil, fmt.Errorf("data: annotation: split %q appears twice", k)
			}
			studies, err := readSplit(dec, k, delim)
			if err != nil {
				return nil, err
			}
			a.order = append(a.order, k)
			a.splits[k] = studies
		}
		if err := delim('}'); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("the top level must be an object, have %v", t))
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the top-level object")
		}
		return fail(err)
	}
	slices.SortFunc(a.order, func(x, y string) int {
		if d := splitRank(x) - splitRank(y); d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	return a, nil
}

// readSplit decodes one split's array, a study at a time.
func readSplit(dec *json.Decoder, k string, delim func(json.Delim) error) ([]Study, error) {
	bad := func(err error) error {
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("data: annotation split %q: %w", k, err)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, bad(err)
	}
	switch t {
	case nil:
		return nil, nil
	case json.Delim('['):
	default:
		return nil, bad(fmt.Errorf("want an array of studies, have %v", t))
	}
	studies := []Study{}
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(err)
		}
		var s Study
		if err := parseStudy(&s, raw); err != nil {
			return nil, fmt.Errorf("data: annotation %s[%d]: %w", k, i, err)
		}
		studies = append(studies, s)
	}
	if err := delim(']'); err != nil {
		return nil, bad(err)
	}
	return studies, nil
}

// LoadAnnotation reads the named annotation.json with the default limits
// (see [OpenAnnotation]).
func LoadAnnotation(name string) (*Annotation, error) { return OpenAnnotation(name) }

// OpenAnnotation reads the named annotation.json: a regular file (FIFOs
// and devices are refused unless [WithNonRegularFiles]) of at most
// DefaultMaxAnnotationBytes ([WithMaxFileBytes]).
func OpenAnnotation(name string, opts ...FileOption) (*Annotation, error) {
	o := fileOptions{maxBytes: DefaultMaxAnnotationBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	f, err := boundedio.Open(name, o.nonRegular)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > o.maxBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, limit %d", name, ErrTooLarge, st.Size(), o.maxBytes)
	}
	a, err := ReadAnnotationLimit(bufio.NewReaderSize(f, 64<<10), o.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return a, nil
}

func parseStudy(s *Study, raw json.RawMessage) error {
	var e struct {
		ID        json.RawMessage   `json:"id"`
		StudyID   json.RawMessage   `json:"study_id"`
		SubjectID json.RawMessage   `json:"subject_id"`
		Report    json.RawMessage   `json:"report"`
		ImagePath []json.RawMessage `json:"image_path"`
		Split     json.RawMessage   `json:"split"`
		Labels    []int8            `json:"labels"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("%w: %v", ErrBadStudy, err)
	}
	var err error
	if s.ID, err = strictString(e.ID, true); err != nil || s.ID == "" {
		return fmt.Errorf("%w: id %s: missing, empty or %v", ErrBadStudy, short(e.ID), err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadStudy, s.ID, fmt.Sprintf(format, args...))
	}
	if s.Report, err = strictString(e.Report, false); err != nil {
		return bad("report: %v", err)
	}
	if pyStrip(s.Report) == "" {
		return bad("empty report")
	}
	if s.Split, err = strictString(e.Split, true); err != nil {
		return bad("split: %v", err)
	}
	if len(e.ImagePath) == 0 {
		return bad("no image_path")
	}
	s.ImagePath = make([]string, len(e.ImagePath))
	for i, p := range e.ImagePath {
		if s.ImagePath[i], err = strictString(p, false); err != nil || s.ImagePath[i] == "" {
			return bad("image_path[%d] %s: empty or %v", i, short(p), err)
		}
	}
	if s.StudyID, err = flexInt(e.StudyID); err != nil {
		return bad("study_id: %v", err)
	}
	if s.SubjectID, err = flexInt(e.SubjectID); err != nil {
		return bad("subject_id: %v", err)
	}
	s.Labels = e.Labels
	return nil
}

// strictString decodes a JSON string, refusing what encoding/json would
// silently repair: invalid UTF-8 and lone surrogate escapes (both become
// U+FFFD there). An absent value is "" when optional, an error otherwise.
// Numbers are accepted as their text (MIMIC ids are sometimes numeric).
func strictString(raw json.RawMessage, optional bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if optional {
			return "", nil
		}
		return "", errors.New("missing")
	}
	if !utf8.Valid(raw) {
		return "", errors.New("invalid UTF-8")
	}
	if raw[0] != '"' {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("want a string, have %s", short(raw))
		}
		return n.String(), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	if bytes.Contains(raw, []byte(`\u`)) && loneSurrogate(raw) {
		return "", errors.New("invalid UTF-16 escape (lone surrogate)")
	}
	return s, nil
}

// loneSurrogate reports whether a valid JSON string literal has a \uD800 …
// \uDFFF escape that is not a high surrogate followed by a low one.
func loneSurrogate(raw []byte) bool {
	hex4 := func(i int) rune {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return -1
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r := hex4(i)
		switch {
		case r < 0: // another escape: skip its second character
			i++
		case 0xd800 <= r && r < 0xdc00:
			if lo := hex4(i + 6); lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		case 0xdc00 <= r && r <= 0xdfff:
			return true
		default:
			i += 5
		}
	}
	return false
}

// flexInt decodes an optional integer given as a number or a numeric string.
func flexInt(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		raw = []byte(s)
	}
	return strconv.ParseInt(string(raw), 10, 64)
}

// short quotes at most 40 bytes of raw JSON for an error message.
func short(raw []byte) string {
	if len(raw) > 40 {
		return strconv.Quote(string(raw[:40])) + "…"
	}
	return strconv.Quote(string(raw))
}
