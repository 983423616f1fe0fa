package jpeg2000

import (
	"encoding/binary"
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// Marker codes (ITU-T T.800 Annex A).
const (
	mSOC = 0xFF4F
	mCAP = 0xFF50
	mSIZ = 0xFF51
	mCOD = 0xFF52
	mCOC = 0xFF53
	mTLM = 0xFF55
	mPLM = 0xFF57
	mPLT = 0xFF58
	mCPF = 0xFF59
	mQCD = 0xFF5C
	mQCC = 0xFF5D
	mRGN = 0xFF5E
	mPOC = 0xFF5F
	mPPM = 0xFF60
	mPPT = 0xFF61
	mCRG = 0xFF63
	mCOM = 0xFF64
	mSOT = 0xFF90
	mSOP = 0xFF91
	mEPH = 0xFF92
	mSOD = 0xFF93
	mEOC = 0xFFD9
)

// Limits of T.800 that the decoder also relies on for its own bounds.
const (
	maxComponents = 16384
	maxLevels     = 32 // decomposition levels; resolutions are one more
	maxPrecision  = 16 // what codec.Frame carries
	maxBitPlanes  = 30 // magnitude bit-planes a code-block may carry (ROI shift included)
)

// component is one image component as SIZ declares it.
type component struct {
	prec   int  // bits, 1 to 16
	signed bool // two's complement samples
	dx, dy int  // sub-sampling on the reference grid, 1 to 255
}

// siz is the image and tile geometry on the reference grid (T.800 B.2-B.3).
type siz struct {
	x0, y0, x1, y1 int // image area
	tx0, ty0       int // tile grid origin
	tw, th         int // nominal tile size
	ntx, nty       int // tiles across and down
	comps          []component
}

// style holds SPcod/SPcoc: one component's coding style.
type style struct {
	levels   int   // decomposition levels NL (resolutions = NL + 1)
	cbw, cbh int   // code-block size exponents
	cbStyle  byte  // code-block style flags (cb* constants)
	rev      bool  // 5/3 reversible wavelet (else 9/7 irreversible)
	ppx, ppy []int // precinct size exponents per resolution
}

// Code-block style flags (T.800 Table A.19).
const (
	cbBypass  = 0x01 // selective arithmetic coding bypass
	cbReset   = 0x02 // reset context probabilities on each pass
	cbTermAll = 0x04 // termination on each coding pass
	cbVSC     = 0x08 // vertically causal context
	cbPredict = 0x10 // predictable termination
	cbSegSym  = 0x20 // segmentation symbols
	cbHT      = 0x40 // HTJ2K (Part 15) block coder
)

// quant holds SQcd/SQcc and its step sizes.
type quant struct {
	style byte     // 0 none, 1 scalar derived, 2 scalar expounded
	guard int      // guard bits
	steps []uint16 // ε<<11 | μ per sub-band (one entry when derived)
}

// cod is SGcod plus the default coding style.
type cod struct {
	scod   byte // 1: precincts defined, 2: SOP, 4: EPH
	prog   int  // progression order 0..4
	layers int
	mct    int
	st     style
}

// progChange is one POC entry (T.800 A.6.6), bounds half open.
type progChange struct {
	rs, cs int // first resolution and component
	ly     int // layer end
	re, ce int // resolution and component end
	prog   int
}

// params is the coding parameters a header (main or tile) sets.
type params struct {
	cod *cod
	coc map[int]*style // by component
	qcd *quant
	qcc map[int]*quant
	rgn map[int]int // ROI max shift by component
	poc []progChange
}

// reader walks marker segments of a code stream.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) u16() (int, error) {
	if r.pos+2 > len(r.b) {
		return 0, fmt.Errorf("%w: code stream truncated at byte %d", codec.ErrFormat, r.pos)
	}
	v := int(binary.BigEndian.Uint16(r.b[r.pos:]))
	r.pos += 2
	return v, nil
}

// segment reads a marker segment's length and returns its body (after Lxxx).
func (r *reader) segment(marker int) ([]byte, error) {
	l, err := r.u16()
	if err != nil {
		return nil, err
	}
	if l < 2 || r.pos+l-2 > len(r.b) {
		return nil, fmt.Errorf("%w: marker %04X of length %d at byte %d (%d bytes left)", codec.ErrFormat, marker, l, r.pos-4, len(r.b)-r.pos)
	}
	body := r.b[r.pos : r.pos+l-2]
	r.pos += l - 2
	return body, nil
}

