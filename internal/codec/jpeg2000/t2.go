package jpeg2000

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// tagTree is a T.800 B.10.2 tag tree: leaves first, then each coarser level.
type tagTree struct {
	value  []int32
	low    []int32
	parent []int32
}

const ttInf = 1 << 30

func (t *tagTree) init(w, h int) {
	n := 0
	for lw, lh := w, h; ; lw, lh = (lw+1)/2, (lh+1)/2 {
		n += lw * lh
		if lw == 1 && lh == 1 {
			break
		}
	}
	t.value = make([]int32, n)
	t.low = make([]int32, n)
	t.parent = make([]int32, n)
	for i := range t.value {
		t.value[i] = ttInf
	}
	base := 0
	lw, lh := w, h
	for lw > 1 || lh > 1 {
		nw, nh := (lw+1)/2, (lh+1)/2
		next := base + lw*lh
		for j := range lh {
			for i := range lw {
				t.parent[base+j*lw+i] = int32(next + (j/2)*nw + i/2)
			}
		}
		base, lw, lh = next, nw, nh
	}
	t.parent[n-1] = -1
}

// decode reads the tag tree bits for leaf until its value is known to be
// below threshold or at least threshold, and reports value < threshold.
func (t *tagTree) decode(br *bitReader, leaf int, threshold int32) bool {
	var stk [40]int32
	k := 0
	for n := int32(leaf); n >= 0 && k < len(stk); n = t.parent[n] {
		stk[k] = n
		k++
	}
	var low int32
	for k--; k >= 0; k-- {
		n := stk[k]
		if low > t.low[n] {
			t.low[n] = low
		} else {
			low = t.low[n]
		}
		for low < threshold && low < t.value[n] {
			if br.bit() != 0 {
				t.value[n] = low
			} else {
				low++
			}
		}
		t.low[n] = low
	}
	return t.value[leaf] < threshold
}

// bitReader reads packet header bits with T.800 B.10.1 bit stuffing.
type bitReader struct {
	b    []byte
	pos  int
	buf  uint32
	ct   uint
	over bool // read past the end
}

func (br *bitReader) bytein() {
	br.buf = (br.buf << 8) & 0xFFFF
	if br.buf == 0xFF00 {
		br.ct = 7
	} else {
		br.ct = 8
	}
	if br.pos < len(br.b) {
		br.buf |= uint32(br.b[br.pos])
		br.pos++
	} else {
		br.over = true
	}
}

func (br *bitReader) bit() uint32 {
	if br.ct == 0 {
		br.bytein()
	}
	br.ct--
	return (br.buf >> br.ct) & 1
}

func (br *bitReader) bits(n int) uint32 {
	var v uint32
	for range n {
		v = v<<1 | br.bit()
	}
	return v
}

func (br *bitReader) align() {
	if br.buf&0xFF == 0xFF {
		br.bytein()
	}
	br.ct = 0
}

// numPasses reads the number of new coding passes (T.800 Table B.4).
func (br *bitReader) numPasses() int {
	if br.bit() == 0 {
		return 1
	}
	if br.bit() == 0 {
		return 2
	}
	if n := br.bits(2); n != 3 {
		return 3 + int(n)
	}
	if n := br.bits(5); n != 31 {
		return 6 + int(n)
	}
	return 37 + int(br.bits(7))
}

func floorLog2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// Bounds on what a packet header may declare for a code-block.
const (
	maxPasses = 3*maxBitPlanes + 16 // coding passes per code-block
	maxLblock = 32
)

// packetStream is the state shared by the packets of one tile.
type packetStream struct {
	body   []byte
	pos    int
	hdr    bitReader // packet headers (a separate stream with PPM/PPT)
	packed bool
	sop    bool
	eph    bool
	// rec, when set (tests), is told each packet's byte ranges in an
	// unpacked tile: [sop,hdr) an SOP marker, [hdr,body) the header (and
	// EPH), [body,end) the body.
	rec func(sop, hdr, body, end int)

	remaining int64 // packets of the tile not yet read
}

