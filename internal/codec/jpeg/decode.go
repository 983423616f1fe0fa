package jpeg

import (
	"encoding/binary"
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// Markers (T.81 Table B.1).
const (
	mSOF0 = 0xc0 // baseline DCT
	mSOF1 = 0xc1 // extended sequential DCT, Huffman
	mSOF2 = 0xc2 // progressive DCT, Huffman
	mSOF3 = 0xc3 // lossless, Huffman
	mDHT  = 0xc4
	mSOF5 = 0xc5 // first of the hierarchical and arithmetic-coded frames
	mDAC  = 0xcc
	mRST0 = 0xd0
	mRST7 = 0xd7
	mSOI  = 0xd8
	mEOI  = 0xd9
	mSOS  = 0xda
	mDQT  = 0xdb
	mDNL  = 0xdc
	mDRI  = 0xdd
	mDHP  = 0xde
	mEXP  = 0xdf
	mAPP0 = 0xe0
	mCOM  = 0xfe
)

// markerName names a frame marker in errors.
func markerName(m byte) string {
	names := map[byte]string{
		0xc0: "SOF0 (baseline)", 0xc1: "SOF1 (extended sequential)", 0xc2: "SOF2 (progressive)",
		0xc3: "SOF3 (lossless)", 0xc5: "SOF5 (differential sequential)", 0xc6: "SOF6 (differential progressive)",
		0xc7: "SOF7 (differential lossless)", 0xc9: "SOF9 (arithmetic extended)", 0xca: "SOF10 (arithmetic progressive)",
		0xcb: "SOF11 (arithmetic lossless)", 0xcd: "SOF13 (arithmetic differential sequential)",
		0xce: "SOF14 (arithmetic differential progressive)", 0xcf: "SOF15 (arithmetic differential lossless)",
		0xcc: "DAC (arithmetic conditioning)", 0xdc: "DNL (number of lines)", 0xde: "DHP (hierarchical)",
		0xdf: "EXP (hierarchical expansion)",
	}
	if s, ok := names[m]; ok {
		return fmt.Sprintf("marker 0x%02X %s", m, s)
	}
	return fmt.Sprintf("marker 0x%02X", m)
}

// component is one frame component (T.81 B.2.2).
type component struct {
	id     uint8
	h, v   int // sampling factors, 1–4
	tq     int // quantisation table
	done   bool
	pt     int // lossless point transform of the scan that coded it
	width  int // samples per line of the component, ceil(X·h/hmax)
	height int // lines, ceil(Y·v/vmax)
	bw, bh int // blocks per line and per column of the component (DCT)
	plane  []uint16
	stride int // distance between lines in plane
	step   int // distance between samples in plane
	offset int // index in plane of the first sample

	coef     []int16 // progressive: quantised coefficients, 64 per block
	cbw, cbh int     // progressive: blocks per line and column in coef
}

// decoder holds the state of one Decode call.
type decoder struct {
	data      []byte
	pos       int
	maxPixels int64

	sof        byte // frame marker, 0 until seen
	precision  int
	width      int
	height     int
	comps      []component
	hmax, vmax int
	frame      *codec.Frame

	dc, ac     [4]*huffTable
	quant      [4]*[64]uint16
	restart    int // restart interval in MCUs, 0 for none
	br         bitReader
	huffTables [8]*huffTable // storage for dc (0–3) and ac (4–7), made at the first DHT
	quantStore [4][64]uint16
}

// Decode reads one JPEG code stream (SOI to EOI) and returns its samples.
// It refuses, before allocating anything proportional to the image, a frame
// whose width × height × components exceeds maxPixels (codec.ErrTooLarge);
// malformed or truncated data gives codec.ErrFormat and processes this
// package does not implement give codec.ErrUnsupported, both wrapped with
// what was found.
func Decode(data []byte, maxPixels int64) (*codec.Frame, error) {
	return decode(data, maxPixels, false)
}

// decode is Decode; plain selects the reference paths of the entropy
// decoder (byte-at-a-time refill, code-length walk instead of the lookahead
// tables), which the tests compare with the fast ones.
func decode(data []byte, maxPixels int64, plain bool) (*codec.Frame, error) {
	d := &decoder{data: data, maxPixels: maxPixels}
	d.br.plain = plain
	f, err := d.decode()
	if err != nil {
		return nil, fmt.Errorf("jpeg: %w", err)
	}
	return f, nil
}

var errTruncated = fmt.Errorf("%w: truncated JPEG data", codec.ErrFormat)

// nextMarker returns the marker at pos, skipping fill bytes (0xFF).
func (d *decoder) nextMarker() (byte, error) {
	if d.pos >= len(d.data) {
		return 0, errTruncated
	}
	if d.data[d.pos] != 0xff {
		return 0, fmt.Errorf("%w: expected a marker at offset %d, found 0x%02X", codec.ErrFormat, d.pos, d.data[d.pos])
	}
	for d.pos < len(d.data) && d.data[d.pos] == 0xff {
		d.pos++
	}
	if d.pos >= len(d.data) {
		return 0, errTruncated
	}
	m := d.data[d.pos]
	d.pos++
	if m == 0 {
		return 0, fmt.Errorf("%w: stuffed zero byte outside entropy-coded data", codec.ErrFormat)
	}
	return m, nil
}

// segment returns the payload of the marker segment at pos and moves past it.
func (d *decoder) segment(m byte) ([]byte, error) {
	if d.pos+2 > len(d.data) {
		return nil, errTruncated
	}
	n := int(binary.BigEndian.Uint16(d.data[d.pos:]))
	if n < 2 {
		return nil, fmt.Errorf("%w: marker 0x%02X segment length %d", codec.ErrFormat, m, n)
	}
	if d.pos+n > len(d.data) {
		return nil, errTruncated
	}
	p := d.data[d.pos+2 : d.pos+n]
	d.pos += n
	return p, nil
}

func (d *decoder) decode() (*codec.Frame, error) {
	if len(d.data) < 2 || d.data[0] != 0xff || d.data[1] != mSOI {
		return nil, fmt.Errorf("%w: no SOI marker", codec.ErrFormat)
	}
	d.pos = 2
	for {
		m, err := d.nextMarker()
		if err != nil {
			return nil, err
		}
		switch {
		case m == mEOI:
			return d.finish()
		case m == mSOI:
			return nil, fmt.Errorf("%w: second SOI marker", codec.ErrFormat)
		case m >= mRST0 && m <= mRST7:
			return nil, fmt.Errorf("%w: RST%d marker outside a scan", codec.ErrFormat, m-mRST0)
		case m == 0x01 || (m >= 0x02 && m <= 0xbf):
			// TEM and reserved markers: TEM has no length; the rest do.
			if m != 0x01 {
				if _, err := d.segment(m); err != nil {
					return nil, err
				}
			}
		case m == mSOF0 || m == mSOF1 || m == mSOF2 || m == mSOF3:
			p, err := d.segment(m)
			if err != nil {
				return nil, err
			}
			if err := d.parseSOF(m, p); err != nil {
				return nil, err
			}
		case m >= mSOF5 && m <= 0xcf && m != mDHT && m != 0xc8, m == mDHP, m == mEXP, m == mDNL:
			return nil, fmt.Errorf("%w: %s", codec.ErrUnsupported, markerName(m))
		case m == mDHT:
			p, err := d.segment(m)
			if err != nil {
				return nil, err
			}
			if err := d.parseDHT(p); err != nil {
				return nil, err
			}
		case m == mDQT:
			p, err := d.segment(m)
			if err != nil {
				return nil, err
			}
			if err := d.parseDQT(p); err != nil {
				return nil, err
			}
		case m == mDRI:
			p, err := d.segment(m)
			if err != nil {
				return nil, err
			}
			if len(p) != 2 {
				return nil, fmt.Errorf("%w: DRI segment of %d bytes", codec.ErrFormat, len(p))
			}
			d.restart = int(binary.BigEndian.Uint16(p))
		case m == mSOS:
			p, err := d.segment(m)
			if err != nil {
				return nil, err
			}
			if err := d.scan(p); err != nil {
				return nil, err
			}
		default:
			// APPn, COM, JPG (0xC8) and JPGn: skip.
			if _, err := d.segment(m); err != nil {
				return nil, err
			}
		}
	}
}

// parseSOF reads a frame header (T.81 B.2.2).
func (d *decoder) parseSOF(m byte, p []byte) error {
	if d.sof != 0 {
		return fmt.Errorf("%w: second frame header", codec.ErrFormat)
	}
	if len(p) < 6 {
		return fmt.Errorf("%w: frame header of %d bytes", codec.ErrFormat, len(p))
	}
	d.sof = m
	d.precision = int(p[0])
	d.height = int(binary.BigEndian.Uint16(p[1:]))
	d.width = int(binary.BigEndian.Uint16(p[3:]))
	nf := int(p[5])
	switch m {
	case mSOF0:
		if d.precision != 8 {
			return fmt.Errorf("%w: baseline frame with %d-bit samples", codec.ErrFormat, d.precision)
		}
	case mSOF1, mSOF2:
		if d.precision != 8 && d.precision != 12 {
			return fmt.Errorf("%w: %s with %d-bit samples", codec.ErrFormat, markerName(m), d.precision)
		}
	case mSOF3:
		if d.precision < 2 || d.precision > 16 {
			return fmt.Errorf("%w: lossless frame with %d-bit samples", codec.ErrFormat, d.precision)
		}
	}
	if d.height == 0 {
		return fmt.Errorf("%w: frame height 0 (lines defined by DNL)", codec.ErrUnsupported)
	}
	if nf < 1 || nf > 4 {
		if nf == 0 {
			return fmt.Errorf("%w: frame with no components", codec.ErrFormat)
		}
		return fmt.Errorf("%w: frame with %d components (1 to 4 supported)", codec.ErrUnsupported, nf)
	}
	if len(p) != 6+3*nf {
		return fmt.Errorf("%w: frame header of %d bytes for %d components", codec.ErrFormat, len(p), nf)
	}
	if err := codec.CheckSize(d.width, d.height, nf, d.maxPixels); err != nil {
		return err
	}
	d.comps = make([]component, nf)
	for i := range d.comps {
		c := &d.comps[i]
		q := p[6+3*i:]
		c.id = q[0]
		c.h, c.v = int(q[1]>>4), int(q[1]&15)
		c.tq = int(q[2])
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
			return fmt.Errorf("%w: component %d sampling factors %d×%d", codec.ErrFormat, c.id, c.h, c.v)
		}
		if c.tq > 3 || (m == mSOF3 && c.tq != 0) {
			return fmt.Errorf("%w: component %d quantisation table %d", codec.ErrFormat, c.id, c.tq)
		}
		for j := 0; j < i; j++ {
			if d.comps[j].id == c.id {
				return fmt.Errorf("%w: component identifier %d repeated", codec.ErrFormat, c.id)
			}
		}
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	for i := range d.comps {
		c := &d.comps[i]
		c.width = (d.width*c.h + d.hmax - 1) / d.hmax
		c.height = (d.height*c.v + d.vmax - 1) / d.vmax
		c.bw = (c.width + 7) / 8
		c.bh = (c.height + 7) / 8
	}
	if m == mSOF3 && nf > 1 {
		for _, c := range d.comps {
			if c.h != d.hmax || c.v != d.vmax {
				return fmt.Errorf("%w: lossless frame with subsampled components", codec.ErrUnsupported)
			}
		}
	}
	return nil
}

// parseDHT reads Huffman tables (T.81 B.2.4.2).
func (d *decoder) parseDHT(p []byte) error {
	for len(p) > 0 {
		if len(p) < 17 {
			return fmt.Errorf("%w: short DHT segment", codec.ErrFormat)
		}
		tc, th := p[0]>>4, int(p[0]&15)
		if tc > 1 || th > 3 {
			return fmt.Errorf("%w: Huffman table class %d, destination %d", codec.ErrFormat, tc, th)
		}
		var bits [16]uint8
		copy(bits[:], p[1:17])
		n := 0
		for _, b := range bits {
			n += int(b)
		}
		if n > 256 || len(p) < 17+n {
			return fmt.Errorf("%w: Huffman table with %d codes in a %d-byte segment", codec.ErrFormat, n, len(p))
		}
		t := d.huffTables[int(tc)*4+th]
		if t == nil {
			t = new(huffTable)
			d.huffTables[int(tc)*4+th] = t
		}
		// The lookahead is built at the first scan that uses the table:
		// a lossless frame's folds in the extra bits, and a DHT may come
		// before the frame header.
		t.spec, t.specVals, t.built = bits, p[17:17+n], false
		if err := t.check(); err != nil {
			return err
		}
		if tc == 0 {
			d.dc[th] = t
		} else {
			d.ac[th] = t
		}
		p = p[17+n:]
	}
	return nil
}

// parseDQT reads quantisation tables (T.81 B.2.4.1), stored in natural order.
func (d *decoder) parseDQT(p []byte) error {
	for len(p) > 0 {
		pq, tq := p[0]>>4, int(p[0]&15)
		if pq > 1 || tq > 3 {
			return fmt.Errorf("%w: quantisation table precision %d, destination %d", codec.ErrFormat, pq, tq)
		}
		n := 64 * (1 + int(pq))
		if len(p) < 1+n {
			return fmt.Errorf("%w: short DQT segment", codec.ErrFormat)
		}
		q := &d.quantStore[tq]
		for i := 0; i < 64; i++ {
			v := uint16(p[1+i])
			if pq == 1 {
				v = binary.BigEndian.Uint16(p[1+2*i:])
			}
			q[zigzag[i]] = v
		}
		d.quant[tq] = q
		p = p[1+n:]
	}
	return nil
}

// scanComp is one component of a scan.
type scanComp struct {
	c      *component
	dc, ac *huffTable
}

// scan reads a scan header (T.81 B.2.3) and decodes the scan's data.
func (d *decoder) scan(p []byte) error {
	if d.sof == 0 {
		return fmt.Errorf("%w: scan before the frame header", codec.ErrFormat)
	}
	if len(p) < 1 {
		return fmt.Errorf("%w: empty scan header", codec.ErrFormat)
	}
	ns := int(p[0])
	if ns < 1 || ns > 4 || len(p) != 4+2*ns {
		return fmt.Errorf("%w: scan header of %d bytes for %d components", codec.ErrFormat, len(p), ns)
	}
	var sc [4]scanComp
	last := -1
	for i := 0; i < ns; i++ {
		id, tables := p[1+2*i], p[2+2*i]
		ci := -1
		for j := range d.comps {
			if d.comps[j].id == id {
				ci = j
			}
		}
		// Scan components appear in frame order, each once (B.2.3).
		if ci < 0 || ci <= last {
			return fmt.Errorf("%w: scan component %d not in the frame or out of order", codec.ErrFormat, id)
		}
		last = ci
		c := &d.comps[ci]
		if c.done && d.sof != mSOF2 {
			return fmt.Errorf("%w: component %d coded twice", codec.ErrFormat, id)
		}
		td, ta := int(tables>>4), int(tables&15)
		if td > 3 || ta > 3 {
			return fmt.Errorf("%w: scan Huffman tables %d/%d", codec.ErrFormat, td, ta)
		}
		sc[i] = scanComp{c: c, dc: d.dc[td], ac: d.ac[ta]}
		// Progressive scans use only the DC (Ss = 0) or the AC tables.
		// Progressive scans use the DC tables for a first DC pass (Ss = 0,
		// Ah = 0), the AC tables for an AC band, and none to refine DC.
		needDC, needAC := true, d.sof != mSOF3
		if d.sof == mSOF2 {
			acScan, refine := p[1+2*ns] != 0, p[3+2*ns]>>4 != 0
			needDC, needAC = !acScan && !refine, acScan
		}
		if !needDC {
			sc[i].dc = nil
		}
		if !needAC {
			sc[i].ac = nil
		}
		if (needDC && sc[i].dc == nil) || (needAC && sc[i].ac == nil) {
			return fmt.Errorf("%w: scan uses an undefined Huffman table", codec.ErrFormat)
		}
		if sc[i].dc != nil {
			if err := sc[i].dc.ready(d.sof == mSOF3 && !d.br.plain); err != nil {
				return err
			}
		}
		if d.sof != mSOF3 && sc[i].ac != nil {
			if err := sc[i].ac.ready(false); err != nil {
				return err
			}
		}
	}
	ss, se, ah, al := int(p[1+2*ns]), int(p[2+2*ns]), int(p[3+2*ns]>>4), int(p[3+2*ns]&15)
	if ns > 1 {
		blocks := 0
		for _, s := range sc[:ns] {
			blocks += s.c.h * s.c.v
		}
		if blocks > 10 {
			return fmt.Errorf("%w: interleaved scan with %d data units per MCU", codec.ErrFormat, blocks)
		}
	}
	if err := d.allocate(); err != nil {
		return err
	}
	if d.sof == mSOF3 {
		if ss < 1 || ss > 7 || se != 0 || ah != 0 || al >= d.precision {
			return fmt.Errorf("%w: lossless scan with predictor %d, Se %d, Ah %d, point transform %d", codec.ErrFormat, ss, se, ah, al)
		}
		for _, s := range sc[:ns] {
			if s.dc.maxVal > 16 {
				return fmt.Errorf("%w: lossless Huffman table with category %d", codec.ErrFormat, s.dc.maxVal)
			}
		}
		err := d.lossless(sc[:ns], ss, al)
		if err != nil {
			return err
		}
	} else {
		if d.sof != mSOF2 && (ss != 0 || se != 63 || ah != 0 || al != 0) {
			return fmt.Errorf("%w: sequential scan with Ss %d, Se %d, Ah %d, Al %d", codec.ErrFormat, ss, se, ah, al)
		}
		maxDC, maxAC := uint8(11), 10
		if d.precision == 12 {
			maxDC, maxAC = 15, 14
		}
		for _, s := range sc[:ns] {
			if d.sof != mSOF2 && d.quant[s.c.tq] == nil {
				return fmt.Errorf("%w: component %d uses undefined quantisation table %d", codec.ErrFormat, s.c.id, s.c.tq)
			}
			if s.dc != nil && s.dc.maxVal > maxDC {
				return fmt.Errorf("%w: DC Huffman table with category %d", codec.ErrFormat, s.dc.maxVal)
			}
			if s.ac != nil {
				for _, v := range s.ac.vals[:s.ac.nvals] {
					if int(v&15) > maxAC {
						return fmt.Errorf("%w: AC Huffman table with size %d", codec.ErrFormat, v&15)
					}
				}
			}
		}
		var err error
		if d.sof == mSOF2 {
			err = d.progressive(sc[:ns], ss, se, ah, al)
		} else {
			err = d.sequential(sc[:ns])
		}
		if err != nil {
			return err
		}
	}
	for _, s := range sc[:ns] {
		s.c.done = true
		if d.sof == mSOF3 {
			s.c.pt = al
		}
	}
	return nil
}

// allocate makes the frame and the component planes at the first scan.
func (d *decoder) allocate() error {
	if d.frame != nil {
		return nil
	}
	if d.sof == mSOF2 {
		if err := d.allocCoefficients(); err != nil {
			return err
		}
	}
	nf := len(d.comps)
	f := &codec.Frame{Width: d.width, Height: d.height, Components: nf, Precision: d.precision}
	f.Pix = make([]uint16, d.width*d.height*nf)
	d.frame = f
	for i := range d.comps {
		c := &d.comps[i]
		if c.width == d.width && c.height == d.height {
			// Full-size components live in the frame, interleaved.
			c.plane, c.stride, c.step, c.offset = f.Pix, d.width*nf, nf, i
		} else {
			// Subsampled (DCT only): a plane of its own, upsampled in finish.
			c.plane, c.stride, c.step, c.offset = make([]uint16, c.width*c.height), c.width, 1, 0
		}
	}
	return nil
}

// finish checks that every component was coded and completes the frame.
func (d *decoder) finish() (*codec.Frame, error) {
	if d.sof == 0 {
		return nil, fmt.Errorf("%w: no frame header before EOI", codec.ErrFormat)
	}
	for i := range d.comps {
		if !d.comps[i].done {
			return nil, fmt.Errorf("%w: component %d has no scan", codec.ErrFormat, d.comps[i].id)
		}
	}
	if d.sof == mSOF2 {
		if err := d.finishProgressive(); err != nil {
			return nil, err
		}
	}
	f := d.frame
	nf := len(d.comps)
	for i := range d.comps {
		c := &d.comps[i]
		if d.sof == mSOF3 && (c.pt > 0 || d.precision < 16) {
			// Scale up by the point transform; keep Precision bits of
			// what corrupt data may have pushed past them (the
			// reconstruction is modulo 2^16).
			mask := uint16(1<<d.precision - 1)
			for j := i; j < len(f.Pix); j += nf {
				f.Pix[j] = f.Pix[j] << c.pt & mask
			}
		}
		if c.step == 1 && nf >= 1 && (c.width != d.width || c.height != d.height) {
			upsample(f, i, c, d.hmax, d.vmax)
		}
	}
	return f, nil
}

// readRestart consumes the RSTn marker expected after a restart interval and
// resets the bit reader behind it.
func (d *decoder) readRestart(n int) error {
	if d.br.overrun() {
		return errTruncated
	}
	// The fill bits of the interval's last byte go with the reader's
	// buffer; bytes the decoder did not need are skipped, as libjpeg does.
	pos, err := d.skipToMarker(d.br.pos)
	if err != nil {
		return err
	}
	if d.data[pos+1] != byte(mRST0+n&7) {
		return fmt.Errorf("%w: expected RST%d at offset %d, found marker 0x%02X", codec.ErrFormat, n&7, pos, d.data[pos+1])
	}
	d.br.reset(d.data, pos+2)
	return nil
}

// endScan checks the scan's data was all there and moves to the marker
// after it.
func (d *decoder) endScan() error {
	if d.br.overrun() {
		return errTruncated
	}
	pos, err := d.skipToMarker(d.br.pos)
	if err != nil {
		return err
	}
	d.pos = pos
	return nil
}

// skipToMarker returns the offset of the first marker at or after pos: a
// 0xFF followed by neither a stuffed zero nor another 0xFF (fill).
func (d *decoder) skipToMarker(pos int) (int, error) {
	for {
		if pos+1 >= len(d.data) {
			return 0, errTruncated
		}
		if d.data[pos] == 0xff {
			switch d.data[pos+1] {
			case 0:
				pos += 2
				continue
			case 0xff:
				pos++
				continue
			}
			return pos, nil
		}
		pos++
	}
}