func ceilDiv(a, b int) int {
	return (a + b - 1) / b
}

// ceilDivPow2 and floorDivPow2 divide non-negative a by 2^e.
func ceilDivPow2(a, e int) int { return (a + (1 << e) - 1) >> e }

func parseSIZ(b []byte) (*siz, error) {
	if len(b) < 36 {
		return nil, fmt.Errorf("%w: SIZ of %d bytes", codec.ErrFormat, len(b))
	}
	be := binary.BigEndian
	rsiz := be.Uint16(b)
	if rsiz&0x4000 != 0 {
		return nil, fmt.Errorf("%w: high-throughput JPEG 2000 (Part 15) code stream", codec.ErrUnsupported)
	}
	u := func(o int) int { return int(be.Uint32(b[o:])) }
	s := &siz{x1: u(2), y1: u(6), x0: u(10), y0: u(14), tw: u(18), th: u(22), tx0: u(26), ty0: u(30)}
	nc := int(be.Uint16(b[34:]))
	if nc < 1 || nc > maxComponents || len(b) != 36+3*nc {
		return nil, fmt.Errorf("%w: SIZ with %d components in %d bytes", codec.ErrFormat, nc, len(b))
	}
	const lim = 1 << 31
	for _, v := range []int{s.x0, s.y0, s.x1, s.y1, s.tw, s.th, s.tx0, s.ty0} {
		if v >= lim {
			return nil, fmt.Errorf("%w: SIZ coordinate %d", codec.ErrFormat, v)
		}
	}
	if s.x0 >= s.x1 || s.y0 >= s.y1 || s.tw == 0 || s.th == 0 || s.tx0 > s.x0 || s.ty0 > s.y0 ||
		s.tx0+s.tw <= s.x0 || s.ty0+s.th <= s.y0 {
		return nil, fmt.Errorf("%w: SIZ image [%d,%d)×[%d,%d), tiles %d×%d at (%d,%d)", codec.ErrFormat,
			s.x0, s.x1, s.y0, s.y1, s.tw, s.th, s.tx0, s.ty0)
	}
	s.ntx = ceilDiv(s.x1-s.tx0, s.tw)
	s.nty = ceilDiv(s.y1-s.ty0, s.th)
	s.comps = make([]component, nc)
	for i := range s.comps {
		ss, dx, dy := b[36+3*i], int(b[37+3*i]), int(b[38+3*i])
		c := component{prec: int(ss&0x7F) + 1, signed: ss&0x80 != 0, dx: dx, dy: dy}
		if dx == 0 || dy == 0 {
			return nil, fmt.Errorf("%w: component %d sub-sampling %d×%d", codec.ErrFormat, i, dx, dy)
		}
		if c.prec > 38 {
			return nil, fmt.Errorf("%w: component %d precision %d", codec.ErrFormat, i, c.prec)
		}
		if c.prec > maxPrecision {
			return nil, fmt.Errorf("%w: component %d precision %d bits (at most %d)", codec.ErrUnsupported, i, c.prec, maxPrecision)
		}
		s.comps[i] = c
	}
	return s, nil
}

