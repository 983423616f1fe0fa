package jpeg2000

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/radgen/radgen/internal/codec"
)

// Decode reads one JPEG 2000 frame: a raw code stream (starting with the SOC
// and SIZ markers) or a JP2 file whose contiguous code stream box holds one.
// It refuses, before allocating anything proportional to the image, a frame
// of more than maxPixels samples (width × height × components; maxPixels <= 0
// means no limit beyond the address space). Errors wrap codec.ErrFormat,
// codec.ErrUnsupported or codec.ErrTooLarge.
func Decode(data []byte, maxPixels int64) (*codec.Frame, error) {
	cs, err := codestream(data)
	if err != nil {
		return nil, err
	}
	d, err := parseMain(cs, maxPixels)
	if err != nil {
		return nil, err
	}
	if err := d.readTiles(); err != nil {
		return nil, err
	}
	return d.decode()
}

var jp2Signature = []byte{0, 0, 0, 12, 'j', 'P', ' ', ' ', 0x0D, 0x0A, 0x87, 0x0A}

// codestream returns the J2K code stream in data, unwrapping a JP2 file.
func codestream(data []byte) ([]byte, error) {
	if len(data) >= 4 && data[0] == 0xFF && data[1] == 0x4F && data[2] == 0xFF && data[3] == 0x51 {
		return data, nil
	}
	if !bytes.HasPrefix(data, jp2Signature) {
		return nil, fmt.Errorf("%w: neither a JPEG 2000 code stream (FF4F FF51) nor a JP2 file", codec.ErrFormat)
	}
	b := data
	for len(b) >= 8 {
		l := uint64(binary.BigEndian.Uint32(b))
		typ := string(b[4:8])
		hdr := uint64(8)
		switch l {
		case 0:
			l = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return nil, fmt.Errorf("%w: JP2 box %q truncated", codec.ErrFormat, typ)
			}
			l, hdr = binary.BigEndian.Uint64(b[8:]), 16
		}
		if l < hdr || l > uint64(len(b)) {
			return nil, fmt.Errorf("%w: JP2 box %q of %d bytes with %d left", codec.ErrFormat, typ, l, len(b))
		}
		body := b[hdr:l]
		switch typ {
		case "jp2h":
			if err := checkJP2Header(body); err != nil {
				return nil, err
			}
		case "jp2c":
			if len(body) < 4 || body[0] != 0xFF || body[1] != 0x4F || body[2] != 0xFF || body[3] != 0x51 {
				return nil, fmt.Errorf("%w: JP2 code stream box does not start with SOC, SIZ", codec.ErrFormat)
			}
			return body, nil
		}
		b = b[l:]
	}
	return nil, fmt.Errorf("%w: JP2 file without a code stream box", codec.ErrFormat)
}

// checkJP2Header refuses a palette or component mapping, which would change
// what the decoded samples mean.
func checkJP2Header(b []byte) error {
	for len(b) >= 8 {
		l := int64(binary.BigEndian.Uint32(b))
		typ := string(b[4:8])
		if l == 0 {
			l = int64(len(b))
		}
		if l < 8 || l > int64(len(b)) {
			return fmt.Errorf("%w: JP2 header box %q of %d bytes", codec.ErrFormat, typ, l)
		}
		if typ == "pclr" || typ == "cmap" {
			return fmt.Errorf("%w: JP2 %q box (palette images)", codec.ErrUnsupported, typ)
		}
		b = b[l:]
	}
	return nil
}

// decoder holds a parsed code stream.
type decoder struct {
	cs        []byte
	siz       *siz
	main      params
	ppm       [][]byte // PPM bodies (after Zppm) in order
	ppmStream []byte   // their concatenation, consumed per tile-part
	tiles     []*tileData
	maxPixels int64
	rec       func(sop, hdr, body, end int) // see packetStream.rec
}

// tileData gathers a tile's tile-parts.
type tileData struct {
	p      params   // tile header parameters (first tile-part)
	bodies [][]byte // tile-part bodies in order
	hdrs   [][]byte // packed packet headers (PPM chunks or PPT bodies)
	parts  int
}

