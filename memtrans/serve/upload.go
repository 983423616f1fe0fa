package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/radgen/radgen/vision"
)

// uidRE matches a DICOM UID (PS3.5 9.1): dotted decimal components without
// leading zeros.
var uidRE = regexp.MustCompile(`^[0-2](\.(0|[1-9][0-9]*))+$`)

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
	files   []*blob      // the views' bytes as uploaded, until decoded
	headers []viewHeader // what each view's header says
	names   []string
	views   []*vision.Pixels  // decoded, at the model's size
	display []*vision.Pixels  // decoded, scaled for display (images=1)
	sizes   [][2]int          // width and height of each file
	dicom   *vision.DICOMInfo // the header of the first DICOM view, if any
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
		if strings.IndexFunc(value, unicode.IsControl) >= 0 {
			return bad("study_id: control characters (NUL, ESC, CR, LF, …) are not allowed")
		}
		p.studyID = value
	case "study_uid":
		if value != "" && (len(value) > 64 || !uidRE.MatchString(value)) {
			return bad("study_uid: not a DICOM UID (dotted decimal, at most 64 characters)")
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
// bounded (http.MaxBytesReader). The views' bytes are kept as they arrive,
// drawn from the upload's credit (nil: not counted); then every view's
// header is read, and a file that is not an image or declares more than
// the pixel limit is refused before any pixel is decoded.
func readUpload(ctx context.Context, contentType string, query url.Values, body io.Reader, lim limits, cr *credit) (*upload, *apiError) {
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
		if len(u.files) == lim.maxViews {
			return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyViews, fmt.Sprintf("more than %d files; send one file per view", lim.maxViews))
		}
		b, e := readFile(ctx, part, cr)
		if e != nil {
			return nil, e
		}
		u.files = append(u.files, b)
		u.names = append(u.names, cleanName(part.FileName()))
	}
	if len(u.files) == 0 {
		return nil, errorf(http.StatusBadRequest, CodeNoViews, "no image files in the upload; send one file per view")
	}
	for i, b := range u.files {
		vh, ok, err := readHeader(b)
		name := u.names[i]
		switch {
		case !ok:
			return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, fmt.Sprintf("view %d (%s) is not a PNG, JPEG or DICOM file", i+1, name))
		case err != nil || vh.w <= 0 || vh.h <= 0:
			return nil, errorf(http.StatusUnprocessableEntity, CodeBadImage, fmt.Sprintf("view %d (%s) does not decode", i+1, name))
		case int64(vh.w)*int64(vh.h) > lim.maxPixels:
			return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyPixels, fmt.Sprintf("view %d (%s) is %d×%d; the limit is %d pixels", i+1, name, vh.w, vh.h, lim.maxPixels))
		}
		if u.dicom == nil && vh.dicom != nil {
			u.dicom = vh.dicom
		}
		u.headers = append(u.headers, vh)
	}
	return u, nil
}

// blob is a file's bytes as they arrived, kept in the chunks they were
// read into: a file is never copied into a larger buffer as it grows, so
// it holds its length and at most one chunk more while it arrives, and its
// length once complete.
type blob struct {
	chunks [][]byte
	n      int64 // bytes
	size   int64 // bytes allocated: the chunks' capacities
}

// len returns the file's length.
func (b *blob) len() int64 { return b.n }

// reader reads the file from its start.
func (b *blob) reader() io.Reader {
	if len(b.chunks) == 1 {
		return bytes.NewReader(b.chunks[0])
	}
	rs := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

// head returns the file's first n bytes, or all of a shorter file.
func (b *blob) head(n int) []byte {
	if len(b.chunks) > 0 && len(b.chunks[0]) >= n {
		return b.chunks[0][:n]
	}
	h := make([]byte, 0, n)
	for _, c := range b.chunks {
		h = append(h, c[:min(len(c), n-len(h))]...)
		if len(h) == n {
			break
		}
	}
	return h
}

// bytes returns the file as one slice (tests and small files).
func (b *blob) bytes() []byte {
	out := make([]byte, 0, b.n)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// readFile reads one file part into chunks of uploadChunk bytes, each
// drawn from cr before it is allocated; the last chunk is then trimmed to
// its length.
func readFile(ctx context.Context, r io.Reader, cr *credit) (*blob, *apiError) {
	b := &blob{}
	overloaded := func() *apiError {
		return errorf(http.StatusTooManyRequests, CodeOverloaded, "the service's memory is taken by other requests; retry later")
	}
	var cur []byte // the chunk being filled, b.chunks' last
	for {
		if len(cur) == cap(cur) {
			if !cr.alloc(ctx, uploadChunk) {
				return nil, overloaded()
			}
			cur = make([]byte, 0, uploadChunk)
			b.chunks = append(b.chunks, cur)
			b.size += uploadChunk
		}
		n, err := r.Read(cur[len(cur):cap(cur)])
		cur = cur[:len(cur)+n]
		b.chunks[len(b.chunks)-1] = cur
		b.n += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyError(err)
		}
	}
	// The last chunk, trimmed: its copy, then the chunk given back.
	last := len(b.chunks) - 1
	if len(cur) == 0 {
		b.chunks = b.chunks[:last]
		b.size -= uploadChunk
		cr.unalloc(uploadChunk)
	} else if len(cur) < cap(cur) {
		if !cr.alloc(ctx, int64(len(cur))) {
			return nil, overloaded()
		}
		b.chunks[last] = append(make([]byte, 0, len(cur)), cur...)
		b.size += int64(len(cur)) - uploadChunk
		cr.unalloc(uploadChunk)
	}
	return b, nil
}

// bodyError maps an error reading the body. Errors of the transport (a
// client gone, a read deadline) are told apart by the handler, which sees
// them on the raw body (see trackedBody).
func bodyError(err error) *apiError {
	if mb, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errorf(http.StatusRequestEntityTooLarge, CodeUploadTooLarge, fmt.Sprintf("the upload is larger than %d bytes", mb.Limit))
	}
	return errorf(http.StatusBadRequest, CodeBadRequest, "malformed multipart body")
}