// parseStyle reads SPcod/SPcoc from b; precincts says whether precinct sizes follow.
func parseStyle(b []byte, precincts bool) (style, int, error) {
	var st style
	if len(b) < 5 {
		return st, 0, fmt.Errorf("%w: coding style of %d bytes", codec.ErrFormat, len(b))
	}
	st.levels = int(b[0])
	st.cbw, st.cbh = int(b[1])+2, int(b[2])+2
	st.cbStyle = b[3]
	if st.levels > maxLevels {
		return st, 0, fmt.Errorf("%w: %d decomposition levels", codec.ErrFormat, st.levels)
	}
	if st.cbw > 10 || st.cbh > 10 || st.cbw+st.cbh > 12 {
		return st, 0, fmt.Errorf("%w: code-block size 2^%d×2^%d", codec.ErrFormat, st.cbw, st.cbh)
	}
	if st.cbStyle&cbHT != 0 {
		return st, 0, fmt.Errorf("%w: high-throughput (Part 15) code-blocks", codec.ErrUnsupported)
	}
	if st.cbStyle&0x80 != 0 {
		return st, 0, fmt.Errorf("%w: code-block style %#x", codec.ErrUnsupported, st.cbStyle)
	}
	switch b[4] {
	case 0:
	case 1:
		st.rev = true
	default:
		return st, 0, fmt.Errorf("%w: wavelet transform %d (Part 2)", codec.ErrUnsupported, b[4])
	}
	n := 5
	nres := st.levels + 1
	st.ppx, st.ppy = make([]int, nres), make([]int, nres)
	for r := range nres {
		if !precincts {
			st.ppx[r], st.ppy[r] = 15, 15
			continue
		}
		if n >= len(b) {
			return st, 0, fmt.Errorf("%w: coding style lacks precinct sizes", codec.ErrFormat)
		}
		st.ppx[r], st.ppy[r] = int(b[n]&15), int(b[n]>>4)
		if r > 0 && (st.ppx[r] == 0 || st.ppy[r] == 0) {
			return st, 0, fmt.Errorf("%w: precinct size 2^%d×2^%d at resolution %d", codec.ErrFormat, st.ppx[r], st.ppy[r], r)
		}
		n++
	}
	return st, n, nil
}

func parseCOD(b []byte) (*cod, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: COD of %d bytes", codec.ErrFormat, len(b))
	}
	c := &cod{scod: b[0], prog: int(b[1]), layers: int(binary.BigEndian.Uint16(b[2:])), mct: int(b[4])}
	if c.scod&^7 != 0 {
		return nil, fmt.Errorf("%w: COD coding style %#x", codec.ErrUnsupported, c.scod)
	}
	if c.prog > 4 || c.layers == 0 || c.mct > 1 {
		if c.mct > 1 {
			return nil, fmt.Errorf("%w: multiple component transform %d (Part 2)", codec.ErrUnsupported, c.mct)
		}
		return nil, fmt.Errorf("%w: COD progression %d, %d layers", codec.ErrFormat, c.prog, c.layers)
	}
	st, n, err := parseStyle(b[5:], c.scod&1 != 0)
	if err != nil {
		return nil, err
	}
	if 5+n != len(b) {
		return nil, fmt.Errorf("%w: COD of %d bytes, %d used", codec.ErrFormat, len(b), 5+n)
	}
	c.st = st
	return c, nil
}

// compIndex reads a component index of 1 or 2 bytes (2 when there are more
// than 256 components).
func compIndex(b []byte, nc int) (int, int, error) {
	if nc > 256 {
		if len(b) < 2 {
			return 0, 0, fmt.Errorf("%w: short component index", codec.ErrFormat)
		}
		c := int(binary.BigEndian.Uint16(b))
		if c >= nc {
			return 0, 0, fmt.Errorf("%w: component %d of %d", codec.ErrFormat, c, nc)
		}
		return c, 2, nil
	}
	if len(b) < 1 {
		return 0, 0, fmt.Errorf("%w: short component index", codec.ErrFormat)
	}
	if int(b[0]) >= nc {
		return 0, 0, fmt.Errorf("%w: component %d of %d", codec.ErrFormat, b[0], nc)
	}
	return int(b[0]), 1, nil
}

func parseCOC(b []byte, nc int) (int, *style, error) {
	c, n, err := compIndex(b, nc)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < n+1 {
		return 0, nil, fmt.Errorf("%w: COC of %d bytes", codec.ErrFormat, len(b))
	}
	st, m, err := parseStyle(b[n+1:], b[n]&1 != 0)
	if err != nil {
		return 0, nil, err
	}
	if n+1+m != len(b) {
		return 0, nil, fmt.Errorf("%w: COC of %d bytes, %d used", codec.ErrFormat, len(b), n+1+m)
	}
	return c, &st, nil
}

