package jpegls

import "math/bits"

// jTable is the run-length order table J of T.87 (A.7.1.2).
var jTable = [32]int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// regularCtx holds the variables A, B, C and N of a regular context.
type regularCtx struct{ a, b, c, n int }

// runCtx holds the variables of a run-interruption context.
type runCtx struct{ a, n, nn, ritype int }

// maxErrval bounds a decoded prediction error; larger values only come from
// corrupt data.
const maxErrval = 1 << 16

// scan decodes the entropy-coded data of one scan.
type scan struct {
	p      params
	br     bitReader
	ctx    [365]regularCtx
	rctx   [2]runCtx
	ri     int                // RUNindex of the component being decoded
	runIdx [maxComponents]int // RUNindex per component (line interleave)
	comps  []int              // frame components of the scan, in order
	ilv    int                // interleave mode
	width  int                // samples per line
	height int                // lines
	stride int                // components per pixel of the output
	out    []uint16           // the frame's samples
	lines  [maxComponents][2][]int
	qt     []int8 // gradient quantization, indexed by gradient + qoff
	qoff   int
	err    error
}

func newScan(d *decoder, p params, comps []int, ilv int, data []byte) *scan {
	s := &scan{p: p, comps: comps, ilv: ilv, width: d.width, height: d.height, stride: d.ncomp, out: d.frame.Pix}
	s.br = bitReader{data: data}
	a := max(2, (p.rng+32)/64)
	for i := range s.ctx {
		s.ctx[i] = regularCtx{a: a, n: 1}
	}
	s.rctx[0] = runCtx{a: a, n: 1}
	s.rctx[1] = runCtx{a: a, n: 1, ritype: 1}
	for i := range comps {
		s.lines[i][0] = make([]int, d.width+2)
		s.lines[i][1] = make([]int, d.width+2)
	}
	s.qoff = p.maxval
	s.qt = make([]int8, 2*p.maxval+1)
	for i := range s.qt {
		s.qt[i] = int8(s.quantize(i - s.qoff))
	}
	return s
}

// quantize maps a local gradient to its region, −4 … 4 (A.3.3).
func (s *scan) quantize(d int) int {
	p := &s.p
	switch {
	case d <= -p.t3:
		return -4
	case d <= -p.t2:
		return -3
	case d <= -p.t1:
		return -2
	case d < -p.near:
		return -1
	case d <= p.near:
		return 0
	case d < p.t1:
		return 1
	case d < p.t2:
		return 2
	case d < p.t3:
		return 3
	}
	return 4
}

func (s *scan) decode() error {
	if s.ilv == 2 {
		return s.decodeSampleInterleaved()
	}
	for row := range s.height {
		for ci, c := range s.comps {
			prev, cur := s.lines[ci][0], s.lines[ci][1]
			prev[s.width+1] = prev[s.width]
			cur[0] = prev[1]
			s.ri = s.runIdx[ci]
			s.line(prev, cur)
			s.runIdx[ci] = s.ri
			if err := s.check(); err != nil {
				return err
			}
			out := s.out[row*s.width*s.stride+c:]
			if s.stride == 1 {
				for x, v := range cur[1 : s.width+1] {
					out[x] = uint16(v)
				}
			} else {
				for x, v := range cur[1 : s.width+1] {
					out[x*s.stride] = uint16(v)
				}
			}
			s.lines[ci][0], s.lines[ci][1] = cur, prev
		}
	}
	return s.end()
}

// check reports a decoding error, or data exhausted well before the end.
func (s *scan) check() error {
	if s.err != nil {
		return s.err
	}
	if s.br.overrun() > 64 {
		return errorf("scan data ends early")
	}
	return nil
}

func (s *scan) end() error {
	if s.err != nil {
		return s.err
	}
	if s.br.overrun() > 0 {
		return errorf("scan data ends %d bits early", s.br.overrun())
	}
	return nil
}

// line decodes one line of one component into cur[1:width+1], given the
// previous line prev (both with one sample of margin at each end).
func (s *scan) line(prev, cur []int) {
	w := s.width
	qt, qoff := s.qt, s.qoff
	for x := 1; x <= w; {
		ra, rb, rc, rd := cur[x-1], prev[x], prev[x-1], prev[x+1]
		q := int(qt[rd-rb+qoff])*81 + int(qt[rb-rc+qoff])*9 + int(qt[rc-ra+qoff])
		if q == 0 {
			x += s.runMode(x, prev, cur)
			if s.err != nil {
				return
			}
			continue
		}
		cur[x] = s.regular(q, ra, rb, rc)
		x++
	}
}

