// Package jpegls decodes JPEG-LS images (ITU-T T.87 | ISO/IEC 14495-1), as
// DICOM stores them under transfer syntaxes 1.2.840.10008.1.2.4.80
// (lossless) and 1.2.840.10008.1.2.4.81 (near-lossless): 2 to 16 bits per
// sample, any number of components, the three interleave modes (none, line,
// sample), NEAR ≥ 0, and the preset coding parameters of an LSE marker
// segment (MAXVAL, T1, T2, T3, RESET). Mapping tables (palettes) and point
// transforms are refused as unsupported.
//
// The decoder follows the standard's procedures: context modelling with 365
// regular contexts and two run-interruption contexts, the median edge
// detector, bias correction, limited-length Golomb codes, and run mode with
// its J table, over a bit stream with the standard's zero-bit stuffing after
// 0xFF.
package jpegls

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/radgen/radgen/internal/codec"
)

// Markers.
const (
	markerSOI = 0xd8
	markerEOI = 0xd9
	markerSOF = 0xf7 // SOF55: JPEG-LS
	markerLSE = 0xf8
	markerSOS = 0xda
	markerDNL = 0xdc
	markerDRI = 0xdd
	markerCOM = 0xfe
)

// maxComponents bounds the components of a frame.
const maxComponents = 4

// params are the coding parameters of a scan.
type params struct {
	maxval, near, reset int
	t1, t2, t3          int
	rng, qbpp, limit    int
}

// decoder holds the state of one Decode call.
type decoder struct {
	data     []byte
	pos      int
	width    int
	height   int
	prec     int
	ncomp    int
	compID   [maxComponents]byte
	preset   [5]int // MAXVAL, T1, T2, T3, RESET from an LSE marker (0: default)
	frame    *codec.Frame
	seen     [maxComponents]bool // components decoded by some scan
	gotFrame bool
}

// Decode reads one JPEG-LS image from data. The frame's declared size
// (width × height × components) is checked against maxPixels before
// anything proportional to it is allocated.
func Decode(data []byte, maxPixels int64) (*codec.Frame, error) {
	d := &decoder{data: data}
	if err := d.run(maxPixels); err != nil {
		return nil, err
	}
	return d.frame, nil
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: JPEG-LS: "+format, append([]any{codec.ErrFormat}, args...)...)
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: JPEG-LS: "+format, append([]any{codec.ErrUnsupported}, args...)...)
}

