package vision

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDICOMGarbageValues: values that would render an all-black (or
// otherwise meaningless) image are errors that name them.
func TestDICOMGarbageValues(t *testing.T) {
	img := func(extra func(d *dcm)) []byte {
		d := newDCM(false).image(2, 2, 16, 12, 11, 0, "MONOCHROME2")
		extra(d)
		return d.el(0x7fe0, 0x0010, "OW", us(0, 100, 2000, 4095)).bytes()
	}
	for _, c := range []struct {
		name, say string
		b         []byte
	}{
		{"slope 1e308", "Rescale Slope", img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("1e308")) })},
		{"slope 1e400", "Rescale Slope", img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("1e400")) })},
		{"slope 0", "Rescale Slope 0", img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("0")) })},
		{"slope NaN", "Rescale Slope", img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("NaN")) })},
		{"slope text", "Rescale Slope", img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("abc")) })},
		{"intercept -Inf", "Rescale Intercept", img(func(d *dcm) { d.el(0x0028, 0x1052, "DS", str("-Inf")) })},
		{"intercept 1e308 with slope 1e308", "Rescale Slope", img(func(d *dcm) {
			d.el(0x0028, 0x1052, "DS", str("1e308")).el(0x0028, 0x1053, "DS", str("1e308"))
		})},
		{"width 1e-300", "Window Width", img(func(d *dcm) { d.el(0x0028, 0x1050, "DS", str("100")).el(0x0028, 0x1051, "DS", str("1e-300")) })},
		{"width 0 sigmoid", "Window Width", img(func(d *dcm) {
			d.el(0x0028, 0x1050, "DS", str("100")).el(0x0028, 0x1051, "DS", str("0")).el(0x0028, 0x1056, "CS", str("SIGMOID"))
		})},
		{"centre Inf", "Window Center", img(func(d *dcm) { d.el(0x0028, 0x1050, "DS", str("Inf")).el(0x0028, 0x1051, "DS", str("100")) })},
	} {
		_, err := decodeBytes(c.b)
		if !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: %v, want an ErrDICOM naming %s", c.name, err, c.say)
		}
	}
	// The stored values do not depend on the rescale: DecodeDICOMFrame
	// reads them.
	b := img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("1e308")) })
	fr, err := DecodeDICOMFrame(bytes.NewReader(b), int64(len(b)))
	if err != nil || fr.Value(3) != 4095 {
		t.Errorf("stored values with slope 1e308: %v %v", fr, err)
	}
	// A large but finite slope renders.
	if _, err := decodeBytes(img(func(d *dcm) { d.el(0x0028, 0x1053, "DS", str("1e300")) })); err != nil {
		t.Errorf("slope 1e300: %v", err)
	}
}

// floatDCM is a 2×2 image of Float Pixel Data.
func floatDCM(vals ...float32) []byte {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	// Implicit VR: the test builder writes OF's 4-byte length only there.
	d := newDCM(true).el(0x0028, 0x0002, "US", us(1)).el(0x0028, 0x0004, "CS", str("MONOCHROME2")).
		el(0x0028, 0x0010, "US", us(2)).el(0x0028, 0x0011, "US", us(2)).el(0x0028, 0x0100, "US", us(32))
	return d.el(0x7fe0, 0x0008, "OF", raw).bytes()
}

// TestDICOMLyingLengths: pixel data shorter or longer than its element
// says, fragments longer than the file, float pixels that are not numbers.
func TestDICOMLyingLengths(t *testing.T) {
	base := newDCM(false).image(2, 2, 8, 8, 7, 0, "MONOCHROME2")
	good := bytes.Clone(base.el(0x7fe0, 0x0010, "OB", []byte{1, 2, 3, 4}).bytes())
	// The length field says 4 KiB; the file holds 4 bytes.
	lying := bytes.Clone(good)
	binary.LittleEndian.PutUint32(lying[len(lying)-8:], 4096)
	if _, err := decodeBytes(lying); !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), "overruns") {
		t.Errorf("pixel data longer than the file: %v", err)
	}
	// Three frames declared, one stored.
	frames := newDCM(false).image(2, 2, 8, 8, 7, 0, "MONOCHROME2").el(0x0028, 0x0008, "IS", str("3")).
		el(0x7fe0, 0x0010, "OB", []byte{1, 2, 3, 4}).bytes()
	if _, err := decodeBytes(frames); !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), "3 frame") {
		t.Errorf("fewer frames than declared: %v", err)
	}
	// A frame count whose product with the frame size overflows.
	frames = newDCM(false).image(2, 2, 8, 8, 7, 0, "MONOCHROME2").el(0x0028, 0x0008, "IS", str("4611686018427387904")).
		el(0x7fe0, 0x0010, "OB", []byte{1, 2, 3, 4}).bytes()
	if _, err := decodeBytes(frames); !errors.Is(err, ErrDICOM) {
		t.Errorf("2^62 frames: %v", err)
	}
	// A fragment whose length runs past the end of the file.
	d := newDCM(false)
	d.syntax = tsRLE
	d.image(2, 2, 8, 8, 7, 0, "MONOCHROME2")
	d.body.Write([]byte{0xe0, 0x7f, 0x10, 0x00, 'O', 'B', 0, 0, 0xff, 0xff, 0xff, 0xff})
	d.body.Write([]byte{0xfe, 0xff, 0x00, 0xe0, 0, 0, 0, 0})          // empty offset table
	d.body.Write([]byte{0xfe, 0xff, 0x00, 0xe0, 0x00, 0x00, 0x10, 0}) // 1 MiB fragment
	d.body.Write(make([]byte, 64))
	if _, err := decodeBytes(d.bytes()); !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), "overruns") {
		t.Errorf("fragment longer than the file: %v", err)
	}
	// Float pixel data: NaN and infinities are named; finite values render.
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		if _, err := decodeBytes(floatDCM(0, 1, v, 3)); !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), "float pixel data holds") {
			t.Errorf("float pixel %v: %v", v, err)
		}
	}
	p, err := decodeBytes(floatDCM(0, 1, 2, 3))
	if err != nil || !bytes.Equal(p.Pix, []uint8{0, 85, 170, 255}) {
		t.Errorf("finite float pixel data: %v %v", p, err)
	}
	fb := floatDCM(0, 1, 2, 3)
	if _, err := DecodeDICOMFrame(bytes.NewReader(fb), int64(len(fb))); !errors.Is(err, ErrDICOMUnsupported) {
		t.Errorf("stored values of float pixel data: %v", err)
	}
}

