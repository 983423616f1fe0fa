package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/radgen/radgen/internal/codec"
	"github.com/radgen/radgen/internal/codec/jpeg"
	"github.com/radgen/radgen/internal/codec/jpeg2000"
	"github.com/radgen/radgen/internal/codec/jpegls"
	"github.com/radgen/radgen/internal/codec/rle"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// DICOMFrame is one frame of DICOM pixel data as stored: decompressed, but
// before the modality LUT (rescale), the VOI window and any inversion, the
// values a DICOM toolkit compares when it checks a codec.
//
// Samples are interleaved (a planar colour frame is interleaved on reading)
// and rows run top to bottom: sample s of pixel (x, y) is at index
// (y·Columns+x)·SamplesPerPixel+s. Read values with [DICOMFrame.Value]; the
// slices hold them in the frame's own bit depth: Pix when BitsStored is at
// most 16, Pix32 otherwise (the other is nil).
type DICOMFrame struct {
	Rows, Columns   int
	SamplesPerPixel int // 1 (monochrome) or 3 (colour)
	BitsAllocated   int // 8, 16 or 32
	BitsStored      int
	Signed          bool // Pixel Representation 1: two's complement values
	// Photometric is the Photometric Interpretation of the values returned:
	// the file's, except that codecs which undo a colour transform as part
	// of decompression (baseline JPEG's YCbCr, JPEG 2000's RCT and ICT)
	// return RGB, and YBR_FULL_422 native data is returned upsampled as
	// YBR_FULL.
	Photometric    string
	TransferSyntax string // UID of the file's transfer syntax
	NumberOfFrames int    // frames in the file; the first is returned
	// Pix holds each value in 16 bits: unsigned as is, signed as the bit
	// pattern of the int16 (sign-extended from BitsStored).
	Pix []uint16
	// Pix32 holds the values of frames of more than 16 bits stored, signed
	// ones as the bit pattern of the int32.
	Pix32 []uint32
}

// Value returns the stored value of sample i (see [DICOMFrame] for the
// order), sign-extended when the frame is signed.
func (f *DICOMFrame) Value(i int) int64 {
	switch {
	case f.Pix32 != nil && f.Signed:
		return int64(int32(f.Pix32[i]))
	case f.Pix32 != nil:
		return int64(f.Pix32[i])
	case f.Signed:
		return int64(int16(f.Pix[i]))
	}
	return int64(f.Pix[i])
}

// Len returns the number of samples: Rows·Columns·SamplesPerPixel.
func (f *DICOMFrame) Len() int { return f.Rows * f.Columns * f.SamplesPerPixel }

// DecodeDICOMFrame reads a DICOM file of size bytes and returns the stored
// values of its first frame (see [DICOMFrame]); [DecodeDICOM] renders the
// same values for viewing.
//
// Files: DICOM Part 10 files, and bare data sets without the preamble or
// file meta group (implicit VR little endian implied, as PS3.5 10.1 says,
// unless the first element shows an explicit VR). Multi-frame files give
// their first frame (the choice this package makes; NumberOfFrames says how
// many there are), located through the Extended Offset Table or the Basic
// Offset Table when present, otherwise as RLE's first fragment or the
// fragments up to the first end-of-image marker; the frames after it are
// not read.
//
// Transfer syntaxes: implicit and explicit VR little endian, explicit VR big
// endian, deflated explicit VR little endian; RLE Lossless (1.2.840.10008.1.2.5); JPEG baseline and extended
// 12-bit (…4.50, …4.51; libjpeg's accurate integer IDCT, YCbCr converted to
// RGB as libjpeg does, so the values are those dcmtk gives); JPEG Lossless
// process 14 (…4.57, …4.70); JPEG-LS lossless and near-lossless (…4.80,
// …4.81); JPEG 2000 (…4.90, …4.91; YBR_RCT and YBR_ICT come back as RGB,
// the code stream's component transform undone).
// Other encapsulated syntaxes are refused with
// [ErrDICOMUnsupported]. Native data: 8, 16 or 32 bits allocated, any bits
// stored below the high bit, signed or unsigned, MONOCHROME1/2, RGB,
// YBR_FULL and YBR_FULL_422 with either planar configuration. Float Pixel
// Data has no stored integer values and is refused here (DecodeDICOM
// renders it).
//
// Limits: the header is walked with every value length checked against
// size (at most 64 MiB of it is kept), Rows×Columns is checked against the
// pixel limit ([WithMaxPixels], default [DefaultMaxPixels]) before any pixel
// byte is read, a codec checks its own header against the limit before it
// decompresses, and compressed data may not exceed 4 bytes per sample plus
// 1 MiB. Beyond the compressed bytes, decoding allocates the frame (2 bytes
// per sample up to 16 bits stored) and, for native data, the frame's raw
// bytes. A pixel data element whose length overruns the file or falls short
// of the frames it declares is an error wrapping [ErrDICOM].
func DecodeDICOMFrame(r io.Reader, size int64, opts ...Option) (*DICOMFrame, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	im, w, err := readDICOMHeader(r, size, o)
	if err != nil {
		return nil, err
	}
	if w.pixelTag != tag.PixelData {
		return nil, fmt.Errorf("%w: %v holds floating-point values, not stored integers", ErrDICOMUnsupported, w.pixelTag)
	}
	return readDICOMFrame(w, im, o)
}