// segment reads a marker segment's length and returns its payload.
func (d *decoder) segment() ([]byte, error) {
	if d.pos+2 > len(d.data) {
		return nil, errorf("truncated marker segment at byte %d", d.pos)
	}
	n := int(binary.BigEndian.Uint16(d.data[d.pos:]))
	if n < 2 || d.pos+n > len(d.data) {
		return nil, errorf("marker segment of %d bytes at byte %d overruns the data", n, d.pos)
	}
	b := d.data[d.pos+2 : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) run(maxPixels int64) error {
	if len(d.data) < 4 || d.data[0] != 0xff || d.data[1] != markerSOI {
		return errorf("no start-of-image marker")
	}
	d.pos = 2
	for {
		// Markers may be preceded by fill bytes 0xFF.
		if d.pos+2 > len(d.data) {
			return errorf("truncated before end-of-image")
		}
		if d.data[d.pos] != 0xff {
			return errorf("marker expected at byte %d, found 0x%02x", d.pos, d.data[d.pos])
		}
		for d.pos+1 < len(d.data) && d.data[d.pos+1] == 0xff {
			d.pos++
		}
		if d.pos+2 > len(d.data) {
			return errorf("truncated before end-of-image")
		}
		m := d.data[d.pos+1]
		d.pos += 2
		switch {
		case m == markerEOI:
			return d.finish()
		case m == markerSOF:
			b, err := d.segment()
			if err != nil {
				return err
			}
			if err := d.readSOF(b, maxPixels); err != nil {
				return err
			}
		case m == markerLSE:
			b, err := d.segment()
			if err != nil {
				return err
			}
			if err := d.readLSE(b); err != nil {
				return err
			}
		case m == markerSOS:
			b, err := d.segment()
			if err != nil {
				return err
			}
			if err := d.readScan(b); err != nil {
				return err
			}
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			return unsupported("not a JPEG-LS frame (SOF marker 0x%02x)", m)
		case m >= 0xe0 && m <= 0xef, m == markerCOM, m == markerDRI, m == markerDNL, m == 0xc4, m == 0xcc:
			// Application data, comments, restart intervals: skipped.
			// (Restart markers are honoured inside scans only when no
			// interval was declared, which JPEG-LS encoders of DICOM
			// data do not use.)
			if m == markerDRI {
				return unsupported("restart intervals")
			}
			b, err := d.segment()
			if err != nil {
				return err
			}
			// HP's colour transforms (APP8 "mrfx", T.87 has none):
			// decoding without undoing them would give wrong colours.
			if m == 0xe8 && len(b) >= 5 && string(b[:4]) == "mrfx" && b[4] != 0 {
				return unsupported("HP colour transform %d", b[4])
			}
		default:
			return errorf("unexpected marker 0x%02x at byte %d", m, d.pos-2)
		}
	}
}

func (d *decoder) readSOF(b []byte, maxPixels int64) error {
	if d.gotFrame {
		return errorf("second frame header")
	}
	if len(b) < 6 {
		return errorf("frame header of %d bytes", len(b))
	}
	d.prec = int(b[0])
	d.height = int(binary.BigEndian.Uint16(b[1:]))
	d.width = int(binary.BigEndian.Uint16(b[3:]))
	d.ncomp = int(b[5])
	if d.prec < 2 || d.prec > 16 {
		return errorf("sample precision %d", d.prec)
	}
	if d.ncomp < 1 || d.ncomp > maxComponents {
		return unsupported("%d components", d.ncomp)
	}
	if len(b) != 6+3*d.ncomp {
		return errorf("frame header of %d bytes for %d components", len(b), d.ncomp)
	}
	if d.height == 0 {
		return unsupported("height defined by a DNL marker")
	}
	for i := range d.ncomp {
		d.compID[i] = b[6+3*i]
		if b[7+3*i] != 0x11 {
			return unsupported("subsampled component (factors 0x%02x)", b[7+3*i])
		}
	}
	if err := codec.CheckSize(d.width, d.height, d.ncomp, maxPixels); err != nil {
		return err
	}
	d.gotFrame = true
	d.frame = &codec.Frame{Width: d.width, Height: d.height, Components: d.ncomp, Precision: d.prec,
		Pix: make([]uint16, d.width*d.height*d.ncomp)}
	return nil
}

func (d *decoder) readLSE(b []byte) error {
	if len(b) < 1 {
		return errorf("empty LSE segment")
	}
	switch b[0] {
	case 1:
		if len(b) != 11 {
			return errorf("preset parameters of %d bytes", len(b))
		}
		for i := range 5 {
			d.preset[i] = int(binary.BigEndian.Uint16(b[1+2*i:]))
		}
		return nil
	case 2, 3:
		return unsupported("mapping tables")
	case 4:
		return unsupported("oversize image dimensions")
	}
	return errorf("LSE segment of type %d", b[0])
}

func (d *decoder) finish() error {
	if !d.gotFrame {
		return errorf("no frame header")
	}
	for i := range d.ncomp {
		if !d.seen[i] {
			return errorf("component %d has no scan", i)
		}
	}
	return nil
}

// params computes the coding parameters (T.87 C.2.4.1) from the precision,
// NEAR and the presets.
func (d *decoder) params(near int) (params, error) {
	p := params{maxval: 1<<d.prec - 1, near: near, reset: 64}
	if v := d.preset[0]; v != 0 {
		if v >= 1<<d.prec || v < 1 {
			return p, errorf("MAXVAL %d for %d-bit samples", v, d.prec)
		}
		p.maxval = v
	}
	if near > min(255, p.maxval/2) {
		return p, errorf("NEAR %d for MAXVAL %d", near, p.maxval)
	}
	if v := d.preset[4]; v != 0 {
		if v < 3 || v > max(255, p.maxval) {
			return p, errorf("RESET %d", v)
		}
		p.reset = v
	}
	clamp := func(i, j int) int {
		if i > p.maxval || i < j {
			return j
		}
		return i
	}
	const basicT1, basicT2, basicT3 = 3, 7, 21
	if p.maxval >= 128 {
		f := (min(p.maxval, 4095) + 128) / 256
		p.t1 = clamp(f*(basicT1-2)+2+3*near, near+1)
		p.t2 = clamp(f*(basicT2-3)+3+5*near, p.t1)
		p.t3 = clamp(f*(basicT3-4)+4+7*near, p.t2)
	} else {
		f := 256 / (p.maxval + 1)
		p.t1 = clamp(max(2, basicT1/f+3*near), near+1)
		p.t2 = clamp(max(3, basicT2/f+5*near), p.t1)
		p.t3 = clamp(max(4, basicT3/f+7*near), p.t2)
	}
	if v := d.preset[1]; v != 0 {
		if v < near+1 || v > p.maxval {
			return p, errorf("T1 %d", v)
		}
		p.t1 = v
	}
	if v := d.preset[2]; v != 0 {
		if v < p.t1 || v > p.maxval {
			return p, errorf("T2 %d", v)
		}
		p.t2 = v
	}
	if v := d.preset[3]; v != 0 {
		if v < p.t2 || v > p.maxval {
			return p, errorf("T3 %d", v)
		}
		p.t3 = v
	}
	p.rng = (p.maxval+2*near)/(2*near+1) + 1
	p.qbpp = bits.Len(uint(p.rng - 1))
	bpp := max(2, bits.Len(uint(p.maxval)))
	p.limit = 2 * (bpp + max(8, bpp))
	return p, nil
}

func (d *decoder) readScan(b []byte) error {
	if !d.gotFrame {
		return errorf("scan before the frame header")
	}
	if len(b) < 1 {
		return errorf("empty scan header")
	}
	ns := int(b[0])
	if ns < 1 || ns > d.ncomp || len(b) != 1+2*ns+3 {
		return errorf("scan header of %d bytes for %d components", len(b), ns)
	}
	var comps [maxComponents]int
	for i := range ns {
		id := b[1+2*i]
		c := -1
		for j := range d.ncomp {
			if d.compID[j] == id {
				c = j
			}
		}
		if c < 0 || d.seen[c] {
			return errorf("scan component %d unknown or repeated", id)
		}
		for j := range i {
			if comps[j] == c {
				return errorf("scan component %d repeated", id)
			}
		}
		comps[i] = c
		if b[2+2*i] != 0 {
			return unsupported("mapping tables")
		}
	}
	near := int(b[1+2*ns])
	ilv := int(b[2+2*ns])
	if b[3+2*ns]&0x0f != 0 {
		return unsupported("point transform %d", b[3+2*ns]&0x0f)
	}
	if ilv > 2 || (ilv == 0 && ns != 1) {
		return errorf("interleave mode %d with %d components", ilv, ns)
	}
	if ns == 1 {
		ilv = 0 // one component: the modes coincide
	}
	p, err := d.params(near)
	if err != nil {
		return err
	}
	// The entropy-coded data runs to the next marker (0xFF followed by a
	// byte with its high bit set; stuffing keeps such pairs out of it).
	end := d.pos
	for {
		if end+1 >= len(d.data) {
			return errorf("scan data without a closing marker")
		}
		if d.data[end] == 0xff && d.data[end+1] >= 0x80 {
			break
		}
		end++
	}
	s := newScan(d, p, comps[:ns], ilv, d.data[d.pos:end])
	if err := s.decode(); err != nil {
		return err
	}
	for _, c := range comps[:ns] {
		d.seen[c] = true
	}
	d.pos = end
	return nil
}
