package serve

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/radgen/radgen/vision"
)

// Limits of the non-file fields of an upload.
const (
	maxFieldBytes = 1 << 10
	maxFields     = 32
	maxStudyID    = 128
)

// params are a report request's choices, from its query string and its
// form fields (a field overrides the query).
type params struct {
	studyID   string
	beam      int  // 0: the model's default
	maxLen    int  // 0: the model's default
	attention bool // return each word's attention over the views
	images    bool // return the decoded views as PNG (for display)
	fhir      bool // return a FHIR DiagnosticReport
	studyUID  string
}

// upload is a parsed report request.
type upload struct {
	params
	views []*vision.Pixels
	names []string
	dicom *vision.DICOMInfo // the header of the first DICOM view, if any
}

// set applies one option field.
func (p *params) set(name, value string, maxBeam, maxLen int) *apiError {
	bad := func(format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, CodeInvalidOption, fmt.Sprintf(format, args...))
	}
	parseBool := func() (bool, *apiError) {
		switch strings.ToLower(value) {
		case "1", "true", "on", "yes":
			return true, nil
		case "", "0", "false", "off", "no":
			return false, nil
		}
		return false, bad("%s: %q is not a boolean", name, value)
	}
	var e *apiError
	switch name {
	case "study_id":
		if len(value) > maxStudyID || !utf8.ValidString(value) {
			return bad("study_id: at most %d bytes of UTF-8", maxStudyID)
		}
		p.studyID = value
	case "study_uid":
		if len(value) > 64 {
			return bad("study_uid: at most 64 characters")
		}
		p.studyUID = value
	case "beam_size":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxBeam {
			return bad("beam_size: %q is not an integer from 1 to %d", value, maxBeam)
		}
		p.beam = n
	case "max_length":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxLen {
			return bad("max_length: %q is not an integer from 1 to %d", value, maxLen)
		}
		p.maxLen = n
	case "attention":
		p.attention, e = parseBool()
	case "images":
		p.images, e = parseBool()
	case "fhir":
		p.fhir, e = parseBool()
	default:
		return bad("unknown option %q (known: study_id, study_uid, beam_size, max_length, attention, images, fhir)", name)
	}
	return e
}

// limits are what readUpload enforces.
type limits struct {
	maxViews  int
	maxPixels int64
	maxBeam   int
	maxLen    int
}

// readUpload reads a multipart/form-data body: every part with a file name
// is a view, in order; the other parts are options. body must already be
// bounded (http.MaxBytesReader). Views are decoded as they arrive, each
// refused before its pixels are decoded if its header declares more than
// the pixel limit.
func readUpload(contentType string, query url.Values, body io.Reader, lim limits) (*upload, *apiError) {
	mt, mp, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || mp["boundary"] == "" {
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send the study as multipart/form-data, one file per view")
	}
	u := &upload{}
	for name, vals := range query {
		if e := u.set(name, vals[len(vals)-1], lim.maxBeam, lim.maxLen); e != nil {
			return nil, e
		}
	}
	mr := multipart.NewReader(body, mp["boundary"])
	fields := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyError(err)
		}
		if part.FileName() == "" {
			fields++
			if fields > maxFields {
				return nil, errorf(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("more than %d form fields", maxFields))
			}
			b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil {
				return nil, bodyError(err)
			}
			if len(b) > maxFieldBytes {
				return nil, errorf(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("field %q is longer than %d bytes", part.FormName(), maxFieldBytes))
			}
			if e := u.set(part.FormName(), string(b), lim.maxBeam, lim.maxLen); e != nil {
				return nil, e
			}
			continue
		}
		if len(u.views) == lim.maxViews {
			return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyViews, fmt.Sprintf("more than %d files; send one file per view", lim.maxViews))
		}
		name := cleanName(part.FileName())
		b, err := io.ReadAll(part)
		if err != nil {
			return nil, bodyError(err)
		}
		px, e := decodeView(b, name, len(u.views), lim.maxPixels)
		if e != nil {
			return nil, e
		}
		if u.dicom == nil && vision.IsDICOM(b[:min(len(b), 132)]) {
			u.dicom, _ = vision.ReadDICOMInfo(bytes.NewReader(b), int64(len(b))) // it decoded: the header reads
		}
		u.views = append(u.views, px)
		u.names = append(u.names, name)
	}
	if len(u.views) == 0 {
		return nil, errorf(http.StatusBadRequest, CodeNoViews, "no image files in the upload; send one file per view")
	}
	return u, nil
}

// bodyError maps an error reading the body.
func bodyError(err error) *apiError {
	if mb, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errorf(http.StatusRequestEntityTooLarge, CodeUploadTooLarge, fmt.Sprintf("the upload is larger than %d bytes", mb.Limit))
	}
	return errorf(http.StatusBadRequest, CodeBadRequest, "malformed multipart body")
}

// cleanName shortens a client's file name for messages.
func cleanName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return s
}

// Image formats the handler accepts, by their first bytes.
var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

// decodeView decodes one view: PNG or JPEG by their signatures, DICOM as
// vision.IsDICOM recognises it (a Part 10 file or a bare data set), whatever
// the file's name.
func decodeView(b []byte, name string, i int, maxPixels int64) (*vision.Pixels, *apiError) {
	var px *vision.Pixels
	var err error
	switch {
	case vision.IsDICOM(b[:min(len(b), 132)]):
		px, err = vision.DecodeDICOM(bytes.NewReader(b), int64(len(b)), vision.WithMaxPixels(maxPixels))
	case bytes.HasPrefix(b, pngMagic), bytes.HasPrefix(b, jpegMagic):
		px, err = vision.Decode(bytes.NewReader(b), vision.WithMaxPixels(maxPixels))
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, fmt.Sprintf("view %d (%s) is not a PNG, JPEG or DICOM file", i+1, name))
	}
	switch {
	case errors.Is(err, vision.ErrTooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyPixels, fmt.Sprintf("view %d (%s) has more than %d pixels", i+1, name, maxPixels))
	case err != nil:
		return nil, errorf(http.StatusUnprocessableEntity, CodeBadImage, fmt.Sprintf("view %d (%s) does not decode", i+1, name))
	case px.W <= 0 || px.H <= 0 || int64(px.W)*int64(px.H) > maxPixels:
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyPixels, fmt.Sprintf("view %d (%s) is %d×%d; the limit is %d pixels", i+1, name, px.W, px.H, maxPixels))
	}
	return px, nil
}

// pixelsImage wraps decoded pixels as an image.Image without copying gray
// ones.
func pixelsImage(px *vision.Pixels) image.Image {
	rect := image.Rect(0, 0, px.W, px.H)
	if px.C == 1 {
		return &image.Gray{Pix: px.Pix, Stride: px.W, Rect: rect}
	}
	img := image.NewNRGBA(rect)
	for i := range px.W * px.H {
		copy(img.Pix[4*i:4*i+3], px.Pix[3*i:3*i+3])
		img.Pix[4*i+3] = 0xff
	}
	return img
}