func parseMain(cs []byte, maxPixels int64) (*decoder, error) {
	r := &reader{b: cs, pos: 2}
	m, _ := r.u16()
	if m != mSIZ {
		return nil, fmt.Errorf("%w: SIZ must follow SOC", codec.ErrFormat)
	}
	body, err := r.segment(m)
	if err != nil {
		return nil, err
	}
	s, err := parseSIZ(body)
	if err != nil {
		return nil, err
	}
	d := &decoder{cs: cs, siz: s, maxPixels: maxPixels}
	c0 := s.comps[0]
	w0, h0 := ceilDiv(s.x1, c0.dx)-ceilDiv(s.x0, c0.dx), ceilDiv(s.y1, c0.dy)-ceilDiv(s.y0, c0.dy)
	if err := codec.CheckSize(w0, h0, len(s.comps), maxPixels); err != nil {
		return nil, err
	}
	// Every component is stored too; bound their total by the same limit.
	var total int64
	for _, c := range s.comps {
		total += int64(ceilDiv(s.x1, c.dx)-ceilDiv(s.x0, c.dx)) * int64(ceilDiv(s.y1, c.dy)-ceilDiv(s.y0, c.dy))
	}
	if err := codec.CheckSize(int(min(total, 1<<40)), 1, 1, maxPixels); err != nil {
		return nil, err
	}
	nt := int64(s.ntx) * int64(s.nty)
	// Every tile needs at least an SOT and an SOD marker (14 bytes).
	if nt > int64(len(cs))/14+1 {
		return nil, fmt.Errorf("%w: %d tiles in a %d-byte code stream", codec.ErrFormat, nt, len(cs))
	}
	for {
		m, err := r.u16()
		if err != nil {
			return nil, err
		}
		if m == mSOT {
			r.pos -= 2
			break
		}
		if m < 0xFF00 {
			return nil, fmt.Errorf("%w: %04X where a marker was expected in the main header", codec.ErrFormat, m)
		}
		if m >= 0xFF30 && m <= 0xFF3F {
			continue
		}
		if unsupportedMarker(m) {
			return nil, fmt.Errorf("%w: marker %04X (JPEG 2000 Part 2 or later)", codec.ErrUnsupported, m)
		}
		body, err := r.segment(m)
		if err != nil {
			return nil, err
		}
		ok, err := d.main.apply(m, body, len(s.comps))
		if err != nil {
			return nil, fmt.Errorf("main header: %w", err)
		}
		if ok {
			continue
		}
		switch m {
		case mPPM:
			if len(body) < 1 {
				return nil, fmt.Errorf("%w: empty PPM", codec.ErrFormat)
			}
			d.ppm = append(d.ppm, body[1:])
		case mSOD, mEOC, mSOC, mSIZ:
			return nil, fmt.Errorf("%w: marker %04X in the main header", codec.ErrFormat, m)
		}
		// TLM, PLM, CRG, COM and unknown markers are skipped.
	}
	if d.main.cod == nil || d.main.qcd == nil {
		return nil, fmt.Errorf("%w: main header lacks COD or QCD", codec.ErrFormat)
	}
	d.tiles = make([]*tileData, nt)
	if len(d.ppm) > 0 {
		d.ppmStream = bytes.Join(d.ppm, nil)
	}
	d.cs = cs[r.pos:]
	return d, nil
}

