package dicomweb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Tags the package and its callers name often, as group<<16 | element.
const (
	TagSpecificCharacterSet     uint32 = 0x00080005
	TagSOPClassUID              uint32 = 0x00080016
	TagSOPInstanceUID           uint32 = 0x00080018
	TagStudyDate                uint32 = 0x00080020
	TagAccessionNumber          uint32 = 0x00080050
	TagModality                 uint32 = 0x00080060
	TagModalitiesInStudy        uint32 = 0x00080061
	TagRetrieveURL              uint32 = 0x00081190
	TagFailedSOPSequence        uint32 = 0x00081198
	TagReferencedSOPSequence    uint32 = 0x00081199
	TagReferencedSOPClassUID    uint32 = 0x00081150
	TagReferencedSOPInstanceUID uint32 = 0x00081155
	TagFailureReason            uint32 = 0x00081197
	TagWarningReason            uint32 = 0x00081196
	TagSeriesDescription        uint32 = 0x0008103E
	TagManufacturerModelName    uint32 = 0x00081090
	TagPatientID                uint32 = 0x00100020
	TagStudyInstanceUID         uint32 = 0x0020000D
	TagSeriesInstanceUID        uint32 = 0x0020000E
	TagSeriesNumber             uint32 = 0x00200011
	TagNumberOfStudyInstances   uint32 = 0x00201208 // Number of Study Related Instances
	TagNumberOfSeriesInstances  uint32 = 0x00201209 // Number of Series Related Instances
)

// Dataset is one object of the DICOM JSON Model (PS3.18 F.2): attributes
// keyed by their tag as eight upper-case hex digits ("0020000D").
type Dataset map[string]Attribute

// Attribute is one attribute of a Dataset. Value holds the values as JSON
// (strings, numbers, person-name objects or, for SQ, nested datasets);
// the accessors of Dataset read them.
type Attribute struct {
	VR           string            `json:"vr"`
	Value        []json.RawMessage `json:"Value,omitempty"`
	InlineBinary string            `json:"InlineBinary,omitempty"`
	BulkDataURI  string            `json:"BulkDataURI,omitempty"`
}

// TagKey returns the key of a tag in a Dataset.
func TagKey(tag uint32) string { return fmt.Sprintf("%08X", tag) }

// Strings returns the values of the attribute as text: strings as they
// are, numbers in their JSON form, person names by their Alphabetic
// component; nil when absent. Sequence items are not text and are left
// out.
func (d Dataset) Strings(tag uint32) []string {
	a, ok := d[TagKey(tag)]
	if !ok {
		return nil
	}
	var out []string
	for _, raw := range a.Value {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) == 0:
		case raw[0] == '"':
			var s string
			if json.Unmarshal(raw, &s) == nil {
				out = append(out, s)
			}
		case raw[0] == '{':
			var pn struct{ Alphabetic string }
			if a.VR == "PN" && json.Unmarshal(raw, &pn) == nil {
				out = append(out, pn.Alphabetic)
			}
		case string(raw) == "null":
			out = append(out, "")
		default:
			out = append(out, string(raw))
		}
	}
	return out
}

// String returns the first value of the attribute as text ("" when
// absent).
func (d Dataset) String(tag uint32) string {
	if v := d.Strings(tag); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Int returns the first value of the attribute as an integer (an IS
// string or a JSON number); ok is false when it is absent or not one.
func (d Dataset) Int(tag uint32) (n int, ok bool) {
	n, err := strconv.Atoi(strings.TrimSpace(d.String(tag)))
	return n, err == nil
}

// Items returns the items of a sequence attribute.
func (d Dataset) Items(tag uint32) ([]Dataset, error) {
	a, ok := d[TagKey(tag)]
	if !ok {
		return nil, nil
	}
	out := make([]Dataset, 0, len(a.Value))
	for _, raw := range a.Value {
		var item Dataset
		if err := json.Unmarshal(raw, &item); err != nil {
			return nil, fmt.Errorf("%w: item of %s: %v", ErrMalformed, TagKey(tag), err)
		}
		if err := item.normalize(); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// normalize upper-cases the keys and checks they are tags.
func (d *Dataset) normalize() error {
	for k, v := range *d {
		if len(k) != 8 || strings.Trim(k, "0123456789abcdefABCDEF") != "" {
			return fmt.Errorf("%w: %q is not a tag", ErrMalformed, truncate(k, 32))
		}
		if u := strings.ToUpper(k); u != k {
			delete(*d, k)
			(*d)[u] = v
		}
	}
	return nil
}

// ParseJSON reads a DICOM JSON answer: an array of datasets (a search
// or metadata answer) or a single dataset (a STOW-RS answer), of at most
// maxResults datasets. Keys must be tags (eight hex digits).
func ParseJSON(b []byte, maxResults int) ([]Dataset, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil // 204 No Content and some servers' empty search answers
	}
	var list []Dataset
	if b[0] == '{' {
		var one Dataset
		if err := json.Unmarshal(b, &one); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		list = []Dataset{one}
	} else {
		// Count the elements before decoding them, so that an array of a
		// million empty objects is refused before a million maps exist.
		dec := json.NewDecoder(bytes.NewReader(b))
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, fmt.Errorf("%w: not a JSON array or object", ErrMalformed)
		}
		for dec.More() {
			if len(list) == maxResults {
				return nil, fmt.Errorf("%w: more than %d datasets", ErrLimit, maxResults)
			}
			var d Dataset
			if err := dec.Decode(&d); err != nil {
				return nil, fmt.Errorf("%w: dataset %d: %v", ErrMalformed, len(list), err)
			}
			list = append(list, d)
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: data after the array", ErrMalformed)
		}
	}
	for i := range list {
		if list[i] == nil {
			return nil, fmt.Errorf("%w: dataset %d is null", ErrMalformed, i)
		}
		if err := list[i].normalize(); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// readLimited reads r whole, failing with ErrLimit past max bytes.
func readLimited(r io.Reader, max int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s larger than %d bytes", ErrLimit, what, max)
	}
	return b, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
