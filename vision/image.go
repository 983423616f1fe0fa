package vision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // registered for Decode, as Pillow opens GIF too
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"

	"github.com/radgen/radgen/internal/boundedio"
)

// Pixels is an 8-bit image: interleaved, row-major H×W×C, with C = 1 (gray)
// or C = 3 (RGB). Sample (x, y, c) is Pix[(y*W+x)*C+c]. A gray image stands
// for the RGB image with three equal channels, which is what Pillow's
// convert("RGB") makes of it. The zero value is an empty image.
//
// A *Pixels is an image.Image (gray or RGBA colours, bounds at the
// origin), so decoded views go wherever an image goes — memtrans's Study,
// an encoder — without a copy or a wrapper, and [FromImage] and the
// preprocessing read them back as they are.
type Pixels struct {
	W, H, C int
	Pix     []uint8
}

// ColorModel implements image.Image: gray for C = 1, RGBA otherwise.
func (p *Pixels) ColorModel() color.Model {
	if p.C == 1 {
		return color.GrayModel
	}
	return color.RGBAModel
}

// Bounds implements image.Image: (0, 0)–(W, H).
func (p *Pixels) Bounds() image.Rectangle { return image.Rect(0, 0, p.W, p.H) }

// At implements image.Image; outside the bounds it is the zero colour.
func (p *Pixels) At(x, y int) color.Color {
	if x < 0 || y < 0 || x >= p.W || y >= p.H {
		if p.C == 1 {
			return color.Gray{}
		}
		return color.RGBA{}
	}
	i := (y*p.W + x) * p.C
	if p.C == 1 {
		return color.Gray{Y: p.Pix[i]}
	}
	return color.RGBA{p.Pix[i], p.Pix[i+1], p.Pix[i+2], 0xff}
}

// Image is a float32 image, channel-major C×H×W: sample (c, y, x) is
// Pix[(c*H+y)*W+x]. It is the layout of a PyTorch image tensor (C, H, W).
type Image struct {
	C, H, W int
	Pix     []float32
}

// DefaultMaxPixels is the default pixel limit of [Decode]: 16 Mi pixels
// (4096×4096), the largest chest radiographs (MIMIC-CXR's are up to about
// 4.3k×3.5k = 15 Mi) and no more. A view then costs at most 64 MiB to decode
// (see [Decode]).
const DefaultMaxPixels = 16 << 20

// DefaultMaxFileBytes is the default size limit of an image file read by
// [DecodeFile]: 256 MiB, over four times an uncompressed 4096² 16-bit RGB
// image.
const DefaultMaxFileBytes = 256 << 20

// Errors returned by [Decode].
var (
	// ErrTooLarge is returned when the header declares more pixels than the
	// limit set by [WithMaxPixels]; nothing has been decoded then.
	ErrTooLarge = errors.New("vision: image exceeds the pixel limit")
	// ErrInvalid is returned for an image whose header declares no pixels.
	ErrInvalid = errors.New("vision: image has no pixels")
)

// Option configures [Decode] and [DecodeFile]. Options validate themselves:
// a bad value makes the call return an error.
type Option func(*options) error

type options struct {
	maxPixels    int64
	maxFileBytes int64
	nonRegular   bool
}

// WithMaxFileBytes limits the bytes read from an image file (default
// [DefaultMaxFileBytes]); a longer file is refused with an error wrapping
// [ErrFileTooLarge]. n must be positive.
func WithMaxFileBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("vision: WithMaxFileBytes(%d): the limit must be positive", n)
		}
		o.maxFileBytes = n
		return nil
	}
}

// WithNonRegularFiles lets [DecodeFile] read FIFOs, devices and the like,
// which are refused by default (a FIFO without a writer blocks forever).
// The size limit still applies.
func WithNonRegularFiles() Option {
	return func(o *options) error { o.nonRegular = true; return nil }
}

// ErrNotRegular is wrapped by the error for a FIFO, device or other
// non-regular file given to [DecodeFile] without [WithNonRegularFiles].
var ErrNotRegular = boundedio.ErrNotRegular

// ErrFileTooLarge is wrapped by the error for a file over the size limit
// of [WithMaxFileBytes].
var ErrFileTooLarge = boundedio.ErrTooLarge