// readPackets reads all packets of the tile in progression order, giving
// each code-block its coded segments.
func (tl *tile) readPackets(body, hdr []byte, packed bool, prog int, pocs []progChange, s *siz, rec func(sop, hdr, body, end int)) error {
	ps := &packetStream{body: body, packed: packed, sop: tl.scod&2 != 0, eph: tl.scod&4 != 0, rec: rec}
	if packed {
		ps.hdr.b = hdr
	}
	maxRes := 0
	for _, tc := range tl.comps {
		if tc.res != nil {
			maxRes = max(maxRes, len(tc.res))
		}
	}
	// Every packet takes at least one byte, so a tile declaring far more
	// (layer, resolution, component) combinations than it has bytes lies.
	if n := int64(tl.layers) * int64(maxRes) * int64(len(tl.comps)); n > 64*int64(len(body)+len(hdr))+4096 {
		return fmt.Errorf("%w: %d layers × %d resolutions × %d components in %d bytes", codec.ErrFormat, tl.layers, maxRes, len(tl.comps), len(body)+len(hdr))
	}
	if len(pocs) == 0 {
		pocs = []progChange{{rs: 0, cs: 0, ly: tl.layers, re: maxRes, ce: len(tl.comps), prog: prog}}
	}
	// Packets still to read: once none are left, further progressions
	// (POC entries) are not walked.
	for ci := range tl.comps {
		for r := range tl.comps[ci].res {
			ps.remaining += int64(tl.layers) * int64(len(tl.comps[ci].res[r].layerDone))
		}
	}
	for _, pc := range pocs {
		if ps.remaining == 0 {
			break
		}
		pc.ly = min(pc.ly, tl.layers)
		pc.re = min(pc.re, maxRes)
		pc.ce = min(pc.ce, len(tl.comps))
		if err := tl.progression(ps, pc, s); err != nil {
			return err
		}
	}
	return nil
}

