package jpeg2000

import (
	"bytes"
	"fmt"
	"math"

	"github.com/radgen/radgen/internal/codec"
)

// tile is one tile being decoded: per component, resolutions, sub-bands,
// precincts and code-blocks (T.800 B.4-B.7).
type tile struct {
	x0, y0, x1, y1 int // on the reference grid
	comps          []tileComp
	mct            bool
	layers         int
	scod           byte
}

type tileComp struct {
	x0, y0, x1, y1 int // tile-component coordinates
	w, h           int
	rev            bool
	st             *style
	roi            int
	res            []resolution
	coefI          []int32   // h×w, reversible path
	coefF          []float32 // h×w, irreversible path
}

type resolution struct {
	x0, y0, x1, y1 int
	ppx, ppy       int // precinct size exponents
	pw, ph         int // precincts across and down
	bands          []band
	layerDone      []uint16 // per precinct: layers read so far
}

type band struct {
	orient         int // 0 LL, 1 HL, 2 LH, 3 HH
	x0, y0, x1, y1 int
	offX, offY     int // position of the band in the tile-component array
	mb             int // magnitude bit-planes Mb (T.800 E-2)
	step           float32
	cbw, cbh       int // code-block size exponents in this band
	precs          []precinct
	cblks          []codeBlock
}

type precinct struct {
	cw, ch int // code-blocks across and down
	first  int // index of the first code-block in band.cblks
	incl   tagTree
	zbp    tagTree
}

type codeBlock struct {
	x0, y0, x1, y1 int // band coordinates
	included       bool
	numbps         int
	lblock         int
	passes         int
	segs           []segment
	// Contributions of the packet being read.
	newSegs  int // number of segments touched by the packet
	firstSeg int
}

type segment struct {
	data              []byte
	passes, maxPasses int
	newPasses, newLen int
	owned             bool // data was copied (appendable)
}

// buildTile computes a tile's geometry and allocates its structures, after
// bounding the number of precincts and code-blocks by its sample count.
func (d *decoder) buildTile(ti int, td *tileData) (*tile, error) {
	s := d.siz
	p, q := ti%s.ntx, ti/s.ntx
	tl := &tile{
		x0: max(s.tx0+p*s.tw, s.x0), y0: max(s.ty0+q*s.th, s.y0),
		x1: min(s.tx0+(p+1)*s.tw, s.x1), y1: min(s.ty0+(q+1)*s.th, s.y1),
	}
	cd := d.main.cod
	if td.p.cod != nil {
		cd = td.p.cod
	}
	tl.mct = cd.mct == 1
	tl.layers = cd.layers
	tl.scod = cd.scod
	tl.comps = make([]tileComp, len(s.comps))
	for ci, comp := range s.comps {
		st, qu, roi := d.compParams(td, ci)
		tc := &tl.comps[ci]
		tc.st, tc.rev, tc.roi = st, st.rev, roi
		tc.x0, tc.y0 = ceilDiv(tl.x0, comp.dx), ceilDiv(tl.y0, comp.dy)
		tc.x1, tc.y1 = ceilDiv(tl.x1, comp.dx), ceilDiv(tl.y1, comp.dy)
		tc.w, tc.h = tc.x1-tc.x0, tc.y1-tc.y0
		nl := st.levels
		// Bound the structures before allocating them: precincts and
		// code-blocks per resolution, each at most the samples it covers
		// plus one per row and column.
		var count int64
		for r := 0; r <= nl; r++ {
			n := nl - r
			rx0, rx1 := ceilDivPow2(tc.x0, n), ceilDivPow2(tc.x1, n)
			ry0, ry1 := ceilDivPow2(tc.y0, n), ceilDivPow2(tc.y1, n)
			if rx0 == rx1 || ry0 == ry1 {
				continue
			}
			pw := ceilDivPow2(rx1, st.ppx[r]) - rx0>>st.ppx[r]
			ph := ceilDivPow2(ry1, st.ppy[r]) - ry0>>st.ppy[r]
			cbw, cbh := min(st.cbw, st.ppx[r]), min(st.cbh, st.ppy[r])
			if r > 0 {
				cbw, cbh = min(st.cbw, st.ppx[r]-1), min(st.cbh, st.ppy[r]-1)
			}
			nb := int64((rx1-rx0)>>cbw+2) * int64((ry1-ry0)>>cbh+2)
			count += int64(pw)*int64(ph) + 3*nb
		}
		if lim := 8*int64(tc.w)*int64(tc.h) + 64*int64(nl+1); count > lim {
			return nil, fmt.Errorf("%w: component %d: %d precincts and code-blocks for %d samples", codec.ErrFormat, ci, count, int64(tc.w)*int64(tc.h))
		}
		if tc.w == 0 || tc.h == 0 {
			continue
		}
		if err := tc.build(comp, qu); err != nil {
			return nil, fmt.Errorf("component %d: %w", ci, err)
		}
	}
	return tl, nil
}

