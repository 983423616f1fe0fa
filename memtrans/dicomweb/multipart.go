package dicomweb

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strings"
)

// Part is one part of a multipart/related answer. Body reads at most the
// limit given to ReadMultipart; reading past it fails with ErrLimit.
type Part struct {
	ContentType string // the part's Content-Type (application/dicom for instances)
	Location    string // Content-Location, when the server names the part
	Body        io.Reader
}

// PartLimits bound a multipart body.
type PartLimits struct {
	Parts      int   // parts in all
	PartBytes  int64 // one part's body
	TotalBytes int64 // all parts' bodies
}

// maxBoundary bounds a multipart boundary's length. RFC 2046 allows 70
// characters, but Orthanc 1.10's STOW-RS client sends 73 (two UUIDs
// joined by a hyphen); the bound only keeps a hostile one short.
const maxBoundary = 256

// ReadMultipart reads a multipart/related body (RFC 2387) whose
// Content-Type is contentType and calls fn with each part in order; fn
// may read the part's body or not (the rest is skipped). It stops at the
// first error fn returns, and returns it. A body that is not multipart,
// has no boundary, or whose part headers do not read gets ErrMalformed;
// one that breaks off — body's reader fails, or it ends before its
// closing delimiter — gets ErrTruncated (so does reading a part's body
// then); one with more parts or bytes than lim allows gets ErrLimit,
// raised while reading, before the excess is kept anywhere.
func ReadMultipart(contentType string, body io.Reader, lim PartLimits, fn func(Part) error) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return fmt.Errorf("%w: Content-Type %q is not multipart", ErrMalformed, truncate(contentType, 128))
	}
	boundary := params["boundary"]
	if boundary == "" || len(boundary) > maxBoundary {
		return fmt.Errorf("%w: Content-Type %q has no valid boundary", ErrMalformed, truncate(contentType, 128))
	}
	total := &countingReader{r: body, left: lim.TotalBytes}
	mr := multipart.NewReader(total, boundary)
	for n := 0; ; n++ {
		p, err := mr.NextRawPart() // no decoding of Content-Transfer-Encoding: DICOM parts are binary
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return fmt.Errorf("%w: multipart body without parts", ErrMalformed)
			}
			return nil
		}
		if err != nil {
			switch {
			case total.over:
				return fmt.Errorf("%w: multipart body larger than %d bytes", ErrLimit, lim.TotalBytes)
			case total.err != nil:
				return fmt.Errorf("%w: before part %d: %w", ErrTruncated, n, total.err)
			case errors.Is(err, io.ErrUnexpectedEOF):
				return fmt.Errorf("%w: the body ends before its closing delimiter (part %d)", ErrTruncated, n)
			}
			return fmt.Errorf("%w: part %d: %v", ErrMalformed, n, err)
		}
		if n == lim.Parts {
			return fmt.Errorf("%w: more than %d parts", ErrLimit, lim.Parts)
		}
		pb := &limitedPart{r: p, left: lim.PartBytes, n: n}
		err = fn(Part{ContentType: p.Header.Get("Content-Type"), Location: p.Header.Get("Content-Location"), Body: pb})
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, pb); err != nil {
			if total.over {
				return fmt.Errorf("%w: multipart body larger than %d bytes", ErrLimit, lim.TotalBytes)
			}
			return err
		}
	}
}

// countingReader fails once more than left bytes have been read, and
// keeps the first error of its reader other than io.EOF.
type countingReader struct {
	r    io.Reader
	left int64
	over bool
	err  error
}

func (c *countingReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells an exact fit from an excess.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.over = true
			return 0, fmt.Errorf("%w: body over the limit", ErrLimit)
		}
		return 0, c.keep(err)
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, c.keep(err)
}

func (c *countingReader) keep(err error) error {
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return err
}

// limitedPart is a part's body that fails past its limit.
type limitedPart struct {
	r    io.Reader
	left int64
	n    int
}

func (l *limitedPart) Read(b []byte) (int, error) {
	if l.left < 0 {
		return 0, fmt.Errorf("%w: part %d larger than its limit", ErrLimit, l.n)
	}
	if int64(len(b)) > l.left+1 {
		b = b[:l.left+1]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, fmt.Errorf("%w: part %d larger than its limit", ErrLimit, l.n)
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrLimit) {
		err = fmt.Errorf("%w: part %d: %w", ErrTruncated, l.n, err) // only the body's end or its reader fails inside a part
	}
	return n, err
}

// NewBoundary returns a random multipart boundary.
func NewBoundary() string {
	var b [16]byte
	rand.Read(b[:])
	return "radgen-" + hex.EncodeToString(b[:])
}

// WriteMultipart writes parts as a multipart/related body with the given
// boundary, each part of type partType, and returns the body's
// Content-Type: multipart/related; type="partType"; boundary=boundary.
// A part holding the boundary's delimiter is refused (draw another
// boundary).
func WriteMultipart(w io.Writer, boundary, partType string, parts ...[]byte) (string, error) {
	delim := "\r\n--" + boundary
	for i, p := range parts {
		if strings.Contains(string(p), delim) || strings.HasPrefix(string(p), delim[2:]) {
			return "", fmt.Errorf("%w: part %d holds the boundary", ErrInput, i)
		}
	}
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return "", fmt.Errorf("%w: boundary %q: %v", ErrInput, boundary, err)
	}
	for _, p := range parts {
		pw, err := mw.CreatePart(map[string][]string{"Content-Type": {partType}})
		if err != nil {
			return "", err
		}
		if _, err := pw.Write(p); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	return mime.FormatMediaType("multipart/related", map[string]string{"type": partType, "boundary": boundary}), nil
}
