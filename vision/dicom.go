package vision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// Errors returned by [DecodeDICOM] besides [ErrTooLarge] and [ErrInvalid].
var (
	// ErrDICOM is returned for bytes that are not a well-formed DICOM file
	// or lack what an image needs (Rows, Columns, Bits Allocated, pixel
	// data of the declared size).
	ErrDICOM = errors.New("vision: malformed DICOM")
	// ErrDICOMUnsupported is returned for well-formed files this package
	// cannot render: compressed transfer syntaxes other than baseline JPEG
	// (JPEG-LS, JPEG 2000, lossless JPEG, RLE), deflated data sets, colour
	// or multi-sample native data, 1-bit data.
	ErrDICOMUnsupported = errors.New("vision: unsupported DICOM")
)

// dicomMagic is what a DICOM Part 10 file holds after its 128-byte
// preamble.
const dicomMagic = "DICM"

// IsDICOM reports whether head, the first bytes of a file (at least 132),
// is the start of a DICOM Part 10 file: "DICM" after the 128-byte preamble.
func IsDICOM(head []byte) bool {
	return len(head) >= 132 && string(head[128:132]) == dicomMagic
}

// DecodeDICOM reads a DICOM Part 10 file of size bytes (a chest radiograph:
// CR, DX) and renders its first frame as the 8-bit gray [Pixels] the
// pipeline takes, as a radiologist's viewer shows it by default:
//
//  1. Stored values: Bits Allocated 8, 16 or 32, masked to Bits Stored
//     below High Bit; Pixel Representation 1 reinterprets them as two's
//     complement (the DICOM reader returns them unsigned).
//  2. Modality LUT: x = stored·Rescale Slope + Rescale Intercept (slope 1,
//     intercept 0 when absent).
//  3. VOI LUT, output range [0, 255] (PS3.3 C.11.2.1.2), from the first
//     Window Center / Window Width when present (a multi-valued "a\b" takes
//     its first value), by VOI LUT Function:
//     LINEAR (default): y = ((x − (c − 0.5)) / (w − 1) + 0.5)·255, 0 when
//     x ≤ c − 0.5 − (w − 1)/2, 255 when x > c − 0.5 + (w − 1)/2;
//     LINEAR_EXACT: y = ((x − c)/w + 0.5)·255 clamped at c ∓ w/2;
//     SIGMOID: y = 255 / (1 + exp(−4(x − c)/w)).
//     Otherwise from the first item of the VOI LUT Sequence (the table
//     indexed by x − first mapped value, clamped at both ends, scaled from
//     its entry bits to 8); otherwise the window spanning the image's own
//     minimum and maximum: y = (x − min)/(max − min)·255.
//  4. y is rounded to the nearest integer; MONOCHROME1 (white is low) is
//     inverted to 255 − y so that bone is white as in MONOCHROME2.
//
// Baseline JPEG (transfer syntax 1.2.840.10008.1.2.4.50) is decoded with
// image/jpeg, and its 8-bit samples go through the same steps; a colour
// JPEG is converted as [FromImage] does. Other compressed syntaxes are
// refused with [ErrDICOMUnsupported].
//
// The header is parsed with github.com/suyashkumar/dicom after every value
// length in it has been checked against size, so hostile lengths cannot make
// it allocate. The image size (Rows×Columns) is checked against the pixel
// limit ([WithMaxPixels], default [DefaultMaxPixels]) before any pixel byte is
// read; a larger image is refused with [ErrTooLarge]. Only the first frame is
// read. Other malformed input yields [ErrDICOM], never a panic.
func DecodeDICOM(r io.Reader, size int64, opts ...Option) (*Pixels, error) {
	return decodeDICOM(r, size, nil, opts)
}

