package vision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
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
	// cannot decode: transfer syntaxes without a codec here (MPEG, HEVC,
	// high-throughput JPEG 2000 and others), code-stream features a codec
	// does not implement, palette colour, samples per pixel other than 1
	// and 3, 1-bit data, and stored values of float pixel data.
	ErrDICOMUnsupported = errors.New("vision: unsupported DICOM")
)

// dicomMagic is what a DICOM Part 10 file holds after its 128-byte
// preamble.
const dicomMagic = "DICM"

// DecodeDICOM reads a DICOM file of size bytes (a chest radiograph: CR, DX)
// and renders its first frame as the 8-bit [Pixels] the pipeline takes, as
// a radiologist's viewer shows it by default:
//
//  1. Stored values, as [DecodeDICOMFrame] returns them (decompressed,
//     masked to Bits Stored below High Bit, signed for Pixel
//     Representation 1).
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
// A colour frame (RGB, or YBR_FULL / YBR_FULL_422 converted to RGB by PS3.3
// C.7.6.3.1.2) becomes 3-channel Pixels, its samples scaled from Bits Stored
// to 8 bits. Float and Double Float Pixel Data are rendered through steps 3
// and 4 (they have no modality LUT) after every value has been checked to
// be finite.
//
// Values that would render garbage are errors wrapping [ErrDICOM]: a
// Rescale Slope or Intercept or Window Center or Width that is not a finite
// number, a zero slope, a window width below 1 (LINEAR) or not positive,
// a rescale that maps the image's values outside the finite range, and
// non-finite float pixels.
//
// The transfer syntaxes and the limits are those of [DecodeDICOMFrame];
// malformed input yields [ErrDICOM], never a panic.
func DecodeDICOM(r io.Reader, size int64, opts ...Option) (*Pixels, error) {
	return decodeDICOM(r, size, nil, opts)
}

// decodeDICOM is DecodeDICOM with a hook on the attributes read (for tests).
func decodeDICOM(r io.Reader, size int64, adjust func(*dicomImage), opts []Option) (*Pixels, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	im, w, err := readDICOMHeader(r, size, o)
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(im)
	}
	if w.pixelTag != tag.PixelData {
		floats, err := readFloatPixels(w, im)
		if err != nil {
			return nil, err
		}
		return im.renderFloat(floats)
	}
	fr, err := readDICOMFrame(w, im, o)
	if err != nil {
		return nil, err
	}
	return im.render(fr)
}