func parseQuant(b []byte) (*quant, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty quantisation marker", codec.ErrFormat)
	}
	q := &quant{style: b[0] & 0x1F, guard: int(b[0] >> 5)}
	b = b[1:]
	switch q.style {
	case 0:
		if len(b) == 0 || len(b) > 3*maxLevels+1 {
			return nil, fmt.Errorf("%w: %d reversible step sizes", codec.ErrFormat, len(b))
		}
		q.steps = make([]uint16, len(b))
		for i, v := range b {
			q.steps[i] = uint16(v>>3) << 11
		}
	case 1, 2:
		if len(b) == 0 || len(b)%2 != 0 || len(b) > 2*(3*maxLevels+1) || (q.style == 1 && len(b) != 2) {
			return nil, fmt.Errorf("%w: quantisation style %d with %d bytes", codec.ErrFormat, q.style, len(b))
		}
		q.steps = make([]uint16, len(b)/2)
		for i := range q.steps {
			q.steps[i] = binary.BigEndian.Uint16(b[2*i:])
		}
	default:
		return nil, fmt.Errorf("%w: quantisation style %d", codec.ErrUnsupported, q.style)
	}
	return q, nil
}

func parseRGN(b []byte, nc int) (int, int, error) {
	c, n, err := compIndex(b, nc)
	if err != nil {
		return 0, 0, err
	}
	if len(b) != n+2 {
		return 0, 0, fmt.Errorf("%w: RGN of %d bytes", codec.ErrFormat, len(b))
	}
	if b[n] != 0 {
		return 0, 0, fmt.Errorf("%w: ROI style %d", codec.ErrUnsupported, b[n])
	}
	return c, int(b[n+1]), nil
}

func parsePOC(b []byte, nc int) ([]progChange, error) {
	w := 1
	if nc > 256 {
		w = 2
	}
	rec := 5 + 2*w
	if len(b) == 0 || len(b)%rec != 0 {
		return nil, fmt.Errorf("%w: POC of %d bytes", codec.ErrFormat, len(b))
	}
	var out []progChange
	for o := 0; o < len(b); o += rec {
		p := b[o:]
		var pc progChange
		pc.rs = int(p[0])
		if w == 1 {
			pc.cs = int(p[1])
		} else {
			pc.cs = int(binary.BigEndian.Uint16(p[1:]))
		}
		p = p[1+w:]
		pc.ly = int(binary.BigEndian.Uint16(p))
		pc.re = int(p[2])
		if w == 1 {
			pc.ce = int(p[3])
			if pc.ce == 0 {
				pc.ce = 256
			}
		} else {
			pc.ce = int(binary.BigEndian.Uint16(p[3:]))
		}
		pc.prog = int(p[3+w])
		if pc.prog > 4 {
			return nil, fmt.Errorf("%w: POC progression %d", codec.ErrFormat, pc.prog)
		}
		pc.ce = min(pc.ce, nc)
		out = append(out, pc)
	}
	return out, nil
}

// apply reads one coding-parameter marker segment into p. It returns false
// for markers that are not coding parameters.
func (p *params) apply(marker int, body []byte, nc int) (bool, error) {
	switch marker {
	case mCOD:
		c, err := parseCOD(body)
		if err != nil {
			return true, err
		}
		p.cod = c
	case mCOC:
		c, st, err := parseCOC(body, nc)
		if err != nil {
			return true, err
		}
		if p.coc == nil {
			p.coc = map[int]*style{}
		}
		p.coc[c] = st
	case mQCD:
		q, err := parseQuant(body)
		if err != nil {
			return true, err
		}
		p.qcd = q
	case mQCC:
		c, n, err := compIndex(body, nc)
		if err != nil {
			return true, err
		}
		q, err := parseQuant(body[n:])
		if err != nil {
			return true, err
		}
		if p.qcc == nil {
			p.qcc = map[int]*quant{}
		}
		p.qcc[c] = q
	case mRGN:
		c, s, err := parseRGN(body, nc)
		if err != nil {
			return true, err
		}
		if p.rgn == nil {
			p.rgn = map[int]int{}
		}
		p.rgn[c] = s
	case mPOC:
		pcs, err := parsePOC(body, nc)
		if err != nil {
			return true, err
		}
		p.poc = append(p.poc, pcs...)
	default:
		return false, nil
	}
	return true, nil
}

// unsupportedMarker reports Part 2 and later markers the decoder refuses.
func unsupportedMarker(m int) bool {
	switch m {
	case mCAP, mCPF, 0xFF70, 0xFF72, 0xFF73, 0xFF74, 0xFF75, 0xFF76, 0xFF77, 0xFF78, 0xFF79:
		return true
	}
	return false
}