// openFile opens the named image file as the options of [DecodeFile]
// allow: a regular file (unless WithNonRegularFiles) of at most the file
// size limit. It returns the file, its size (-1 when unknown) and a reader
// that fails with an error wrapping [ErrFileTooLarge] past the limit.
func openFile(name string, opts ...Option) (*os.File, int64, io.Reader, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, 0, nil, err
	}
	f, err := boundedio.Open(name, o.nonRegular)
	if err != nil {
		return nil, 0, nil, err
	}
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
		if size > o.maxFileBytes {
			f.Close()
			return nil, 0, nil, fmt.Errorf("%s: %w: %d bytes, limit %d", name, ErrFileTooLarge, size, o.maxFileBytes)
		}
	}
	return f, size, boundedio.Reader(f, o.maxFileBytes, name), nil
}

// WithMaxPixels limits the width×height an image may declare in its header;
// larger images are refused with [ErrTooLarge] before any pixel is decoded,
// so a small hostile file cannot make the decoder allocate gigabytes.
// n must be positive. The default is [DefaultMaxPixels].
func WithMaxPixels(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("vision: WithMaxPixels(%d): the limit must be positive", n)
		}
		o.maxPixels = n
		return nil
	}
}

func newOptions(opts []Option) (options, error) {
	o := options{maxPixels: DefaultMaxPixels, maxFileBytes: DefaultMaxFileBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Decode reads a view in any format radgen reads, recognised from its first
// bytes by [Sniff] whatever its name: DICOM through [DecodeDICOM] (its
// values' lengths bounded by the file size limit, [WithMaxFileBytes]; use
// DecodeDICOM to give the exact size), and a PNG, JPEG or GIF image
// converted as Pillow's Image.open(r).convert("RGB") does (see [FromImage]
// for the conversions).
// The header is read first with [image.DecodeConfig]; an image declaring more
// pixels than the limit ([WithMaxPixels]) is refused with [ErrTooLarge]
// before its pixels are decoded. Only the bytes of the header are buffered.
//
// JPEG decoding uses Go's image/jpeg, whose inverse DCT and chroma upsampling
// may differ from libjpeg's (behind Pillow) by a few levels; PNG and GIF
// decoding is exact.
//
// # Memory
//
// The samples are converted in place in the decoder's own buffer, whose
// size is the image's in its own bit depth (Go's decoders keep 8-bit RGB
// as RGBA): a view costs its pixel count times 1 byte (8-bit gray), 2
// (16-bit gray), 4 (8-bit RGB or RGBA), 8 (16-bit colour), or 4.5 to 6
// (colour JPEG, whose planes and the RGB result coexist), plus the
// decoder's fixed buffers. At the default limit ([DefaultMaxPixels], 16 Mi)
// that is at most 128 MiB (16-bit colour) and 32 MiB for a 16-bit 4096²
// radiograph.
func Decode(r io.Reader, opts ...Option) (*Pixels, error) {
	return decodeSized(r, -1, opts)
}

// decodeSized is Decode of a file of size bytes, -1 when unknown.
func decodeSized(r io.Reader, size int64, opts []Option) (*Pixels, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < sniffLen {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	r = br
	if head, _ := br.Peek(sniffLen); Sniff(head) == "dicom" {
		if size < 0 {
			size = o.maxFileBytes
		}
		return DecodeDICOM(br, size, opts...)
	}
	// DecodeConfig reads through a bufio.Reader of its own; whatever it
	// consumes is kept in head and replayed in front of the rest of r.
	var head bytes.Buffer
	cfg, format, err := image.DecodeConfig(io.TeeReader(r, &head))
	if err != nil {
		return nil, fmt.Errorf("vision: reading image header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%w: %s header declares %d×%d", ErrInvalid, format, cfg.Width, cfg.Height)
	}
	if n := int64(cfg.Width) * int64(cfg.Height); n > o.maxPixels {
		return nil, fmt.Errorf("%w: %s of %d×%d = %d pixels, limit %d", ErrTooLarge, format, cfg.Width, cfg.Height, n, o.maxPixels)
	}
	img, _, err := image.Decode(io.MultiReader(&head, r))
	if err != nil {
		return nil, fmt.Errorf("vision: decoding %s: %w", format, err)
	}
	if b := img.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		// Cannot happen with the standard decoders; guards the limit.
		return nil, fmt.Errorf("vision: %s decoded to %v, header said %d×%d", format, b, cfg.Width, cfg.Height)
	}
	return fromImageOwned(img), nil
}

// DecodeFile is [Decode] on the named file: a FIFO or device is refused
// unless [WithNonRegularFiles], and a file over the size limit
// ([WithMaxFileBytes]) with [ErrFileTooLarge]. The options are checked
// before the file is opened, so that an invalid option is reported
// whatever the name.
func DecodeFile(name string, opts ...Option) (*Pixels, error) {
	f, size, r, err := openFile(name, opts...)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := decodeSized(bufio.NewReaderSize(r, 64<<10), size, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// sniffLen is the length of the head that Sniff needs.
const sniffLen = 132

// Sniff names the format of a view from its first bytes (at least 132, or
// the whole file when shorter): "dicom" (a Part 10 file or a bare data set,
// as [IsDICOM] recognises it), "png", "jpeg" or "gif" by their signatures,
// and "" for anything else. It is where radgen recognises a view's format:
// [Decode] dispatches on it, and so does every reader of views in the
// library (files, DICOM folders, the report service's uploads).
func Sniff(head []byte) string {
	switch {
	case IsDICOM(head[:min(len(head), sniffLen)]):
		return "dicom"
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff}):
		return "jpeg"
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return "gif"
	}
	return ""
}

// fromImageOwned is FromImage for an image nobody else holds: the samples
// are converted in place in img's buffer wherever the result is no larger
// than the source (gray, 16-bit gray, RGBA, NRGBA, NRGBA64), so the
// conversion costs no second full-resolution copy. Each output sample is
// written at or before the position of the input samples it comes from,
// and those are read before the write, so the forward pass is safe.
func fromImageOwned(img image.Image) *Pixels {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	switch m := img.(type) {
	case *image.Gray:
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			copy(m.Pix[y*w:(y+1)*w], m.Pix[i:i+w])
		}
		return &Pixels{W: w, H: h, C: 1, Pix: m.Pix[: w*h : w*h]}
	case *image.Gray16:
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x := range w {
				m.Pix[y*w+x] = m.Pix[i+2*x] // the high byte
			}
		}
		return &Pixels{W: w, H: h, C: 1, Pix: m.Pix[: w*h : w*h]}
	case *image.NRGBA:
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x := range w {
				r, g, bl := m.Pix[i+4*x], m.Pix[i+4*x+1], m.Pix[i+4*x+2]
				o := 3 * (y*w + x)
				m.Pix[o], m.Pix[o+1], m.Pix[o+2] = r, g, bl
			}
		}
		return &Pixels{W: w, H: h, C: 3, Pix: m.Pix[: 3*w*h : 3*w*h]}
	case *image.NRGBA64:
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x := range w {
				r, g, bl := m.Pix[i+8*x], m.Pix[i+8*x+2], m.Pix[i+8*x+4]
				o := 3 * (y*w + x)
				m.Pix[o], m.Pix[o+1], m.Pix[o+2] = r, g, bl
			}
		}
		return &Pixels{W: w, H: h, C: 3, Pix: m.Pix[: 3*w*h : 3*w*h]}
	case *image.RGBA:
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x := range w {
				s := m.Pix[i+4*x : i+4*x+4 : i+4*x+4]
				r, g, bl, a := s[0], s[1], s[2], s[3]
				if a != 0xff {
					c := color.NRGBAModel.Convert(color.RGBA{r, g, bl, a}).(color.NRGBA)
					r, g, bl = c.R, c.G, c.B
				}
				o := 3 * (y*w + x)
				m.Pix[o], m.Pix[o+1], m.Pix[o+2] = r, g, bl
			}
		}
		return &Pixels{W: w, H: h, C: 3, Pix: m.Pix[: 3*w*h : 3*w*h]}
	}
	return FromImage(nil, img)
}