// regular decodes one sample in regular mode (A.4–A.6) for context q ≠ 0
// (negative: the sign-reversed context).
func (s *scan) regular(q, ra, rb, rc int) int {
	p := &s.p
	neg := q < 0
	if neg {
		q = -q
	}
	ctx := &s.ctx[q]
	// Median edge detection.
	var px int
	switch {
	case rc >= max(ra, rb):
		px = min(ra, rb)
	case rc <= min(ra, rb):
		px = max(ra, rb)
	default:
		px = ra + rb - rc
	}
	if neg {
		px -= ctx.c
	} else {
		px += ctx.c
	}
	px = max(0, min(px, p.maxval))
	k := 0
	for ctx.n<<k < ctx.a {
		k++
	}
	m := s.golomb(k, p.limit)
	e := -(m & 1) ^ (m >> 1)
	if k == 0 && p.near == 0 && 2*ctx.b+ctx.n-1 < 0 {
		e = ^e
	}
	if e > maxErrval || e < -maxErrval {
		s.fail("prediction error %d", e)
		return 0
	}
	// Context update (A.6).
	ctx.b += e * (2*p.near + 1)
	if e < 0 {
		ctx.a -= e
	} else {
		ctx.a += e
	}
	if ctx.n == p.reset {
		ctx.a >>= 1
		ctx.b >>= 1
		ctx.n >>= 1
	}
	ctx.n++
	if ctx.b+ctx.n <= 0 {
		ctx.b += ctx.n
		if ctx.b <= -ctx.n {
			ctx.b = -ctx.n + 1
		}
		if ctx.c > -128 {
			ctx.c--
		}
	} else if ctx.b > 0 {
		ctx.b -= ctx.n
		if ctx.b > 0 {
			ctx.b = 0
		}
		if ctx.c < 127 {
			ctx.c++
		}
	}
	if neg {
		e = -e
	}
	return s.reconstruct(px + e*(2*p.near+1))
}

// reconstruct brings a reconstructed value back into [0, MAXVAL] (modulo
// reduction, then clamping).
func (s *scan) reconstruct(v int) int {
	p := &s.p
	if v < -p.near {
		v += p.rng * (2*p.near + 1)
	} else if v > p.maxval+p.near {
		v -= p.rng * (2*p.near + 1)
	}
	return max(0, min(v, p.maxval))
}

func (s *scan) fail(format string, args ...any) {
	if s.err == nil {
		s.err = errorf(format, args...)
	}
}

// golomb decodes a limited-length Golomb code of parameter k (A.5.3).
func (s *scan) golomb(k, limit int) int {
	qbpp := s.p.qbpp
	escape := limit - qbpp - 1
	q := s.br.highBits(escape)
	if q > escape {
		s.fail("unary code longer than %d bits", escape)
		return 0
	}
	if q == escape {
		return s.br.bits(qbpp) + 1
	}
	if k == 0 {
		return q
	}
	if k > 32 {
		s.fail("Golomb parameter %d", k)
		return 0
	}
	return q<<k + s.br.bits(k)
}

// runLength decodes the length of a run (A.7.1) of at most n samples. It
// reports whether the run ends the line.
func (s *scan) runLength(n int) (int, bool) {
	i := 0
	for s.br.bit() == 1 {
		cnt := min(1<<jTable[s.ri], n-i)
		i += cnt
		if cnt == 1<<jTable[s.ri] {
			s.ri = min(s.ri+1, 31)
		}
		if i == n {
			return n, true
		}
		if s.br.overrun() > 64 {
			s.fail("scan data ends early")
			return 0, true
		}
	}
	if j := jTable[s.ri]; j > 0 {
		i += s.br.bits(j)
	}
	if i >= n {
		s.fail("run of %d samples overruns the line", i)
		return 0, true
	}
	return i, false
}

// runMode decodes a run starting at x and its interruption sample; it
// returns the samples decoded.
func (s *scan) runMode(x int, prev, cur []int) int {
	ra := cur[x-1]
	n, ends := s.runLength(s.width - x + 1)
	for i := range n {
		cur[x+i] = ra
	}
	if ends {
		return max(n, 1)
	}
	x += n
	rb := prev[x]
	p := &s.p
	if ra-rb <= p.near && rb-ra <= p.near {
		e := s.interruption(&s.rctx[1])
		cur[x] = s.reconstruct(ra + e*(2*p.near+1))
	} else {
		e := s.interruption(&s.rctx[0])
		if rb < ra {
			e = -e
		}
		cur[x] = s.reconstruct(rb + e*(2*p.near+1))
	}
	if s.ri > 0 {
		s.ri--
	}
	return n + 1
}

// interruption decodes the error of a run-interruption sample (A.7.2).
func (s *scan) interruption(ctx *runCtx) int {
	temp := ctx.a + (ctx.n>>1)*ctx.ritype
	k := 0
	for ctx.n<<k < temp {
		k++
	}
	m := s.golomb(k, s.p.limit-jTable[s.ri]-1)
	if m > 2*maxErrval {
		s.fail("run interruption error %d", m)
		return 0
	}
	t := m + ctx.ritype
	odd := t&1 == 1
	eabs := (t + t&1) / 2
	e := eabs
	if (k != 0 || 2*ctx.nn >= ctx.n) == odd {
		e = -eabs
	}
	if e < 0 {
		ctx.nn++
	}
	ctx.a += (m + 1 - ctx.ritype) >> 1
	if ctx.n == s.p.reset {
		ctx.a >>= 1
		ctx.n >>= 1
		ctx.nn >>= 1
	}
	ctx.n++
	return e
}