// readTiles walks the tile-parts.
func (d *decoder) readTiles() error {
	b := d.cs
	nc := len(d.siz.comps)
	ppm := d.ppmStream
	for {
		if len(b) < 2 {
			break
		}
		m := int(binary.BigEndian.Uint16(b))
		if m == mEOC {
			break
		}
		if m != mSOT {
			return fmt.Errorf("%w: marker %04X where SOT was expected", codec.ErrFormat, m)
		}
		if len(b) < 12 || binary.BigEndian.Uint16(b[2:]) != 10 {
			return fmt.Errorf("%w: SOT truncated or of wrong length", codec.ErrFormat)
		}
		ti := int(binary.BigEndian.Uint16(b[4:]))
		psot := int64(binary.BigEndian.Uint32(b[6:]))
		if ti >= len(d.tiles) {
			return fmt.Errorf("%w: tile %d of %d", codec.ErrFormat, ti, len(d.tiles))
		}
		end := int64(len(b))
		if psot != 0 {
			if psot < 14 || psot > int64(len(b)) {
				return fmt.Errorf("%w: tile-part of %d bytes with %d left", codec.ErrFormat, psot, len(b))
			}
			end = psot
		} else if end >= 2 && binary.BigEndian.Uint16(b[end-2:]) == mEOC {
			end -= 2
		}
		t := d.tiles[ti]
		if t == nil {
			t = &tileData{}
			d.tiles[ti] = t
		}
		first := t.parts == 0
		t.parts++
		r := &reader{b: b[:end], pos: 12}
		for {
			m, err := r.u16()
			if err != nil {
				return fmt.Errorf("tile %d: %w", ti, err)
			}
			if m == mSOD {
				break
			}
			if m < 0xFF00 {
				return fmt.Errorf("%w: tile %d: %04X where a marker was expected", codec.ErrFormat, ti, m)
			}
			if m >= 0xFF30 && m <= 0xFF3F {
				continue
			}
			if unsupportedMarker(m) {
				return fmt.Errorf("%w: marker %04X (JPEG 2000 Part 2 or later)", codec.ErrUnsupported, m)
			}
			body, err := r.segment(m)
			if err != nil {
				return fmt.Errorf("tile %d: %w", ti, err)
			}
			switch m {
			case mCOD, mCOC, mQCD, mQCC, mRGN:
				if !first {
					return fmt.Errorf("%w: tile %d: marker %04X outside the first tile-part", codec.ErrFormat, ti, m)
				}
				fallthrough
			case mPOC:
				if _, err := t.p.apply(m, body, nc); err != nil {
					return fmt.Errorf("tile %d: %w", ti, err)
				}
			case mPPT:
				if len(d.ppm) > 0 {
					return fmt.Errorf("%w: both PPM and PPT", codec.ErrFormat)
				}
				if len(body) < 1 {
					return fmt.Errorf("%w: empty PPT", codec.ErrFormat)
				}
				t.hdrs = append(t.hdrs, body[1:])
			case mSOT, mSIZ, mSOC, mEOC, mPPM:
				return fmt.Errorf("%w: marker %04X in a tile-part header", codec.ErrFormat, m)
			}
		}
		if len(d.ppm) > 0 {
			if len(ppm) < 4 {
				return fmt.Errorf("%w: PPM data exhausted at tile %d", codec.ErrFormat, ti)
			}
			n := int64(binary.BigEndian.Uint32(ppm))
			if n > int64(len(ppm)-4) {
				return fmt.Errorf("%w: PPM chunk of %d bytes with %d left", codec.ErrFormat, n, len(ppm)-4)
			}
			t.hdrs = append(t.hdrs, ppm[4:4+n])
			ppm = ppm[4+n:]
		}
		t.bodies = append(t.bodies, b[r.pos:end])
		b = b[end:]
	}
	for i, t := range d.tiles {
		if t == nil {
			return fmt.Errorf("%w: tile %d missing", codec.ErrFormat, i)
		}
	}
	return nil
}

// decode decodes every tile into the frame.
func (d *decoder) decode() (*codec.Frame, error) {
	s := d.siz
	c0 := s.comps[0]
	for _, c := range s.comps[1:] {
		if c.signed != c0.signed || c.prec != c0.prec {
			return nil, fmt.Errorf("%w: components of differing precision or signedness", codec.ErrUnsupported)
		}
	}
	var f *codec.Frame
	ws := newWorkspace()
	for i, t := range d.tiles {
		if err := d.decodeTile(ws, i, t, &f); err != nil {
			return nil, fmt.Errorf("tile %d: %w", i, err)
		}
		d.tiles[i] = nil
	}
	if f == nil {
		return nil, fmt.Errorf("%w: no tiles", codec.ErrFormat)
	}
	return f, nil
}

// newFrame allocates the output frame, of component 0's size.
func (d *decoder) newFrame() *codec.Frame {
	s := d.siz
	c0 := s.comps[0]
	w := ceilDiv(s.x1, c0.dx) - ceilDiv(s.x0, c0.dx)
	h := ceilDiv(s.y1, c0.dy) - ceilDiv(s.y0, c0.dy)
	return &codec.Frame{Width: w, Height: h, Components: len(s.comps), Precision: c0.prec, Signed: c0.signed,
		Pix: make([]uint16, w*h*len(s.comps))}
}

// compParams resolves the coding parameters of a tile's component c
// (tile COC > tile COD > main COC > main COD; likewise for quantisation).
func (d *decoder) compParams(t *tileData, c int) (*style, *quant, int) {
	var st *style
	switch {
	case t.p.coc[c] != nil:
		st = t.p.coc[c]
	case t.p.cod != nil:
		st = &t.p.cod.st
	case d.main.coc[c] != nil:
		st = d.main.coc[c]
	default:
		st = &d.main.cod.st
	}
	var q *quant
	switch {
	case t.p.qcc[c] != nil:
		q = t.p.qcc[c]
	case t.p.qcd != nil:
		q = t.p.qcd
	case d.main.qcc[c] != nil:
		q = d.main.qcc[c]
	default:
		q = d.main.qcd
	}
	roi, ok := t.p.rgn[c]
	if !ok {
		roi = d.main.rgn[c]
	}
	return st, q, roi
}