// decodeDICOM is DecodeDICOM with a hook on the attributes read (for tests).
func decodeDICOM(r io.Reader, size int64, adjust func(*dicomImage), opts []Option) (*Pixels, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if size < 132 {
		return nil, fmt.Errorf("%w: %d bytes", ErrDICOM, size)
	}
	w := &dicomWalker{r: bufio.NewReaderSize(r, 64<<10), size: size}
	if err := w.start(); err != nil {
		return nil, err
	}
	hasPixels, err := w.dataset(-1, 0)
	if err != nil {
		return nil, err
	}
	if !hasPixels {
		return nil, fmt.Errorf("%w: no pixel data", ErrDICOM)
	}
	ds, err := parseDICOMHeader(w.head.Bytes())
	if err != nil {
		return nil, err
	}
	im, err := readDICOMAttrs(&ds)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(im)
	}
	if n := int64(im.rows) * int64(im.cols); n > o.maxPixels {
		return nil, fmt.Errorf("%w: DICOM of %d×%d = %d pixels, limit %d", ErrTooLarge, im.cols, im.rows, n, o.maxPixels)
	}
	_, _, vl, err := w.elemHeader(w.bo, w.implicit, false)
	if err != nil {
		return nil, err
	}
	if vl == undefinedLength {
		return decodeEncapsulated(w, im, o)
	}
	return decodeNative(w, im, int64(vl))
}

// DecodeDICOMFile is [DecodeDICOM] on the named file.
func DecodeDICOMFile(name string, opts ...Option) (*Pixels, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	p, err := DecodeDICOM(f, st.Size(), opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// parseDICOMHeader parses the checked header bytes. A panic inside the
// DICOM reader (it indexes values it has not checked) becomes an error.
func parseDICOMHeader(head []byte) (ds dicom.Dataset, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrDICOM, r)
		}
	}()
	ds, err = dicom.Parse(bytes.NewReader(head), int64(len(head)), nil,
		dicom.AllowMissingMetaElementGroupLength(), dicom.AllowUnknownSpecificCharacterSet())
	if err != nil {
		return ds, fmt.Errorf("%w: %v", ErrDICOM, err)
	}
	return ds, nil
}

// dicomImage holds the attributes of the Image Pixel and VOI LUT modules
// that the rendering needs.
type dicomImage struct {
	rows, cols       int
	samples          int
	bitsAllocated    int
	bitsStored       int
	highBit          int
	signed           bool
	monochrome1      bool
	photometric      string
	slope, intercept float64
	window           *voiWindow
	lut              *voiLUT
	syntax           string
	frames           int
}

type voiWindow struct {
	center, width float64
	function      string
}

type voiLUT struct {
	first int     // first stored value mapped
	bits  int     // bits per entry
	data  []int   // entries
	scale float64 // 255 / (2^bits − 1)
}

