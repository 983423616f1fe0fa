package jpeg

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// lossless decodes one scan of a lossless frame (T.81 Annex H): each sample
// is its prediction from the reconstructed neighbours Ra (left), Rb (above)
// and Rc (above left) plus a Huffman-coded difference, modulo 2^16. The
// samples are kept point-transformed; finish shifts them up.
func (d *decoder) lossless(sc []scanComp, psv, pt int) error {
	w, h := d.width, d.height
	if len(sc) > 1 {
		for _, s := range sc {
			if s.c.h != 1 || s.c.v != 1 {
				return fmt.Errorf("%w: interleaved lossless scan with sampling factors %d×%d", codec.ErrUnsupported, s.c.h, s.c.v)
			}
		}
	}
	// A restart interval covers whole lines (as libjpeg requires too): its
	// first line is predicted like the scan's first.
	rows := 0
	if d.restart > 0 {
		if d.restart%w != 0 {
			return fmt.Errorf("%w: lossless restart interval %d is not a multiple of the line length %d", codec.ErrUnsupported, d.restart, w)
		}
		rows = d.restart / w
	}
	init := int32(1) << uint(d.precision-pt-1)
	d.br.reset(d.data, d.pos)
	rst := 0
	for y := 0; y < h; y++ {
		first := y == 0
		if rows > 0 && y > 0 && y%rows == 0 {
			if err := d.readRestart(rst); err != nil {
				return err
			}
			rst++
			first = true
		}
		var err error
		if len(sc) == 1 {
			c := sc[0].c
			err = d.losslessLine(sc[0].dc, c.plane, c.offset+y*c.stride, c.stride, c.step, w, first, psv, init)
		} else {
			err = d.losslessLineN(sc, y, first, psv, init)
		}
		if err != nil {
			return err
		}
		if d.br.overrun() {
			return errTruncated
		}
	}
	return d.endScan()
}

// diffSlow decodes a difference whose code and extra bits do not fit the
// lookahead. It assumes br.n >= 32.
func (br *bitReader) diffSlow(t *huffTable) (int32, error) {
	sym, err := br.decode(t)
	if err != nil {
		return 0, err
	}
	switch {
	case sym == 0:
		return 0, nil
	case sym == 16:
		return 32768, nil
	case sym > 16:
		return 0, fmt.Errorf("%w: lossless difference category %d", codec.ErrFormat, sym)
	}
	return br.receiveExtend(uint(sym)), nil
}

// losslessLine decodes the w samples of one line of a component coded alone
// in its scan: line[base + x·step], previous line at base - stride.
func (d *decoder) losslessLine(t *huffTable, pix []uint16, base, stride, step, w int, first bool, psv int, init int32) error {
	br := &d.br
	line := pix[base : base+(w-1)*step+1]
	var prev []uint16
	if !first {
		prev = pix[base-stride : base-stride+(w-1)*step+1]
	}
	var ra, rb, rc int32
	for x := 0; x < w; x++ {
		i := x * step
		// Prediction (T.81 Table H.1); the first line and column use Ra, Rb.
		var pred int32
		switch {
		case first && x == 0:
			pred = init
		case first:
			pred = ra
		case x == 0:
			rb = int32(prev[0])
			pred = rb
		default:
			rc = rb
			rb = int32(prev[i])
			switch psv {
			case 1:
				pred = ra
			case 2:
				pred = rb
			case 3:
				pred = rc
			case 4:
				pred = ra + rb - rc
			case 5:
				pred = ra + (rb-rc)>>1
			case 6:
				pred = rb + (ra-rc)>>1
			default:
				pred = (ra + rb) >> 1
			}
		}
		if br.n < 32 {
			br.fill()
		}
		var diff int32
		if e := t.look[br.acc>>(64-lookBits)]; e&lookComplete != 0 {
			l := uint(e & lookLenMask)
			br.acc <<= l
			br.n -= l
			diff = e >> 8
		} else {
			var err error
			if diff, err = br.diffSlow(t); err != nil {
				return err
			}
		}
		ra = (pred + diff) & 0xffff
		line[i] = uint16(ra)
	}
	return nil
}

// losslessLineN decodes line y of an interleaved scan: one sample of each
// scan component per MCU.
func (d *decoder) losslessLineN(sc []scanComp, y int, first bool, psv int, init int32) error {
	br := &d.br
	w := d.width
	for x := 0; x < w; x++ {
		for _, s := range sc {
			c := s.c
			i := c.offset + y*c.stride + x*c.step
			var ra, rb, rc int32
			if x > 0 {
				ra = int32(c.plane[i-c.step])
			}
			if !first {
				rb = int32(c.plane[i-c.stride])
				if x > 0 {
					rc = int32(c.plane[i-c.stride-c.step])
				}
			}
			var pred int32
			switch {
			case first && x == 0:
				pred = init
			case first:
				pred = ra
			case x == 0:
				pred = rb
			default:
				pred = predict(psv, ra, rb, rc)
			}
			if br.n < 32 {
				br.fill()
			}
			var diff int32
			if e := s.dc.look[br.acc>>(64-lookBits)]; e&lookComplete != 0 {
				l := uint(e & lookLenMask)
				br.acc <<= l
				br.n -= l
				diff = e >> 8
			} else {
				var err error
				if diff, err = br.diffSlow(s.dc); err != nil {
					return err
				}
			}
			c.plane[i] = uint16((pred + diff) & 0xffff)
		}
	}
	return nil
}

// predict returns the prediction of selection value psv (T.81 Table H.1).
func predict(psv int, ra, rb, rc int32) int32 {
	switch psv {
	case 1:
		return ra
	case 2:
		return rb
	case 3:
		return rc
	case 4:
		return ra + rb - rc
	case 5:
		return ra + (rb-rc)>>1
	case 6:
		return rb + (ra-rc)>>1
	}
	return (ra + rb) >> 1
}
