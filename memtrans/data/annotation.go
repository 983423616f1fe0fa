package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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

// ReadAnnotation parses an annotation.json. Every study needs a non-empty
// id, a report with some non-space text and at least one image path; the
// strings must be valid UTF-8 (JSON escapes of lone surrogates included).
// Errors name the split, the position and the study id. study_id and
// subject_id may be numbers or numeric strings.
func ReadAnnotation(r io.Reader) (*Annotation, error) {
	var top map[string]json.RawMessage
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("data: annotation: %w", err)
	}
	a := &Annotation{splits: make(map[string][]Study, len(top))}
	for k, v := range top {
		var entries []json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			return nil, fmt.Errorf("data: annotation split %q: %w", k, err)
		}
		studies := make([]Study, len(entries))
		for i, e := range entries {
			if err := parseStudy(&studies[i], e); err != nil {
				return nil, fmt.Errorf("data: annotation %s[%d]: %w", k, i, err)
			}
		}
		a.splits[k] = studies
		a.order = append(a.order, k)
	}
	slices.SortFunc(a.order, func(x, y string) int {
		if d := splitRank(x) - splitRank(y); d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	return a, nil
}

// LoadAnnotation reads the named annotation.json.
func LoadAnnotation(name string) (*Annotation, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ReadAnnotation(f)
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