// encapsulated builds a file of the given syntax whose pixel data holds the
// given fragments after an empty offset table.
func encapsulated(syntax string, rows, cols int, frags ...[]byte) []byte {
	return encapsulatedBits(syntax, rows, cols, 16, 16, frags...)
}

// encapsulatedBits is encapsulated with the given bits allocated and stored.
func encapsulatedBits(syntax string, rows, cols, alloc, stored int, frags ...[]byte) []byte {
	d := newDCM(false)
	d.syntax = syntax
	d.image(rows, cols, alloc, stored, stored-1, 0, "MONOCHROME2")
	b := &d.body
	b.Write([]byte{0xe0, 0x7f, 0x10, 0x00, 'O', 'B', 0, 0, 0xff, 0xff, 0xff, 0xff})
	binary.Write(b, binary.LittleEndian, [2]uint16{0xfffe, 0xe000})
	binary.Write(b, binary.LittleEndian, uint32(0))
	for _, f := range frags {
		f = pad(f, 0)
		binary.Write(b, binary.LittleEndian, [2]uint16{0xfffe, 0xe000})
		binary.Write(b, binary.LittleEndian, uint32(len(f)))
		b.Write(f)
	}
	binary.Write(b, binary.LittleEndian, [2]uint16{0xfffe, 0xe0dd})
	binary.Write(b, binary.LittleEndian, uint32(0))
	return d.bytes()
}