// packet reads the packet of layer l, component c, resolution r, precinct p
// if it is the next one that precinct expects.
func (tl *tile) packet(ps *packetStream, l, c, r, p int) error {
	tc := &tl.comps[c]
	if r >= len(tc.res) {
		return nil
	}
	res := &tc.res[r]
	if p >= len(res.layerDone) || int(res.layerDone[p]) != l {
		return nil
	}
	if ps.pos >= len(ps.body) && (!ps.packed || ps.hdr.pos >= len(ps.hdr.b)) {
		// Every packet takes at least one byte: the tile is truncated.
		return fmt.Errorf("%w: tile data ends before the packet of layer %d, resolution %d, component %d, precinct %d", codec.ErrFormat, l, r, c, p)
	}
	res.layerDone[p]++
	ps.remaining--
	sopAt := ps.pos
	if ps.sop && ps.pos+6 <= len(ps.body) && ps.body[ps.pos] == 0xFF && ps.body[ps.pos+1] == 0x91 {
		ps.pos += 6
	}
	hdrAt := ps.pos
	br := &ps.hdr
	if !ps.packed {
		*br = bitReader{b: ps.body, pos: ps.pos}
	} else {
		br.buf, br.ct = 0, 0
	}
	st := tc.st
	if br.bit() != 0 {
		for bi := range res.bands {
			b := &res.bands[bi]
			pr := &b.precs[p]
			n := pr.cw * pr.ch
			for k := range n {
				cb := &b.cblks[pr.first+k]
				cb.newSegs = 0
				var in bool
				if !cb.included {
					in = pr.incl.decode(br, k, int32(l+1))
				} else {
					in = br.bit() != 0
				}
				if !in {
					continue
				}
				if !cb.included {
					i := int32(1)
					for !pr.zbp.decode(br, k, i) {
						i++
						if i > 80 || br.over {
							return fmt.Errorf("%w: zero bit-plane count beyond %d", codec.ErrFormat, i)
						}
					}
					cb.numbps = b.mb - int(i-1)
					if cb.numbps < 0 || cb.numbps+tc.roi > maxBitPlanes {
						return fmt.Errorf("%w: code-block of %d bit-planes (Mb %d, ROI shift %d)", codec.ErrFormat, cb.numbps, b.mb, tc.roi)
					}
					cb.included = true
					cb.lblock = 3
				}
				np := br.numPasses()
				for br.bit() != 0 {
					cb.lblock++
					if cb.lblock > maxLblock {
						return fmt.Errorf("%w: Lblock beyond %d", codec.ErrFormat, maxLblock)
					}
				}
				if cb.passes+np > maxPasses {
					return fmt.Errorf("%w: %d coding passes in a code-block", codec.ErrFormat, cb.passes+np)
				}
				// Spread the new passes over codeword segments.
				si := len(cb.segs) - 1
				if si < 0 || cb.segs[si].passes == cb.segs[si].maxPasses {
					si++
					cb.segs = append(cb.segs, segment{maxPasses: segMaxPasses(st.cbStyle, cb.segs)})
				}
				cb.firstSeg = si
				for {
					sg := &cb.segs[si]
					sg.newPasses = min(sg.maxPasses-sg.passes, np)
					nbits := cb.lblock + floorLog2(sg.newPasses)
					if nbits > 32 {
						return fmt.Errorf("%w: segment length of %d bits", codec.ErrFormat, nbits)
					}
					sg.newLen = int(br.bits(nbits))
					np -= sg.newPasses
					cb.newSegs++
					if np <= 0 {
						break
					}
					si++
					cb.segs = append(cb.segs, segment{maxPasses: segMaxPasses(st.cbStyle, cb.segs)})
				}
			}
		}
	} else {
		for bi := range res.bands {
			b := &res.bands[bi]
			pr := &b.precs[p]
			for k := range pr.cw * pr.ch {
				b.cblks[pr.first+k].newSegs = 0
			}
		}
	}
	if br.over {
		return fmt.Errorf("%w: packet header runs past the data", codec.ErrFormat)
	}
	br.align()
	if ps.eph && br.pos+2 <= len(br.b) && br.b[br.pos] == 0xFF && br.b[br.pos+1] == 0x92 {
		br.pos += 2
	}
	if !ps.packed {
		ps.pos = br.pos
	}
	bodyAt := ps.pos
	// Packet body.
	for bi := range res.bands {
		b := &res.bands[bi]
		pr := &b.precs[p]
		for k := range pr.cw * pr.ch {
			cb := &b.cblks[pr.first+k]
			for si := cb.firstSeg; si < cb.firstSeg+cb.newSegs; si++ {
				sg := &cb.segs[si]
				if sg.newLen > len(ps.body)-ps.pos {
					return fmt.Errorf("%w: code-block segment of %d bytes with %d left in the tile", codec.ErrFormat, sg.newLen, len(ps.body)-ps.pos)
				}
				chunk := ps.body[ps.pos : ps.pos+sg.newLen]
				ps.pos += sg.newLen
				switch {
				case sg.data == nil:
					sg.data = chunk
				case sg.owned:
					sg.data = append(sg.data, chunk...)
				default:
					sg.data = append(append(make([]byte, 0, len(sg.data)+len(chunk)), sg.data...), chunk...)
					sg.owned = true
				}
				sg.passes += sg.newPasses
				cb.passes += sg.newPasses
			}
			cb.newSegs = 0
		}
	}
	if ps.rec != nil {
		ps.rec(sopAt, hdrAt, bodyAt, ps.pos)
	}
	return nil
}

// segMaxPasses is the number of passes the next codeword segment of a
// code-block holds (T.800 D.4.1, Table D.9).
func segMaxPasses(cbStyle byte, segs []segment) int {
	switch {
	case cbStyle&cbTermAll != 0:
		return 1
	case cbStyle&cbBypass != 0:
		if len(segs) == 0 {
			return 10
		}
		if m := segs[len(segs)-1].maxPasses; m == 1 || m == 10 {
			return 2
		}
		return 1
	}
	return 109
}