// readDICOMHeader walks the header up to the pixel data element, reads the
// attributes and checks the image size against the pixel limit.
func readDICOMHeader(r io.Reader, size int64, o options) (*dicomImage, *dicomWalker, error) {
	if size < 8 {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrDICOM, size)
	}
	w := &dicomWalker{r: bufio.NewReaderSize(r, 64<<10), size: size}
	if err := w.start(); err != nil {
		return nil, nil, err
	}
	hasPixels, err := w.dataset(-1, 0)
	if err != nil {
		return nil, nil, err
	}
	if !hasPixels {
		return nil, nil, fmt.Errorf("%w: no pixel data", ErrDICOM)
	}
	ds, err := parseDICOMHeader(w.head.Bytes())
	if err != nil {
		return nil, nil, err
	}
	im, err := readDICOMAttrs(&ds, w.pixelTag != tag.PixelData)
	if err != nil {
		return nil, nil, err
	}
	im.syntax = w.syntax
	if n := int64(im.rows) * int64(im.cols); n > o.maxPixels {
		return nil, nil, fmt.Errorf("%w: DICOM of %d×%d = %d pixels, limit %d", ErrTooLarge, im.cols, im.rows, n, o.maxPixels)
	}
	return im, w, nil
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
// that the decoding and rendering need.
type dicomImage struct {
	rows, cols       int
	samples          int
	bitsAllocated    int
	bitsStored       int
	highBit          int
	signed           bool
	planar           bool // Planar Configuration 1: colour by plane
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

// readDICOMAttrs reads the attributes; float is set for Float or Double
// Float Pixel Data, which have no Bits Stored, High Bit or Pixel
// Representation.
func readDICOMAttrs(ds *dicom.Dataset, float bool) (*dicomImage, error) {
	im := &dicomImage{samples: 1, slope: 1, frames: 1}
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
	if im.samples != 1 && im.samples != 3 {
		return nil, fmt.Errorf("%w: %d samples per pixel", ErrDICOMUnsupported, im.samples)
	}
	im.bitsStored, im.highBit = im.bitsAllocated, im.bitsAllocated-1
	if v, ok := dicomInt(ds, tag.BitsStored); ok && !float {
		im.bitsStored = v
	}
	if v, ok := dicomInt(ds, tag.HighBit); ok && !float {
		im.highBit = v
	}
	if v, ok := dicomInt(ds, tag.PixelRepresentation); ok && !float {
		im.signed = v == 1
	}
	if v, ok := dicomInt(ds, tag.PlanarConfiguration); ok {
		im.planar = v == 1
	}
	if v, ok := dicomInt(ds, tag.NumberOfFrames); ok {
		if v < 1 {
			return nil, fmt.Errorf("%w: Number of Frames %d", ErrDICOM, v)
		}
		im.frames = v
	}
	im.photometric = strings.ToUpper(dicomString(ds, tag.PhotometricInterpretation))
	if im.photometric == "" {
		im.photometric = "MONOCHROME2"
		if im.samples == 3 {
			im.photometric = "RGB"
		}
	}
	im.monochrome1 = im.photometric == "MONOCHROME1"
	switch {
	case im.samples == 1 && (im.photometric == "MONOCHROME1" || im.photometric == "MONOCHROME2"):
	case im.samples == 3 && (im.photometric == "RGB" || strings.HasPrefix(im.photometric, "YBR_")):
	default:
		return nil, fmt.Errorf("%w: photometric interpretation %s with %d samples per pixel", ErrDICOMUnsupported, im.photometric, im.samples)
	}
	if v, ok, err := dicomFloat(ds, tag.RescaleSlope, "Rescale Slope"); err != nil {
		return nil, err
	} else if ok {
		if v == 0 {
			return nil, fmt.Errorf("%w: Rescale Slope 0 maps every pixel to one value", ErrDICOM)
		}
		im.slope = v
	}
	if v, ok, err := dicomFloat(ds, tag.RescaleIntercept, "Rescale Intercept"); err != nil {
		return nil, err
	} else if ok {
		im.intercept = v
	}
	c, okC, err := dicomFloat(ds, tag.WindowCenter, "Window Center")
	if err != nil {
		return nil, err
	}
	wd, okW, err := dicomFloat(ds, tag.WindowWidth, "Window Width")
	if err != nil {
		return nil, err
	}
	fn := strings.ToUpper(dicomString(ds, tag.VOILUTFunction))
	if fn != "LINEAR_EXACT" && fn != "SIGMOID" {
		fn = "LINEAR" // PS3.3: absent or unknown is LINEAR
	}
	switch {
	case okC && okW && fn == "LINEAR" && !(wd >= 1):
		return nil, fmt.Errorf("%w: Window Width %g below 1 (LINEAR VOI function)", ErrDICOM, wd)
	case okC && okW && !(wd > 0):
		return nil, fmt.Errorf("%w: Window Width %g not positive (%s VOI function)", ErrDICOM, wd, fn)
	case okC && okW:
		im.window = &voiWindow{center: c, width: wd, function: fn}
	default:
		im.lut = readVOILUT(ds, im.signed)
	}
	if float {
		if im.bitsAllocated != 32 && im.bitsAllocated != 64 || im.samples != 1 {
			return nil, fmt.Errorf("%w: float pixel data of %d bits allocated, %d samples", ErrDICOM, im.bitsAllocated, im.samples)
		}
		return im, nil
	}
	if im.bitsAllocated != 8 && im.bitsAllocated != 16 && im.bitsAllocated != 32 {
		return nil, fmt.Errorf("%w: %d bits allocated", ErrDICOMUnsupported, im.bitsAllocated)
	}
	if im.bitsStored < 1 || im.bitsStored > im.bitsAllocated || im.highBit < im.bitsStored-1 || im.highBit >= im.bitsAllocated {
		return nil, fmt.Errorf("%w: %d bits stored, high bit %d in %d allocated", ErrDICOM, im.bitsStored, im.highBit, im.bitsAllocated)
	}
	if im.samples == 3 && im.bitsStored > 16 {
		return nil, fmt.Errorf("%w: colour of %d bits stored", ErrDICOMUnsupported, im.bitsStored)
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
// It reports whether the element is present, and an error naming it when
// its value is not a finite number.
func dicomFloat(ds *dicom.Dataset, t tag.Tag, name string) (float64, bool, error) {
	e, err := ds.FindElementByTag(t)
	if err != nil {
		return 0, false, nil
	}
	f, ok := 0.0, false
	switch v := e.Value.GetValue().(type) {
	case []string:
		if len(v) == 0 {
			return 0, false, nil
		}
		s := strings.TrimSpace(strings.SplitN(v[0], `\`, 2)[0])
		if s == "" {
			return 0, false, nil
		}
		var err error
		f, err = strconv.ParseFloat(s, 64)
		ok = err == nil
		if !ok && errors.Is(err, strconv.ErrRange) {
			return 0, false, fmt.Errorf("%w: %s %q is out of range", ErrDICOM, name, s)
		}
		if !ok {
			return 0, false, fmt.Errorf("%w: %s %q is not a number", ErrDICOM, name, s)
		}
	case []int:
		if len(v) == 0 {
			return 0, false, nil
		}
		f, ok = float64(v[0]), true
	case []float64:
		if len(v) == 0 {
			return 0, false, nil
		}
		f, ok = v[0], true
	default:
		return 0, false, nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("%w: %s %g is not finite", ErrDICOM, name, f)
	}
	return f, ok, nil
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