func readDICOMAttrs(ds *dicom.Dataset) (*dicomImage, error) {
	im := &dicomImage{samples: 1, slope: 1}
	need := func(t tag.Tag, name string, dst *int) error {
		v, ok := dicomInt(ds, t)
		if !ok {
			return fmt.Errorf("%w: no %s", ErrDICOM, name)
		}
		*dst = v
		return nil
	}
	if err := need(tag.Rows, "Rows", &im.rows); err != nil {
		return nil, err
	}
	if err := need(tag.Columns, "Columns", &im.cols); err != nil {
		return nil, err
	}
	if err := need(tag.BitsAllocated, "Bits Allocated", &im.bitsAllocated); err != nil {
		return nil, err
	}
	if im.rows <= 0 || im.cols <= 0 {
		return nil, fmt.Errorf("%w: DICOM of %d×%d pixels", ErrInvalid, im.cols, im.rows)
	}
	if v, ok := dicomInt(ds, tag.SamplesPerPixel); ok {
		im.samples = v
	}
	im.bitsStored, im.highBit = im.bitsAllocated, im.bitsAllocated-1
	if v, ok := dicomInt(ds, tag.BitsStored); ok {
		im.bitsStored = v
	}
	if v, ok := dicomInt(ds, tag.HighBit); ok {
		im.highBit = v
	}
	if v, ok := dicomInt(ds, tag.PixelRepresentation); ok {
		im.signed = v == 1
	}
	if v, ok := dicomInt(ds, tag.NumberOfFrames); ok {
		im.frames = v
	}
	im.photometric = dicomString(ds, tag.PhotometricInterpretation)
	im.monochrome1 = im.photometric == "MONOCHROME1"
	if v, ok := dicomFloat(ds, tag.RescaleSlope); ok && v != 0 {
		im.slope = v
	}
	if v, ok := dicomFloat(ds, tag.RescaleIntercept); ok {
		im.intercept = v
	}
	c, okC := dicomFloat(ds, tag.WindowCenter)
	wd, okW := dicomFloat(ds, tag.WindowWidth)
	fn := strings.ToUpper(dicomString(ds, tag.VOILUTFunction))
	if fn == "" {
		fn = "LINEAR"
	}
	switch {
	case okC && okW && (fn == "LINEAR" && wd >= 1 || fn != "LINEAR" && wd > 0):
		if fn != "LINEAR" && fn != "LINEAR_EXACT" && fn != "SIGMOID" {
			fn = "LINEAR" // PS3.3: an unknown function is treated as LINEAR
		}
		im.window = &voiWindow{center: c, width: wd, function: fn}
	default:
		im.lut = readVOILUT(ds, im.signed)
	}
	if ts, err := ds.FindElementByTag(tag.TransferSyntaxUID); err == nil {
		if s, ok := ts.Value.GetValue().([]string); ok && len(s) > 0 {
			im.syntax = strings.TrimRight(s[0], " \x00")
		}
	}
	if im.bitsAllocated != 8 && im.bitsAllocated != 16 && im.bitsAllocated != 32 {
		return nil, fmt.Errorf("%w: %d bits allocated", ErrDICOMUnsupported, im.bitsAllocated)
	}
	if im.bitsStored < 1 || im.bitsStored > im.bitsAllocated || im.highBit < im.bitsStored-1 || im.highBit >= im.bitsAllocated {
		return nil, fmt.Errorf("%w: %d bits stored, high bit %d in %d allocated", ErrDICOM, im.bitsStored, im.highBit, im.bitsAllocated)
	}
	return im, nil
}

// readVOILUT reads the first item of the VOI LUT Sequence, or nil.
func readVOILUT(ds *dicom.Dataset, signed bool) *voiLUT {
	e, err := ds.FindElementByTag(tag.VOILUTSequence)
	if err != nil {
		return nil
	}
	items, ok := e.Value.GetValue().([]*dicom.SequenceItemValue)
	if !ok || len(items) == 0 {
		return nil
	}
	elems, ok := items[0].GetValue().([]*dicom.Element)
	if !ok {
		return nil
	}
	item := dicom.Dataset{Elements: elems}
	de, err := item.FindElementByTag(tag.LUTDescriptor)
	if err != nil {
		return nil
	}
	desc, ok := de.Value.GetValue().([]int)
	if !ok || len(desc) != 3 {
		return nil
	}
	n, first, bits := desc[0]&0xffff, desc[1], desc[2]
	if n == 0 {
		n = 1 << 16 // PS3.3 C.11.2.1.1: 0 means 65536 entries
	}
	if bits < 8 || bits > 16 {
		return nil
	}
	if signed && first >= 1<<15 {
		// The first mapped value is SS for signed pixels; the reader
		// returns it unsigned.
		first -= 1 << 16
	}
	le, err := item.FindElementByTag(tag.LUTData)
	if err != nil {
		return nil
	}
	var data []int
	switch v := le.Value.GetValue().(type) {
	case []int:
		data = v
	case []byte: // OW: 16-bit little-endian words
		for i := 0; i+1 < len(v); i += 2 {
			data = append(data, int(v[i])|int(v[i+1])<<8)
		}
	}
	if len(data) < n {
		return nil
	}
	return &voiLUT{first: first, bits: bits, data: data[:n], scale: 255 / float64(int(1)<<bits-1)}
}