// TestDICOMLimitBeforeDecompression: the pixel limit refuses a compressed
// image from its data set before a fragment is read, and a code stream
// declaring more than its data set (and the limit) is refused by its codec
// before it allocates.
func TestDICOMLimitBeforeDecompression(t *testing.T) {
	jls, err := os.ReadFile(filepath.Join("testdata", "dicom", "jls_mono16.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	// The data set declares 40000×40000; nothing past the pixel data
	// element header may be read.
	b := encapsulated(tsJPEGLSLossless, 40000, 40000, []byte{0xff, 0xd8})
	hdr := bytes.Index(b, []byte{0xe0, 0x7f, 0x10, 0x00}) + 12
	if _, err := DecodeDICOMFrame(&failAfter{b: b, n: hdr}, int64(len(b))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("40000² JPEG-LS: %v", err)
	}
	// The data set says 4×4 (within the limit), the JPEG-LS header
	// 65535×65535: the codec refuses it without allocating the frame.
	stream := []byte{0xff, 0xd8, 0xff, 0xf7, 0, 11, 16, 0xff, 0xff, 0xff, 0xff, 1, 1, 0x11, 0,
		0xff, 0xda, 0, 8, 1, 1, 0, 0, 0, 0, 0, 0xff, 0xd9}
	b = encapsulated(tsJPEGLSLossless, 4, 4, stream)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err = DecodeDICOMFrame(bytes.NewReader(b), int64(len(b)), WithMaxPixels(1<<20))
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrDICOM) {
		t.Errorf("lying JPEG-LS header: %v", err)
	}
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 1<<20 {
		t.Errorf("lying JPEG-LS header: %d bytes allocated", d)
	}
	// Within the limit, a code stream whose size differs from the data
	// set's is an error.
	if _, err := DecodeDICOMFrame(bytes.NewReader(jls), int64(len(jls)), WithMaxPixels(40*30-1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit under the image: %v", err)
	}
	if len(jls) < 100 {
		t.Fatal("short test file")
	}
}

// TestDICOMFrameMemory: decoding the 2140×1760 chest CR to stored values
// costs its frame (2 bytes a pixel) plus the compressed bytes (native data
// is converted 64 KiB at a time) and, for RLE, one byte plane; rendering
// adds one byte a pixel and small tables. Measured as the bytes allocated
// per call (about 2.1, 2.6 and 4.1 bytes a pixel for native, JPEG-LS and
// RLE data).
func TestDICOMFrameMemory(t *testing.T) {
	dir := dicomRealDir(t)
	for _, name := range []string{"cr_rle.dcm", "cr_jpegls_lossless.dcm", "src_cr_10bit_mono1.dcm"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Skip(err)
		}
		var fr *DICOMFrame
		allocFrame := allocated(func() {
			fr, err = DecodeDICOMFrame(bytes.NewReader(data), int64(len(data)))
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		allocRender := allocated(func() { _, err = DecodeDICOM(bytes.NewReader(data), int64(len(data))) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		px := float64(fr.Len())
		t.Logf("%s: %d×%d, %d bytes; stored values: %.2f bytes/pixel allocated, rendered: %.2f bytes/pixel",
			name, fr.Columns, fr.Rows, len(data), float64(allocFrame)/px, float64(allocRender)/px)
		// The frame (2 bytes a pixel), one byte plane (RLE), the
		// compressed bytes once, and 1 MiB of header, chunks and tables.
		bound := 3*px + float64(len(data)) + 1<<20
		if float64(allocFrame) > bound {
			t.Errorf("%s: stored values allocated %d bytes, bound %.0f", name, allocFrame, bound)
		}
		if float64(allocRender) > bound+px+1<<20 {
			t.Errorf("%s: rendering allocated %d bytes, bound %.0f", name, allocRender, bound+px+1<<20)
		}
	}
}

func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestDICOMDeflateBomb: a deflated data set is bounded by the header limit
// and the pixel limit however far it inflates.
func TestDICOMDeflateBomb(t *testing.T) {
	deflated := func(body []byte) []byte {
		var z bytes.Buffer
		fw, _ := flate.NewWriter(&z, flate.BestCompression)
		fw.Write(body)
		fw.Close()
		d := newDCM(false)
		d.syntax = tsDeflated
		d.body.Write(z.Bytes())
		return d.bytes()
	}
	// A 1 GiB element in the header: refused before it is read.
	var bomb bytes.Buffer
	bomb.Write(newDCM(false).el(0x0008, 0x0060, "CS", str("CR")).body.Bytes())
	bomb.Write([]byte{0x08, 0x00, 0x30, 0x10, 'U', 'T', 0, 0, 0, 0, 0, 0x40})
	bomb.Write(make([]byte, 1<<20))
	b := deflated(bomb.Bytes())
	var err error
	n := allocated(func() { _, err = decodeBytes(b) })
	if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrDICOM) {
		t.Errorf("header bomb: %v", err)
	}
	if n > 16<<20 {
		t.Errorf("header bomb (%d bytes compressed): %d bytes allocated", len(b), n)
	}
	// Pixel data declaring 4 GiB for a 2×2 image: the frame is read, the
	// rest never.
	d := newDCM(false).el(0x0008, 0x0060, "CS", str("CR")).image(2, 2, 8, 8, 7, 0, "MONOCHROME2")
	d.body.Write([]byte{0xe0, 0x7f, 0x10, 0x00, 'O', 'B', 0, 0, 0xff, 0xff, 0xff, 0xfe})
	d.body.Write([]byte{1, 2, 3, 4})
	p, err := decodeBytes(deflated(d.body.Bytes()))
	if err != nil || !bytes.Equal(p.Pix, []uint8{0, 85, 170, 255}) {
		t.Errorf("deflated pixel data: %v %v", p, err)
	}
	// No pixel data: said so.
	d = newDCM(false).el(0x0008, 0x0060, "CS", str("CR")).image(2, 2, 8, 8, 7, 0, "MONOCHROME2")
	if _, err := decodeBytes(deflated(d.body.Bytes())); !errors.Is(err, ErrDICOM) || !strings.Contains(err.Error(), "no pixel data") {
		t.Errorf("deflated without pixel data: %v", err)
	}
}

// TestDICOMRLEBitsStored: RLE carries whole bytes; values are kept to Bits
// Stored as native data's are (12 of 16 bits here, 0xffff in the data).
func TestDICOMRLEBitsStored(t *testing.T) {
	seg := func(b ...byte) []byte { return append([]byte{byte(len(b) - 1)}, b...) } // one literal run
	hi, lo := seg(0xff, 0x00), seg(0xff, 0x07)
	frame := make([]byte, 64)
	binary.LittleEndian.PutUint32(frame, 2)
	binary.LittleEndian.PutUint32(frame[4:], 64)
	binary.LittleEndian.PutUint32(frame[8:], uint32(64+len(hi)))
	frame = append(append(frame, hi...), lo...)
	e := encapsulatedBits(tsRLE, 1, 2, 16, 12, frame)
	fr, err := DecodeDICOMFrame(bytes.NewReader(e), int64(len(e)))
	if err != nil {
		t.Fatal(err)
	}
	if fr.Value(0) != 0xfff || fr.Value(1) != 0x007 {
		t.Errorf("RLE values %#x %#x, want 0xfff 0x7", fr.Value(0), fr.Value(1))
	}
}