// FromImage converts img to Pixels the way Pillow's convert("RGB") does, and
// returns dst (reusing its storage) or a new Pixels when dst is nil:
//   - 8-bit gray stays one channel (C = 1);
//   - 16-bit gray keeps the high byte of each sample, C = 1. (Pillow opens a
//     16-bit PNG in mode "I" and its I→RGB conversion clips at 255, which
//     turns nearly every pixel white; that is a bug of the reference we do
//     not reproduce.)
//   - colour images give C = 3; an alpha channel is dropped without
//     compositing (Pillow's RGBA→RGB), so colours are the non-premultiplied
//     ones; 16-bit colour keeps the high byte.
//   - paletted images are looked up in their palette.
//
// The bounds of img need not start at (0, 0).
func FromImage(dst *Pixels, img image.Image) *Pixels {
	if dst == nil {
		dst = new(Pixels)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	switch m := img.(type) {
	case *Pixels:
		dst.reset(m.W, m.H, m.C)
		copy(dst.Pix, m.Pix)
	case *image.Gray:
		dst.reset(w, h, 1)
		for y := range h {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			copy(dst.Pix[y*w:(y+1)*w], m.Pix[i:i+w])
		}
	case *image.Gray16:
		dst.reset(w, h, 1)
		for y := range h {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			row := dst.Pix[y*w : (y+1)*w]
			for x := range row {
				row[x] = src[2*x] // big-endian: the high byte comes first
			}
		}
	case *image.NRGBA:
		dst.reset(w, h, 3)
		for y := range h {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			row := dst.Pix[y*w*3 : (y+1)*w*3]
			for x := range w {
				row[3*x], row[3*x+1], row[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
			}
		}
	case *image.NRGBA64:
		dst.reset(w, h, 3)
		for y := range h {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			row := dst.Pix[y*w*3 : (y+1)*w*3]
			for x := range w {
				row[3*x], row[3*x+1], row[3*x+2] = src[8*x], src[8*x+2], src[8*x+4]
			}
		}
	case *image.RGBA:
		dst.reset(w, h, 3)
		for y := range h {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			row := dst.Pix[y*w*3 : (y+1)*w*3]
			for x := range w {
				s := src[4*x : 4*x+4 : 4*x+4]
				if s[3] == 0xff {
					row[3*x], row[3*x+1], row[3*x+2] = s[0], s[1], s[2]
					continue
				}
				c := color.NRGBAModel.Convert(color.RGBA{s[0], s[1], s[2], s[3]}).(color.NRGBA)
				row[3*x], row[3*x+1], row[3*x+2] = c.R, c.G, c.B
			}
		}
	case *image.YCbCr:
		dst.reset(w, h, 3)
		for y := range h {
			row := dst.Pix[y*w*3 : (y+1)*w*3]
			for x := range w {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				row[3*x], row[3*x+1], row[3*x+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			}
		}
	case *image.Paletted:
		var lut [256][3]uint8
		for i, c := range m.Palette {
			if i == len(lut) {
				break
			}
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			lut[i] = [3]uint8{n.R, n.G, n.B}
		}
		dst.reset(w, h, 3)
		for y := range h {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			row := dst.Pix[y*w*3 : (y+1)*w*3]
			for x := range w {
				c := lut[src[x]] // an index past the palette reads black, as in Pillow
				row[3*x], row[3*x+1], row[3*x+2] = c[0], c[1], c[2]
			}
		}
	default:
		fromImageGeneric(dst, img)
	}
	return dst
}

// fromImageGeneric converts through color.NRGBAModel; FromImage's fast paths
// must agree with it on opaque pixels (FuzzDecode checks that).
func fromImageGeneric(dst *Pixels, img image.Image) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if isGray(img.ColorModel()) {
		dst.reset(w, h, 1)
		for y := range h {
			for x := range w {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				dst.Pix[y*w+x] = c.R
			}
		}
		return
	}
	dst.reset(w, h, 3)
	for y := range h {
		for x := range w {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			i := (y*w + x) * 3
			dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2] = c.R, c.G, c.B
		}
	}
}

func isGray(m color.Model) bool { return m == color.GrayModel || m == color.Gray16Model }

// reset sizes p to w×h×c, reusing its storage when large enough.
func (p *Pixels) reset(w, h, c int) {
	p.W, p.H, p.C = w, h, c
	n := w * h * c
	if cap(p.Pix) < n {
		p.Pix = make([]uint8, n)
	}
	p.Pix = p.Pix[:n]
}

// reset sizes m to c×h×w, reusing its storage when large enough.
func (m *Image) reset(c, h, w int) {
	m.C, m.H, m.W = c, h, w
	n := c * h * w
	if cap(m.Pix) < n {
		m.Pix = make([]float32, n)
	}
	m.Pix = m.Pix[:n]
}
