package jpeg2000

import "math/bits"

// mqState is one row of the MQ coder's probability estimation table (T.800
// Table C.2), indexed by state<<1 | MPS.
type mqState struct {
	qe         uint32
	qe16       uint32 // qe << 16
	mps        uint32
	nmps, nlps uint8 // next index after an MPS or LPS
}

var mqStates = func() [256]mqState {
	tab := [47]struct {
		qe         uint32
		nmps, nlps uint8
		sw         uint8
	}{
		{0x5601, 1, 1, 1}, {0x3401, 2, 6, 0}, {0x1801, 3, 9, 0}, {0x0AC1, 4, 12, 0},
		{0x0521, 5, 29, 0}, {0x0221, 38, 33, 0}, {0x5601, 7, 6, 1}, {0x5401, 8, 14, 0},
		{0x4801, 9, 14, 0}, {0x3801, 10, 14, 0}, {0x3001, 11, 17, 0}, {0x2401, 12, 18, 0},
		{0x1C01, 13, 20, 0}, {0x1601, 29, 21, 0}, {0x5601, 15, 14, 1}, {0x5401, 16, 14, 0},
		{0x5101, 17, 15, 0}, {0x4801, 18, 16, 0}, {0x3801, 19, 17, 0}, {0x3401, 20, 18, 0},
		{0x3001, 21, 19, 0}, {0x2801, 22, 19, 0}, {0x2401, 23, 20, 0}, {0x2201, 24, 21, 0},
		{0x1C01, 25, 22, 0}, {0x1801, 26, 23, 0}, {0x1601, 27, 24, 0}, {0x1401, 28, 25, 0},
		{0x1201, 29, 26, 0}, {0x1101, 30, 27, 0}, {0x0AC1, 31, 28, 0}, {0x09C1, 32, 29, 0},
		{0x08A1, 33, 30, 0}, {0x0521, 34, 31, 0}, {0x0441, 35, 32, 0}, {0x02A1, 36, 33, 0},
		{0x0221, 37, 34, 0}, {0x0141, 38, 35, 0}, {0x0111, 39, 36, 0}, {0x0085, 40, 37, 0},
		{0x0049, 41, 38, 0}, {0x0025, 42, 39, 0}, {0x0015, 43, 40, 0}, {0x0009, 44, 41, 0},
		{0x0005, 45, 42, 0}, {0x0001, 45, 43, 0}, {0x5601, 46, 46, 0},
	}
	var s [256]mqState
	for i, t := range tab {
		for mps := range uint8(2) {
			s[i<<1|int(mps)] = mqState{
				qe:   t.qe,
				qe16: t.qe << 16,
				mps:  uint32(mps),
				nmps: t.nmps<<1 | mps,
				nlps: t.nlps<<1 | (mps ^ t.sw),
			}
		}
	}
	return s
}()

// Contexts (T.800 Table D.7 order): 0-8 zero coding, 9-13 sign, 14-16
// magnitude refinement, 17 run length, 18 uniform.
const (
	ctxZC  = 0
	ctxSC  = 9
	ctxMR  = 14
	ctxRL  = 17
	ctxUNI = 18
	numCtx = 19
)

// mqDecoder is the MQ arithmetic decoder (T.800 C.3) over one codeword
// segment; bytes past the end read as 0xFF.
type mqDecoder struct {
	data []byte
	pos  int
	c    uint32
	a    uint32
	ct   uint32
	cx   [32]uint8 // contexts 0..numCtx-1 used
}

func (m *mqDecoder) resetContexts() {
	for i := range m.cx {
		m.cx[i] = 0
	}
	m.cx[ctxZC] = 4 << 1
	m.cx[ctxRL] = 3 << 1
	m.cx[ctxUNI] = 46 << 1
}

func (m *mqDecoder) byteAt(i int) uint32 {
	if i < len(m.data) {
		return uint32(m.data[i])
	}
	return 0xFF
}