// DecodeDICOMFrameFile is [DecodeDICOMFrame] on the named file, opened as
// [DecodeFile] opens it (a regular file within the file size limit unless
// the options say otherwise).
func DecodeDICOMFrameFile(name string, opts ...Option) (*DICOMFrame, error) {
	return onFile(name, opts, func(r io.Reader, size int64) (*DICOMFrame, error) { return DecodeDICOMFrame(r, size, opts...) })
}

// DecodeDICOMFile is [DecodeDICOM] on the named file, opened as
// [DecodeFile] opens it (a regular file within the file size limit unless
// the options say otherwise).
func DecodeDICOMFile(name string, opts ...Option) (*Pixels, error) {
	return onFile(name, opts, func(r io.Reader, size int64) (*Pixels, error) { return DecodeDICOM(r, size, opts...) })
}

func onFile[T any](name string, opts []Option, dec func(io.Reader, int64) (*T, error)) (*T, error) {
	f, size, r, err := openFile(name, opts...)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size < 0 {
		// A FIFO or device allowed by the options: read up to the file
		// size limit, past which r fails.
		o, err := newOptions(opts)
		if err != nil {
			return nil, err
		}
		size = o.maxFileBytes
	}
	p, err := dec(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// newFrame returns the frame for im's first frame, without its values.
func (im *dicomImage) newFrame() *DICOMFrame {
	return &DICOMFrame{Rows: im.rows, Columns: im.cols, SamplesPerPixel: im.samples,
		BitsAllocated: im.bitsAllocated, BitsStored: im.bitsStored, Signed: im.signed,
		Photometric: im.photometric, TransferSyntax: im.syntax, NumberOfFrames: im.frames}
}

// readDICOMFrame reads the first frame of the Pixel Data element the walker
// stopped at.
func readDICOMFrame(w *dicomWalker, im *dicomImage, o options) (*DICOMFrame, error) {
	_, _, vl, err := w.elemHeader(w.bo, w.implicit, false)
	if err != nil {
		return nil, err
	}
	if vl == undefinedLength {
		return decodeEncapsulated(w, im, o)
	}
	if im.syntax != tsImplicitLE && im.syntax != tsExplicitLE && im.syntax != tsExplicitBE && im.syntax != tsDeflated {
		return nil, fmt.Errorf("%w: native pixel data in transfer syntax %s", ErrDICOM, im.syntax)
	}
	return decodeNative(w, im, int64(vl))
}

// decodeNative reads the first frame of native pixel data of vl bytes.
func decodeNative(w *dicomWalker, im *dicomImage, vl int64) (*DICOMFrame, error) {
	if vl > w.size-w.pos {
		return nil, w.fail("pixel data of %d bytes overruns the file (%d bytes left)", vl, w.size-w.pos)
	}
	bpp := int64(im.bitsAllocated / 8)
	n := int64(im.rows) * int64(im.cols)
	perPixel := int64(im.samples)
	ybr422 := im.photometric == "YBR_FULL_422"
	if ybr422 {
		if im.cols%2 != 0 || im.planar {
			return nil, fmt.Errorf("%w: YBR_FULL_422 of %d columns, planar %v", ErrDICOM, im.cols, im.planar)
		}
		perPixel = 2 // Y Y Cb Cr for each pair of pixels
	}
	frameBytes := n * perPixel * bpp
	if vl/frameBytes < int64(im.frames) { // a division: frames may be any integer
		return nil, fmt.Errorf("%w: %d bytes of pixel data for %d frame(s) of %d×%d×%d samples of %d bits", ErrDICOM, vl, im.frames, im.cols, im.rows, im.samples, im.bitsAllocated)
	}
	fr := im.newFrame()
	shift := uint(im.highBit + 1 - im.bitsStored)
	count := int(n * perPixel)
	// The raw bytes are converted as they arrive, 64 KiB at a time: the
	// frame is the only allocation proportional to the image.
	var err error
	i := 0
	if im.bitsStored > 16 {
		fr.Pix32 = make([]uint32, count)
		err = w.stream(frameBytes, int(bpp), func(raw []byte) {
			for k := 0; k < len(raw); k += int(bpp) {
				var u uint32
				if bpp == 4 {
					u = w.bo.Uint32(raw[k:])
				} else if bpp == 2 {
					u = uint32(w.bo.Uint16(raw[k:]))
				} else {
					u = uint32(raw[k])
				}
				fr.Pix32[i] = im.stored(u>>shift, 32)
				i++
			}
		})
	} else {
		fr.Pix = make([]uint16, count)
		fast := bpp == 2 && w.bo == binary.LittleEndian && !im.signed
		mask := uint16(1)<<im.bitsStored - 1
		err = w.stream(frameBytes, int(bpp), func(raw []byte) {
			switch {
			case fast:
				dst := fr.Pix[i : i+len(raw)/2]
				for k := range dst {
					dst[k] = binary.LittleEndian.Uint16(raw[2*k:]) >> shift & mask
				}
				i += len(dst)
			default:
				for k := 0; k < len(raw); k += int(bpp) {
					var u uint32
					switch bpp {
					case 1:
						u = uint32(raw[k])
					case 2:
						u = uint32(w.bo.Uint16(raw[k:]))
					default:
						u = w.bo.Uint32(raw[k:])
					}
					fr.Pix[i] = uint16(im.stored(u>>shift, 16))
					i++
				}
			}
		})
	}
	if err != nil {
		return nil, err
	}
	if ybr422 {
		fr.Pix = upsample422(fr.Pix, im.rows, im.cols)
		fr.Photometric = "YBR_FULL"
	} else if im.samples == 3 && im.planar {
		fr.Pix = interleave(fr.Pix, int(n))
	}
	return fr, nil
}

// stored keeps the low Bits Stored bits of u and, for signed data,
// sign-extends them; the result is the value's bit pattern in width bits.
func (im *dicomImage) stored(u uint32, width int) uint32 {
	b := uint(im.bitsStored)
	if b < 32 {
		u &= 1<<b - 1
	}
	if im.signed && b < 32 && u&(1<<(b-1)) != 0 {
		u |= ^uint32(0) << b
	}
	if width == 16 {
		return u & 0xffff
	}
	return u
}

// upsample422 expands YBR_FULL_422 (Y0 Y1 Cb Cr per pixel pair) to three
// samples per pixel, each chroma pair shared by its two pixels.
func upsample422(src []uint16, rows, cols int) []uint16 {
	dst := make([]uint16, rows*cols*3)
	for p := 0; p < rows*cols; p += 2 {
		s := src[2*p:]
		y0, y1, cb, cr := s[0], s[1], s[2], s[3]
		d := dst[3*p:]
		d[0], d[1], d[2] = y0, cb, cr
		d[3], d[4], d[5] = y1, cb, cr
	}
	return dst
}

// interleave turns three planes of n samples into n interleaved triples.
func interleave(src []uint16, n int) []uint16 {
	dst := make([]uint16, 3*n)
	for i := range n {
		dst[3*i], dst[3*i+1], dst[3*i+2] = src[i], src[n+i], src[2*n+i]
	}
	return dst
}

// Transfer syntaxes of encapsulated pixel data.
const (
	tsJPEGBaseline    = "1.2.840.10008.1.2.4.50"
	tsJPEGExtended    = "1.2.840.10008.1.2.4.51"
	tsJPEGLossless    = "1.2.840.10008.1.2.4.57"
	tsJPEGLosslessSV1 = "1.2.840.10008.1.2.4.70"
	tsJPEGLSLossless  = "1.2.840.10008.1.2.4.80"
	tsJPEGLSNear      = "1.2.840.10008.1.2.4.81"
	tsJ2KLossless     = "1.2.840.10008.1.2.4.90"
	tsJ2K             = "1.2.840.10008.1.2.4.91"
	tsRLE             = "1.2.840.10008.1.2.5"
)

// frameCodecs decode one compressed frame, by transfer syntax (RLE, whose
// frames do not carry their size, is handled apart).
var frameCodecs = map[string]func([]byte, int64) (*codec.Frame, error){
	tsJPEGBaseline:    jpeg.Decode,
	tsJPEGExtended:    jpeg.Decode,
	tsJPEGLossless:    jpeg.Decode,
	tsJPEGLosslessSV1: jpeg.Decode,
	tsJPEGLSLossless:  jpegls.Decode,
	tsJPEGLSNear:      jpegls.Decode,
	tsJ2KLossless:     jpeg2000.Decode,
	tsJ2K:             jpeg2000.Decode,
}

// jpegFamily reports whether a syntax's frames end with the JPEG
// end-of-image marker FFD9 (JPEG 2000's end of code stream is the same
// bytes), which delimits frames spread over several fragments.
func jpegFamily(ts string) bool {
	return ts != tsRLE
}

// decodeEncapsulated reads the first frame of encapsulated pixel data.
func decodeEncapsulated(w *dicomWalker, im *dicomImage, o options) (*DICOMFrame, error) {
	dec, ok := frameCodecs[im.syntax]
	if !ok && im.syntax != tsRLE {
		return nil, fmt.Errorf("%w: transfer syntax %s", ErrDICOMUnsupported, im.syntax)
	}
	if im.bitsStored > 16 {
		return nil, fmt.Errorf("%w: compressed data of %d bits stored", ErrDICOMUnsupported, im.bitsStored)
	}
	data, err := firstFrameBytes(w, im)
	if err != nil {
		return nil, err
	}
	samples := int64(im.rows) * int64(im.cols) * int64(im.samples)
	limit := o.maxPixels * int64(im.samples) // the codecs count samples
	var f *codec.Frame
	switch im.syntax {
	case tsRLE:
		// The frame's precision is the bits allocated; normalize keeps
		// the bits stored.
		f, err = rle.Decode(data, im.cols, im.rows, im.samples, im.bitsAllocated, limit)
	default:
		f, err = dec(data, limit)
	}
	if err != nil {
		return nil, codecError(im.syntax, err)
	}
	if f.Width != im.cols || f.Height != im.rows || f.Components != im.samples || int64(len(f.Pix)) != samples {
		return nil, fmt.Errorf("%w: compressed frame of %d×%d×%d in a %d×%d×%d image", ErrDICOM, f.Width, f.Height, f.Components, im.cols, im.rows, im.samples)
	}
	fr := im.newFrame()
	lossyJPEG := im.syntax == tsJPEGBaseline || im.syntax == tsJPEGExtended
	if lossyJPEG && im.samples == 3 && strings.HasPrefix(im.photometric, "YBR_") {
		// Converted as libjpeg does while decoding, as dcmtk does.
		if err := jpeg.YCbCrToRGB(f); err != nil {
			return nil, codecError(im.syntax, err)
		}
		fr.Photometric = "RGB"
	}
	fr.Pix = f.Pix
	normalize(fr.Pix, f, im)
	if im.syntax == tsJ2K || im.syntax == tsJ2KLossless {
		if im.photometric == "YBR_RCT" || im.photometric == "YBR_ICT" {
			fr.Photometric = "RGB" // the code stream's inverse component transform was applied
		}
	}
	return fr, nil
}

// normalize turns a codec's samples into stored values: those of a signed
// code stream sign-extended from its precision, then every value masked to
// Bits Stored and, for signed data sets, sign-extended from it, as the
// int16 bit pattern.
func normalize(pix []uint16, f *codec.Frame, im *dicomImage) {
	if !f.Signed && !im.signed && f.Precision <= im.bitsStored {
		return // already in range
	}
	fp := uint(f.Precision)
	for i, v := range pix {
		u := uint32(v)
		if f.Signed && fp < 16 && u&(1<<(fp-1)) != 0 {
			u |= ^uint32(0) << fp
		}
		pix[i] = uint16(im.stored(u, 16))
	}
}

// codecError classifies a codec's error as the package's.
func codecError(ts string, err error) error {
	switch {
	case errors.Is(err, codec.ErrTooLarge):
		return fmt.Errorf("%w: %s frame: %w", ErrTooLarge, ts, err)
	case errors.Is(err, codec.ErrUnsupported):
		return fmt.Errorf("%w: %s frame: %w", ErrDICOMUnsupported, ts, err)
	}
	return fmt.Errorf("%w: %s frame: %w", ErrDICOM, ts, err)
}

// firstFrameBytes reads the encapsulated items up to the end of the first
// frame and returns its bytes (PS3.5 A.4): the basic offset table comes
// first; a frame spans the fragments from its offset (Extended Offset Table
// or Basic Offset Table) to the next frame's. With neither, a single-frame
// file's frame is all its fragments; a multi-frame file's first frame is its
// first fragment for RLE (one fragment per frame, PS3.5 A.4.2) and the
// fragments up to the first that ends a code stream (FFD9) for the JPEG
// family.
func firstFrameBytes(w *dicomWalker, im *dicomImage) ([]byte, error) {
	// A compressed frame of n samples is rarely over 2n bytes; 4n + 1 MiB
	// is a loose bound that a hostile length cannot pass.
	limit := 4*int64(im.rows)*int64(im.cols)*int64(im.samples) + 1<<20
	var total int64
	bot, ok, err := w.fragment(&total, limit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: encapsulated pixel data without a basic offset table item", ErrDICOM)
	}
	// frameLen is the byte length of the first frame's items (tags and
	// lengths included), or -1 when unknown.
	frameLen := int64(-1)
	switch {
	case len(w.extOffsets) > 0:
		if len(w.extLengths) != len(w.extOffsets) || len(w.extOffsets)/8 != im.frames {
			return nil, fmt.Errorf("%w: extended offset table of %d entries, %d lengths, %d frames", ErrDICOM, len(w.extOffsets)/8, len(w.extLengths)/8, im.frames)
		}
		if binary.LittleEndian.Uint64(w.extOffsets) != 0 {
			return nil, fmt.Errorf("%w: extended offset table does not start at 0", ErrDICOM)
		}
		// The lengths count the frame's bytes without item headers; the
		// frame ends where the next begins.
		if im.frames > 1 {
			next := binary.LittleEndian.Uint64(w.extOffsets[8:])
			if next > uint64(w.size) {
				return nil, fmt.Errorf("%w: extended offset %d beyond the file", ErrDICOM, next)
			}
			frameLen = int64(next)
		}
	case len(bot) >= 8 && im.frames > 1:
		if len(bot)%4 != 0 || binary.LittleEndian.Uint32(bot) != 0 {
			return nil, fmt.Errorf("%w: basic offset table of %d bytes starting at %d", ErrDICOM, len(bot), binary.LittleEndian.Uint32(bot))
		}
		frameLen = int64(binary.LittleEndian.Uint32(bot[4:]))
	}
	var frame []byte
	var itemBytes int64 // item bytes read, headers included
	for {
		if frameLen >= 0 && itemBytes >= frameLen {
			if itemBytes > frameLen {
				return nil, fmt.Errorf("%w: offset table ends the first frame inside a fragment", ErrDICOM)
			}
			break
		}
		b, ok, err := w.fragment(&total, limit)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		itemBytes += 8 + int64(len(b))
		if frame == nil {
			frame = b
		} else {
			frame = append(frame, b...)
		}
		if frameLen < 0 && im.frames > 1 && (!jpegFamily(im.syntax) || endsJPEG(b)) {
			break
		}
	}
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: no pixel data fragments", ErrDICOM)
	}
	return frame, nil
}

// endsJPEG reports whether a fragment ends with the end-of-image marker,
// allowing the padding byte of an odd-length stream.
func endsJPEG(b []byte) bool {
	b = bytes.TrimRight(b, "\x00")
	return len(b) >= 2 && b[len(b)-2] == 0xff && b[len(b)-1] == 0xd9
}

// readFloatPixels reads the first frame of Float or Double Float Pixel
// Data, refusing non-finite values.
func readFloatPixels(w *dicomWalker, im *dicomImage) ([]float64, error) {
	_, _, vl, err := w.elemHeader(w.bo, w.implicit, false)
	if err != nil {
		return nil, err
	}
	if vl == undefinedLength || int64(vl) > w.size-w.pos {
		return nil, w.fail("float pixel data of %d bytes with %d bytes left", vl, w.size-w.pos)
	}
	bpp := int64(im.bitsAllocated / 8)
	n := int64(im.rows) * int64(im.cols)
	if int64(vl)/(n*bpp) < int64(im.frames) {
		return nil, fmt.Errorf("%w: %d bytes of float pixel data for %d frame(s) of %d×%d of %d bits", ErrDICOM, vl, im.frames, im.cols, im.rows, im.bitsAllocated)
	}
	raw, err := w.take(n*bpp, false)
	if err != nil {
		return nil, err
	}
	vals := make([]float64, n)
	for i := range vals {
		if bpp == 4 {
			vals[i] = float64(math.Float32frombits(w.bo.Uint32(raw[4*i:])))
		} else {
			vals[i] = math.Float64frombits(w.bo.Uint64(raw[8*i:]))
		}
		if math.IsNaN(vals[i]) || math.IsInf(vals[i], 0) {
			return nil, fmt.Errorf("%w: float pixel data holds %g at pixel (%d, %d)", ErrDICOM, vals[i], i%im.cols, i/im.cols)
		}
	}
	return vals, nil
}