func (tc *tileComp) build(comp component, q *quant) error {
	st := tc.st
	nl := st.levels
	tc.res = make([]resolution, nl+1)
	nbands := 3*nl + 1
	if q.style != 1 && len(q.steps) < nbands {
		return fmt.Errorf("%w: %d quantisation step sizes for %d sub-bands", codec.ErrFormat, len(q.steps), nbands)
	}
	for r := 0; r <= nl; r++ {
		res := &tc.res[r]
		n := nl - r
		res.x0, res.x1 = ceilDivPow2(tc.x0, n), ceilDivPow2(tc.x1, n)
		res.y0, res.y1 = ceilDivPow2(tc.y0, n), ceilDivPow2(tc.y1, n)
		res.ppx, res.ppy = st.ppx[r], st.ppy[r]
		if res.x1 > res.x0 && res.y1 > res.y0 {
			res.pw = ceilDivPow2(res.x1, res.ppx) - res.x0>>res.ppx
			res.ph = ceilDivPow2(res.y1, res.ppy) - res.y0>>res.ppy
		}
		res.layerDone = make([]uint16, res.pw*res.ph)
		cbw, cbh := min(st.cbw, res.ppx), min(st.cbh, res.ppy)
		orients := []int{0}
		if r > 0 {
			cbw, cbh = min(st.cbw, res.ppx-1), min(st.cbh, res.ppy-1)
			orients = []int{1, 2, 3}
		}
		res.bands = make([]band, len(orients))
		for bi, o := range orients {
			b := &res.bands[bi]
			b.orient = o
			b.cbw, b.cbh = cbw, cbh
			nb := n
			if r > 0 {
				nb = n + 1
			}
			xo, yo := o&1, o>>1
			b.x0 = ceilDivPow2(max(tc.x0-(xo<<nb>>1), 0), nb)
			b.x1 = ceilDivPow2(max(tc.x1-(xo<<nb>>1), 0), nb)
			b.y0 = ceilDivPow2(max(tc.y0-(yo<<nb>>1), 0), nb)
			b.y1 = ceilDivPow2(max(tc.y1-(yo<<nb>>1), 0), nb)
			// The band is stored in the Mallat layout of the
			// tile-component array.
			if r > 0 {
				lo := &tc.res[r-1]
				b.offX, b.offY = xo*(lo.x1-lo.x0), yo*(lo.y1-lo.y0)
			}
			// Quantisation: band index 0 is LL, then HL, LH, HH per level.
			idx := 0
			if r > 0 {
				idx = 3*(r-1) + o
			}
			var eps, mu int
			if q.style == 1 {
				eps, mu = int(q.steps[0]>>11), int(q.steps[0]&0x7FF)
				eps = max(eps-(nl-nb), 0)
				if r == 0 {
					eps = int(q.steps[0] >> 11)
				}
			} else {
				eps, mu = int(q.steps[idx]>>11), int(q.steps[idx]&0x7FF)
			}
			b.mb = q.guard + eps - 1
			if !tc.rev {
				// Rb without the sub-band gain: the synthesis applies
				// it (highGain97).
				rb := comp.prec
				b.step = float32(math.Ldexp(1+float64(mu)/2048, rb-eps))
			}
			if b.x1 <= b.x0 || b.y1 <= b.y0 {
				b.precs = make([]precinct, res.pw*res.ph)
				continue
			}
			b.build(res, r)
		}
	}
	return nil
}