// progression walks one progression (the default or a POC entry).
func (tl *tile) progression(ps *packetStream, pc progChange, s *siz) error {
	switch pc.prog {
	case 0: // LRCP
		for l := 0; l < pc.ly; l++ {
			for r := pc.rs; r < pc.re; r++ {
				for c := pc.cs; c < pc.ce; c++ {
					if err := tl.allPrecincts(ps, l, c, r); err != nil {
						return err
					}
				}
			}
		}
	case 1: // RLCP
		for r := pc.rs; r < pc.re; r++ {
			for l := 0; l < pc.ly; l++ {
				for c := pc.cs; c < pc.ce; c++ {
					if err := tl.allPrecincts(ps, l, c, r); err != nil {
						return err
					}
				}
			}
		}
	case 2: // RPCL
		for r := pc.rs; r < pc.re; r++ {
			err := tl.positions(ps, pc.cs, pc.ce, r, r+1, s, func(x, y int) error {
				for c := pc.cs; c < pc.ce; c++ {
					if err := tl.atPosition(ps, pc.ly, c, r, x, y, s); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	case 3: // PCRL
		return tl.positions(ps, pc.cs, pc.ce, pc.rs, pc.re, s, func(x, y int) error {
			for c := pc.cs; c < pc.ce; c++ {
				for r := pc.rs; r < pc.re; r++ {
					if err := tl.atPosition(ps, pc.ly, c, r, x, y, s); err != nil {
						return err
					}
				}
			}
			return nil
		})
	case 4: // CPRL
		for c := pc.cs; c < pc.ce; c++ {
			err := tl.positions(ps, c, c+1, pc.rs, pc.re, s, func(x, y int) error {
				for r := pc.rs; r < pc.re; r++ {
					if err := tl.atPosition(ps, pc.ly, c, r, x, y, s); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (tl *tile) allPrecincts(ps *packetStream, l, c, r int) error {
	tc := &tl.comps[c]
	if r >= len(tc.res) {
		return nil
	}
	for p := range tc.res[r].layerDone {
		if err := tl.packet(ps, l, c, r, p); err != nil {
			return err
		}
	}
	return nil
}

// positions calls f for each reference-grid position of the tile at which a
// precinct of components [c0,c1) and resolutions [r0,r1) may start, in
// raster order (T.800 B.12.1.3).
func (tl *tile) positions(ps *packetStream, c0, c1, r0, r1 int, s *siz, f func(x, y int) error) error {
	stepX, stepY := int64(1)<<62, int64(1)<<62
	for c := c0; c < c1; c++ {
		tc := &tl.comps[c]
		comp := s.comps[c]
		for r := r0; r < min(r1, len(tc.res)); r++ {
			res := &tc.res[r]
			n := len(tc.res) - 1 - r
			stepX = min(stepX, int64(comp.dx)<<(res.ppx+n))
			stepY = min(stepY, int64(comp.dy)<<(res.ppy+n))
		}
	}
	if stepX == 1<<62 {
		return nil
	}
	for y := int64(tl.y0); y < int64(tl.y1); y += stepY - y%stepY {
		for x := int64(tl.x0); x < int64(tl.x1); x += stepX - x%stepX {
			if err := f(int(x), int(y)); err != nil {
				return err
			}
			if ps.remaining == 0 {
				return nil
			}
		}
	}
	return nil
}

// atPosition reads, for layers [0,ly), the packets of the precinct of
// component c and resolution r that starts at (x, y), if one does.
func (tl *tile) atPosition(ps *packetStream, ly, c, r, x, y int, s *siz) error {
	tc := &tl.comps[c]
	if r >= len(tc.res) {
		return nil
	}
	res := &tc.res[r]
	if res.pw == 0 || res.ph == 0 {
		return nil
	}
	comp := s.comps[c]
	n := len(tc.res) - 1 - r
	rpx, rpy := res.ppx+n, res.ppy+n
	X, Y := int64(x), int64(y)
	dx, dy := int64(comp.dx), int64(comp.dy)
	if !(Y%(dy<<rpy) == 0 || (y == tl.y0 && (int64(res.y0)<<n)%(int64(1)<<rpy) != 0)) {
		return nil
	}
	if !(X%(dx<<rpx) == 0 || (x == tl.x0 && (int64(res.x0)<<n)%(int64(1)<<rpx) != 0)) {
		return nil
	}
	pi := (ceilDiv64(X, dx<<n) >> res.ppx) - int64(res.x0>>res.ppx)
	pj := (ceilDiv64(Y, dy<<n) >> res.ppy) - int64(res.y0>>res.ppy)
	if pi < 0 || pj < 0 || pi >= int64(res.pw) || pj >= int64(res.ph) {
		return nil
	}
	p := int(pj)*res.pw + int(pi)
	for l := 0; l < ly; l++ {
		if err := tl.packet(ps, l, c, r, p); err != nil {
			return err
		}
	}
	return nil
}

func ceilDiv64(a, b int64) int64 { return (a + b - 1) / b }