func (m *mqDecoder) init(data []byte) {
	m.data, m.pos = data, 0
	m.c = m.byteAt(0) << 16
	m.bytein()
	m.c <<= 7
	m.ct -= 7
	m.a = 0x8000
}

func (m *mqDecoder) bytein() {
	if m.byteAt(m.pos) == 0xFF {
		if b := m.byteAt(m.pos + 1); b > 0x8F {
			m.c += 0xFF00
			m.ct = 8
		} else {
			m.pos++
			m.c += b << 9
			m.ct = 7
		}
	} else {
		m.pos++
		m.c += m.byteAt(m.pos) << 8
		m.ct = 8
	}
}

// decode returns the next decision in context cx. The common case (an MPS
// without renormalisation) is small enough to inline; the rest is in
// decodeSlow.
func (m *mqDecoder) decode(cx uint8) uint32 {
	s := &mqStates[m.cx[cx&31]]
	m.a -= s.qe
	if m.a&0x8000 != 0 && m.c >= s.qe16 {
		m.c -= s.qe16
		return s.mps
	}
	return m.decodeSlow(cx, s)
}

// exchangeMPS is the conditional MPS exchange (T.800 Figure C.16) for
// context cx after an MPS path that left a < 0x8000; the caller
// renormalises.
func (m *mqDecoder) exchangeMPS(cx uint8, s *mqState, a uint32) uint32 {
	if a < s.qe {
		m.cx[cx&31] = s.nlps
		return 1 - s.mps
	}
	m.cx[cx&31] = s.nmps
	return s.mps
}

// exchangeLPS is the conditional LPS exchange (T.800 Figure C.15) for
// context cx when C is below Qe; the caller sets A to Qe and renormalises.
func (m *mqDecoder) exchangeLPS(cx uint8, s *mqState, a uint32) uint32 {
	if a < s.qe {
		m.cx[cx&31] = s.nmps
		return s.mps
	}
	m.cx[cx&31] = s.nlps
	return 1 - s.mps
}

// decodeSlow finishes decode after A -= Qe: the LPS and MPS exchanges and
// renormalisation (T.800 C.3.2, Figures C.15-C.18).
func (m *mqDecoder) decodeSlow(cx uint8, s *mqState) uint32 {
	cx &= 31
	qe := s.qe
	var d uint32
	if m.c>>16 < qe {
		if m.a < qe {
			d = s.mps
			m.cx[cx] = s.nmps
		} else {
			d = 1 - s.mps
			m.cx[cx] = s.nlps
		}
		m.a = qe
	} else {
		m.c -= qe << 16
		if m.a < qe {
			d = 1 - s.mps
			m.cx[cx] = s.nlps
		} else {
			d = s.mps
			m.cx[cx] = s.nmps
		}
	}
	// Renormalise: shift A and C left until A >= 0x8000, several bits at
	// a time, reading a byte whenever CT runs out.
	for m.a&0x8000 == 0 {
		if m.ct == 0 {
			m.bytein()
		}
		n := min(uint32(bits.LeadingZeros16(uint16(m.a))), m.ct)
		m.a <<= n
		m.c <<= n
		m.ct -= n
	}
	return d
}

// rawDecoder reads bits of a bypass (raw) segment (T.800 D.6).
type rawDecoder struct {
	data []byte
	pos  int
	c    uint32
	ct   uint32
}

func (r *rawDecoder) init(data []byte) {
	*r = rawDecoder{data: data}
}

func (r *rawDecoder) bit() uint32 {
	if r.ct == 0 {
		var b uint32 = 0xFF
		if r.pos < len(r.data) {
			b = uint32(r.data[r.pos])
		}
		if r.c == 0xFF {
			if b > 0x8F {
				r.c = 0xFF
				r.ct = 8
			} else {
				r.c = b
				r.pos++
				r.ct = 7
			}
		} else {
			r.c = b
			r.pos++
			r.ct = 8
		}
	}
	r.ct--
	return (r.c >> r.ct) & 1
}