// build lays out a band's precincts and code-blocks.
func (b *band) build(res *resolution, r int) {
	b.precs = make([]precinct, res.pw*res.ph)
	// Precinct size in the band's coordinates.
	px, py := res.ppx, res.ppy
	if r > 0 {
		px, py = px-1, py-1
	}
	x0p, y0p := res.x0>>res.ppx, res.y0>>res.ppy
	total := 0
	type span struct{ x0, x1, y0, y1 int }
	spans := make([]span, len(b.precs))
	for j := range res.ph {
		for i := range res.pw {
			k := j*res.pw + i
			sx0 := max((x0p+i)<<px, b.x0)
			sx1 := min((x0p+i+1)<<px, b.x1)
			sy0 := max((y0p+j)<<py, b.y0)
			sy1 := min((y0p+j+1)<<py, b.y1)
			pr := &b.precs[k]
			if sx1 > sx0 && sy1 > sy0 {
				pr.cw = ceilDivPow2(sx1, b.cbw) - sx0>>b.cbw
				pr.ch = ceilDivPow2(sy1, b.cbh) - sy0>>b.cbh
			}
			pr.first = total
			total += pr.cw * pr.ch
			spans[k] = span{sx0, sx1, sy0, sy1}
		}
	}
	b.cblks = make([]codeBlock, total)
	for k := range b.precs {
		pr := &b.precs[k]
		if pr.cw == 0 {
			continue
		}
		sp := spans[k]
		cx0, cy0 := sp.x0>>b.cbw, sp.y0>>b.cbh
		for j := range pr.ch {
			for i := range pr.cw {
				cb := &b.cblks[pr.first+j*pr.cw+i]
				cb.x0 = max((cx0+i)<<b.cbw, sp.x0)
				cb.x1 = min((cx0+i+1)<<b.cbw, sp.x1)
				cb.y0 = max((cy0+j)<<b.cbh, sp.y0)
				cb.y1 = min((cy0+j+1)<<b.cbh, sp.y1)
			}
		}
		pr.incl.init(pr.cw, pr.ch)
		pr.zbp.init(pr.cw, pr.ch)
	}
}

func (tc *tileComp) alloc() {
	if tc.rev {
		tc.coefI = make([]int32, tc.w*tc.h)
	} else {
		tc.coefF = make([]float32, tc.w*tc.h)
	}
}

// decodeTile decodes one tile and writes it into the frame, which it
// allocates on the first tile that reads to its end.
func (d *decoder) decodeTile(ws *workspace, ti int, td *tileData, f **codec.Frame) error {
	tl, err := d.buildTile(ti, td)
	if err != nil {
		return err
	}
	body := td.bodies[0]
	if len(td.bodies) > 1 {
		body = bytes.Join(td.bodies, nil)
	}
	var hdr []byte
	packed := len(td.hdrs) > 0 || len(d.ppm) > 0
	if packed {
		hdr = bytes.Join(td.hdrs, nil)
	}
	cd := d.main.cod
	if td.p.cod != nil {
		cd = td.p.cod
	}
	pocs := td.p.poc
	if len(pocs) == 0 {
		pocs = d.main.poc
	}
	if err := tl.readPackets(body, hdr, packed, cd.prog, pocs, d.siz, d.rec); err != nil {
		return err
	}
	// Only now, with all of the tile's packets read, allocate anything
	// proportional to its samples.
	for ci := range tl.comps {
		tl.comps[ci].alloc()
	}
	if *f == nil {
		*f = d.newFrame()
	}
	if err := ws.blocks(tl); err != nil {
		return err
	}
	for ci := range tl.comps {
		ws.idwt(&tl.comps[ci])
	}
	return d.writeTile(ws, tl, *f)
}