func dicomInt(ds *dicom.Dataset, t tag.Tag) (int, bool) {
	e, err := ds.FindElementByTag(t)
	if err != nil {
		return 0, false
	}
	switch v := e.Value.GetValue().(type) {
	case []int:
		if len(v) > 0 {
			return v[0], true
		}
	case []string:
		if len(v) > 0 {
			n, err := strconv.Atoi(strings.TrimSpace(v[0]))
			return n, err == nil
		}
	}
	return 0, false
}

// dicomFloat reads a DS value; a multi-valued one ("a\b") gives its first.
func dicomFloat(ds *dicom.Dataset, t tag.Tag) (float64, bool) {
	e, err := ds.FindElementByTag(t)
	if err != nil {
		return 0, false
	}
	switch v := e.Value.GetValue().(type) {
	case []string:
		if len(v) > 0 {
			s := strings.TrimSpace(strings.SplitN(v[0], `\`, 2)[0])
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
		}
	case []int:
		if len(v) > 0 {
			return float64(v[0]), true
		}
	case []float64:
		if len(v) > 0 && !math.IsNaN(v[0]) && !math.IsInf(v[0], 0) {
			return v[0], true
		}
	}
	return 0, false
}

func dicomString(ds *dicom.Dataset, t tag.Tag) string {
	e, err := ds.FindElementByTag(t)
	if err != nil {
		return ""
	}
	if v, ok := e.Value.GetValue().([]string); ok && len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// decodeNative reads the first frame of native pixel data of vl bytes.
func decodeNative(w *dicomWalker, im *dicomImage, vl int64) (*Pixels, error) {
	if im.samples != 1 {
		return nil, fmt.Errorf("%w: %d samples per pixel (%s)", ErrDICOMUnsupported, im.samples, im.photometric)
	}
	bpp := int64(im.bitsAllocated / 8)
	n := int64(im.rows) * int64(im.cols)
	if vl < n*bpp {
		return nil, fmt.Errorf("%w: %d bytes of pixel data for %d×%d×%d bits", ErrDICOM, vl, im.cols, im.rows, im.bitsAllocated)
	}
	raw, err := w.take(n*bpp, false)
	if err != nil {
		return nil, err
	}
	vals := make([]int64, n)
	shift := uint(im.highBit + 1 - im.bitsStored)
	mask := uint64(1)<<uint(im.bitsStored) - 1
	for i := range vals {
		var u uint64
		switch bpp {
		case 1:
			u = uint64(raw[i])
		case 2:
			u = uint64(w.bo.Uint16(raw[2*i:]))
		default:
			u = uint64(w.bo.Uint32(raw[4*i:]))
		}
		vals[i] = im.stored(u, shift, mask)
	}
	return im.render(vals), nil
}

// stored extracts one stored value: the Bits Stored bits below High Bit,
// sign-extended for Pixel Representation 1.
func (im *dicomImage) stored(u uint64, shift uint, mask uint64) int64 {
	u = (u >> shift) & mask
	if im.signed && u&(1<<uint(im.bitsStored-1)) != 0 {
		return int64(u) - int64(1)<<uint(im.bitsStored)
	}
	return int64(u)
}

// decodeEncapsulated reads the first frame of encapsulated pixel data.
func decodeEncapsulated(w *dicomWalker, im *dicomImage, o options) (*Pixels, error) {
	if im.syntax != "1.2.840.10008.1.2.4.50" {
		return nil, fmt.Errorf("%w: transfer syntax %s", ErrDICOMUnsupported, im.syntax)
	}
	// A JPEG of n pixels is rarely over n bytes; 4n+1 MiB is a loose bound.
	frags, err := w.fragments(4*int64(im.rows)*int64(im.cols) + 1<<20)
	if err != nil {
		return nil, err
	}
	if len(frags) == 0 {
		return nil, fmt.Errorf("%w: no pixel data fragments", ErrDICOM)
	}
	// One frame: all fragments in order; several: the first fragment.
	var frame []byte
	if im.frames > 1 {
		frame = frags[0]
	} else {
		frame = bytes.Join(frags, nil)
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("%w: JPEG frame: %v", ErrDICOM, err)
	}
	if int64(cfg.Width)*int64(cfg.Height) > o.maxPixels || cfg.Width != im.cols || cfg.Height != im.rows {
		return nil, fmt.Errorf("%w: JPEG frame of %d×%d in a %d×%d image", ErrDICOM, cfg.Width, cfg.Height, im.cols, im.rows)
	}
	img, err := jpeg.Decode(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("%w: JPEG frame: %v", ErrDICOM, err)
	}
	g, ok := img.(*image.Gray)
	if !ok {
		return FromImage(nil, img), nil
	}
	vals := make([]int64, im.rows*im.cols)
	for y := range im.rows {
		for x := range im.cols {
			vals[y*im.cols+x] = int64(g.Pix[g.PixOffset(g.Rect.Min.X+x, g.Rect.Min.Y+y)])
		}
	}
	return im.render(vals), nil
}

// render applies the modality LUT, the VOI LUT and the MONOCHROME1
// inversion to stored values (row-major), giving 8-bit gray. The mapping is
// tabulated over the stored values present when they span at most 2^20
// (every image of 20 bits stored or fewer), and computed per pixel
// otherwise; both give the same bytes.
func (im *dicomImage) render(vals []int64) *Pixels {
	p := &Pixels{W: im.cols, H: im.rows, C: 1, Pix: make([]uint8, len(vals))}
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	var voi func(x float64) float64
	switch {
	case im.window != nil:
		voi = im.window.apply
	case im.lut != nil:
		lut := im.lut
		voi = func(x float64) float64 {
			// The table is indexed by the value after the modality LUT
			// (PS3.3 C.11.2.1.1).
			i := int(max(-1<<31, min(1<<31, math.Floor(x)))) - lut.first
			i = max(0, min(i, len(lut.data)-1))
			return float64(lut.data[i]) * lut.scale
		}
	default:
		// The image's own range, after the modality LUT (whose slope may
		// be negative).
		a, b := float64(lo)*im.slope+im.intercept, float64(hi)*im.slope+im.intercept
		xlo, xhi := min(a, b), max(a, b)
		voi = func(x float64) float64 {
			if xhi <= xlo {
				return 0
			}
			return (x - xlo) / (xhi - xlo) * 255
		}
	}
	gray := func(v int64) uint8 {
		y := voi(float64(v)*im.slope + im.intercept)
		q := uint8(math.Round(max(0, min(255, y))))
		if im.monochrome1 {
			q = 255 - q
		}
		return q
	}
	if hi-lo < 1<<20 {
		table := make([]uint8, hi-lo+1)
		for i := range table {
			table[i] = gray(lo + int64(i))
		}
		for i, v := range vals {
			p.Pix[i] = table[v-lo]
		}
		return p
	}
	for i, v := range vals {
		p.Pix[i] = gray(v)
	}
	return p
}

// apply is the VOI LUT function of PS3.3 C.11.2.1.2 onto [0, 255].
func (w *voiWindow) apply(x float64) float64 {
	const ymin, ymax = 0, 255
	c, wd := w.center, w.width
	switch w.function {
	case "LINEAR_EXACT":
		switch {
		case x <= c-wd/2:
			return ymin
		case x > c+wd/2:
			return ymax
		}
		return ((x-c)/wd+0.5)*(ymax-ymin) + ymin
	case "SIGMOID":
		return (ymax-ymin)/(1+math.Exp(-4*(x-c)/wd)) + ymin
	}
	switch {
	case x <= c-0.5-(wd-1)/2:
		return ymin
	case x > c-0.5+(wd-1)/2:
		return ymax
	}
	return ((x-(c-0.5))/(wd-1)+0.5)*(ymax-ymin) + ymin
}