// trackedBody remembers the first error of the request body other than
// io.EOF: the multipart reader reports it as a malformed body, while the
// cause is the connection.
type trackedBody struct {
	r   io.ReadCloser
	err error
}

func (t *trackedBody) Close() error { return t.r.Close() }

func (t *trackedBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
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

// decodeView decodes one view whose header has been read, in the format
// vision.Sniff recognised from its bytes whatever the file's name: PNG,
// JPEG or DICOM (a Part 10 file or a bare data set, decoded with its exact
// size).
func decodeView(b *blob, vh viewHeader, name string, i int, maxPixels int64) (*vision.Pixels, *apiError) {
	var px *vision.Pixels
	var err error
	if vh.format == "dicom" {
		px, err = vision.DecodeDICOM(b.reader(), b.len(), vision.WithMaxPixels(maxPixels))
	} else {
		px, err = vision.Decode(b.reader(), vision.WithMaxPixels(maxPixels))
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

// decode decodes the views one at a time, each once its decoding buffers
// are reserved (apart from res, in its turn), and keeps them at the model's size (size×size, the
// evaluation transform's resize, so the reports are those of the full
// views) and, when display is set, scaled to at most maxDisplaySide for
// the answer; a view's file and decoding buffers are given back before the
// next is decoded. Decoding runs apart from the request: at ctx's end the
// request answers at once, and a decoding under way finishes in the
// background holding its buffers' reservation.
func (u *upload) decode(ctx context.Context, size int, maxPixels int64, display bool, res *reservation, waitCtx context.Context) *apiError {
	for i, b := range u.files {
		vh := u.headers[i]
		if err := ctx.Err(); err != nil {
			return nil // the caller maps ctx's error
		}
		cost := vh.cost
		if res != nil && !res.takeApart(waitCtx, cost) {
			if cost > res.b.total {
				return errorf(http.StatusRequestEntityTooLarge, CodeTooManyPixels, fmt.Sprintf("view %d (%s) needs %d MiB to decode, more than the service's memory budget", i+1, u.names[i], cost>>20))
			}
			return errorf(http.StatusTooManyRequests, CodeOverloaded, "the service's memory is taken by other requests; retry later")
		}
		type decoded struct {
			px, disp *vision.Pixels
			e        *apiError
		}
		done := make(chan decoded, 1)
		go func() {
			defer func() {
				if res != nil {
					res.b.releaseCollected(cost)
				}
			}()
			px, e := decodeView(b, vh, u.names[i], i, maxPixels)
			if e != nil {
				done <- decoded{e: e}
				return
			}
			var d decoded
			if display {
				d.disp = px
				if s := max(px.W, px.H); s > maxDisplaySide {
					d.disp = vision.Resize(nil, px, max(1, px.W*maxDisplaySide/s), max(1, px.H*maxDisplaySide/s))
				}
			}
			switch {
			case size > 0 && (px.W != size || px.H != size):
				d.px = vision.Resize(nil, px, size, size)
			case cap(px.Pix) > len(px.Pix)+len(px.Pix)/4:
				px.Pix = slices.Clone(px.Pix) // keep 8 bits a sample, not the decoder's buffer
				d.px = px
			default:
				d.px = px
			}
			done <- d
		}()
		select {
		case d := <-done:
			if d.e != nil {
				return d.e
			}
			u.views = append(u.views, d.px)
			if d.disp != nil {
				u.display = append(u.display, d.disp)
			}
			u.sizes = append(u.sizes, [2]int{vh.w, vh.h})
			u.files[i] = nil
			if res != nil {
				res.give(b.size)
			}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// pngImage presents decoded pixels in a layout the PNG encoder writes
// without a call per pixel: gray ones shared, colour ones copied.
func pngImage(px *vision.Pixels) image.Image {
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