// writeTile applies the inverse component transform and DC level shift to
// the tile's components and stores them in f.
func (d *decoder) writeTile(ws *workspace, tl *tile, f *codec.Frame) error {
	s := d.siz
	nc := len(s.comps)
	if tl.mct {
		if nc < 3 {
			return fmt.Errorf("%w: component transform with %d components", codec.ErrFormat, nc)
		}
		a, b, c := &tl.comps[0], &tl.comps[1], &tl.comps[2]
		if a.w != b.w || a.w != c.w || a.h != b.h || a.h != c.h || a.rev != b.rev || a.rev != c.rev {
			return fmt.Errorf("%w: component transform over components of differing size or wavelet", codec.ErrFormat)
		}
		n := a.w * a.h
		if a.rev {
			y, u, v := a.coefI[:n], b.coefI[:n], c.coefI[:n]
			for i := range n {
				g := y[i] - (u[i]+v[i])>>2
				y[i], u[i], v[i] = v[i]+g, g, u[i]+g
			}
		} else {
			y, u, v := a.coefF[:n], b.coefF[:n], c.coefF[:n]
			for i := range n {
				Y, U, V := y[i], u[i], v[i]
				y[i] = Y + float32(1.402*V)
				u[i] = Y - float32(0.34413*U) - float32(0.71414*V)
				v[i] = Y + float32(1.772*U)
			}
		}
	}
	c0 := s.comps[0]
	ox, oy := ceilDiv(s.x0, c0.dx), ceilDiv(s.y0, c0.dy)
	for ci := range tl.comps {
		tc := &tl.comps[ci]
		comp := s.comps[ci]
		if tc.w == 0 || tc.h == 0 {
			continue
		}
		var lo, hi, shift int32
		if comp.signed {
			lo, hi = -(1 << (comp.prec - 1)), 1<<(comp.prec-1)-1
		} else {
			lo, hi, shift = 0, 1<<comp.prec-1, 1<<(comp.prec-1)
		}
		mask := uint16(1<<comp.prec - 1)
		same := comp.dx == c0.dx && comp.dy == c0.dy
		// Output rows and columns (in component 0's grid) this tile covers.
		var fx0, fx1, fy0, fy1 int
		if same {
			fx0, fx1 = tc.x0-ox, tc.x1-ox
			fy0, fy1 = tc.y0-oy, tc.y1-oy
		} else {
			// Reference-grid span of the tile-component's samples, in
			// component 0's grid: nearest-neighbour replication.
			fx0 = max(ceilDiv(tc.x0*comp.dx, c0.dx)-ox, 0)
			fx1 = min(ceilDiv(tc.x1*comp.dx, c0.dx)-ox, f.Width)
			fy0 = max(ceilDiv(tc.y0*comp.dy, c0.dy)-oy, 0)
			fy1 = min(ceilDiv(tc.y1*comp.dy, c0.dy)-oy, f.Height)
		}
		rows := fy1 - fy0
		per := max(64, (rows+ws.workers-1)/ws.workers)
		ws.parallel((rows+per-1)/per, func(_, k int) {
			for fy := fy0 + k*per; fy < min(fy1, fy0+(k+1)*per); fy++ {
				sy := fy - fy0
				if !same {
					sy = min(max((fy+oy)*c0.dy/comp.dy-tc.y0, 0), tc.h-1)
				}
				dst := f.Pix[(fy*f.Width)*nc+ci:]
				for fx := fx0; fx < fx1; fx++ {
					sx := fx - fx0
					if !same {
						sx = min(max((fx+ox)*c0.dx/comp.dx-tc.x0, 0), tc.w-1)
					}
					var v int32
					if tc.rev {
						v = tc.coefI[sy*tc.w+sx]
					} else {
						x := tc.coefF[sy*tc.w+sx]
						if x != x {
							x = 0
						}
						x = float32(math.RoundToEven(float64(x)))
						v = int32(max(min(x, 1<<30), -1<<30))
					}
					v += shift
					v = max(lo, min(hi, v))
					dst[fx*nc] = uint16(v) & mask
				}
			}
		})
	}
	return nil
}