// decodeSampleInterleaved decodes a scan whose pixels carry every
// component in turn (ILV 2): run mode when every component's gradients
// vanish, one RUNindex for the scan.
func (s *scan) decodeSampleInterleaved() error {
	nc := len(s.comps)
	w := s.width
	p := &s.p
	var prev, cur [maxComponents][]int
	var qs [maxComponents]int
	for row := range s.height {
		for ci := range nc {
			prev[ci], cur[ci] = s.lines[ci][0], s.lines[ci][1]
			prev[ci][w+1] = prev[ci][w]
			cur[ci][0] = prev[ci][1]
		}
		for x := 1; x <= w; {
			zero := true
			for ci := range nc {
				pr, cu := prev[ci], cur[ci]
				ra, rb, rc, rd := cu[x-1], pr[x], pr[x-1], pr[x+1]
				qs[ci] = int(s.qt[rd-rb+s.qoff])*81 + int(s.qt[rb-rc+s.qoff])*9 + int(s.qt[rc-ra+s.qoff])
				zero = zero && qs[ci] == 0
			}
			if !zero {
				for ci := range nc {
					pr, cu := prev[ci], cur[ci]
					cu[x] = s.regular(qs[ci], cu[x-1], pr[x], pr[x-1])
				}
				x++
				continue
			}
			n, ends := s.runLength(w - x + 1)
			for ci := range nc {
				ra := cur[ci][x-1]
				for i := range n {
					cur[ci][x+i] = ra
				}
			}
			if ends {
				x += max(n, 1)
				continue
			}
			x += n
			for ci := range nc {
				ra, rb := cur[ci][x-1], prev[ci][x]
				e := s.interruption(&s.rctx[0])
				if rb < ra {
					e = -e
				}
				cur[ci][x] = s.reconstruct(rb + e*(2*p.near+1))
			}
			if s.ri > 0 {
				s.ri--
			}
			x++
		}
		if err := s.check(); err != nil {
			return err
		}
		for ci, c := range s.comps {
			out := s.out[row*w*s.stride+c:]
			for x, v := range cur[ci][1 : w+1] {
				out[x*s.stride] = uint16(v)
			}
			s.lines[ci][0], s.lines[ci][1] = cur[ci], prev[ci]
		}
	}
	return s.end()
}

// bitReader reads the entropy-coded bits of a scan, most significant bit
// first, dropping the zero bit stuffed after each 0xFF byte. Past the end
// it reads zeros and counts them.
type bitReader struct {
	data  []byte
	pos   int
	acc   uint64 // unread bits, left-aligned
	n     int    // unread bits in acc
	ff    bool   // the last byte read was 0xFF
	extra int    // zero bits supplied past the end
}

func (r *bitReader) fill() {
	for r.n <= 56 {
		if r.pos >= len(r.data) {
			r.n += 8
			r.extra += 8
			continue
		}
		b := r.data[r.pos]
		r.pos++
		if r.ff {
			r.acc |= uint64(b&0x7f) << (57 - r.n)
			r.n += 7
		} else {
			r.acc |= uint64(b) << (56 - r.n)
			r.n += 8
		}
		r.ff = b == 0xff
	}
}

// overrun returns how many of the zero bits supplied past the end have been
// read.
func (r *bitReader) overrun() int { return r.extra - r.n }

func (r *bitReader) bit() int {
	if r.n == 0 {
		r.fill()
	}
	b := int(r.acc >> 63)
	r.acc <<= 1
	r.n--
	return b
}

// bits reads k ≤ 32 bits.
func (r *bitReader) bits(k int) int {
	if r.n < k {
		r.fill()
	}
	v := int(r.acc >> (64 - uint(k)))
	r.acc <<= uint(k)
	r.n -= k
	return v
}

// highBits reads zero bits up to and including the next one bit and
// returns how many zeros it read; it stops after max+1 zeros.
func (r *bitReader) highBits(max int) int {
	if r.n < 32 {
		r.fill()
	}
	if r.acc != 0 {
		z := bits.LeadingZeros64(r.acc)
		r.acc <<= uint(z + 1)
		r.n -= z + 1
		return z
	}
	cnt := 0
	for {
		cnt += r.n
		r.acc, r.n = 0, 0
		if cnt > max {
			return cnt
		}
		r.fill()
		if r.acc != 0 {
			z := bits.LeadingZeros64(r.acc)
			r.acc <<= uint(z + 1)
			r.n -= z + 1
			return cnt + z
		}
	}
}
