package jpeg

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// Progressive DCT (T.81 Annex G, Huffman coding): the scans refine the
// quantised coefficients of every block, kept in coef until EOI, where
// finishProgressive dequantises and inverse transforms them.

// allocCoefficients makes the coefficient buffers of a progressive frame:
// 64 int16 per block of each component, over whole MCUs (interleaved DC
// scans visit the blocks that pad the last MCU). Their size is refused,
// like the frame's, beyond twice the pixel limit.
func (d *decoder) allocCoefficients() error {
	mcux, mcuy := d.frameMCUs()
	total := int64(0)
	for i := range d.comps {
		c := &d.comps[i]
		c.cbw, c.cbh = mcux*c.h, mcuy*c.v
		total += int64(c.cbw) * int64(c.cbh) * 64
	}
	if d.maxPixels > 0 && total > 2*d.maxPixels {
		return fmt.Errorf("%w: progressive frame needs %d coefficients, over twice the limit %d", codec.ErrTooLarge, total, d.maxPixels)
	}
	for i := range d.comps {
		c := &d.comps[i]
		c.coef = make([]int16, c.cbw*c.cbh*64)
	}
	return nil
}

// progressive decodes one scan of a progressive frame.
func (d *decoder) progressive(sc []scanComp, ss, se, ah, al int) error {
	dc := ss == 0
	switch {
	case dc && se != 0, !dc && (se < ss || se > 63 || len(sc) != 1), al > 13, ah > 13, ah != 0 && ah != al+1:
		return fmt.Errorf("%w: progressive scan with Ss %d, Se %d, Ah %d, Al %d over %d components", codec.ErrFormat, ss, se, ah, al, len(sc))
	}
	mcux, mcuy := d.scanMCUs(sc)
	var pred [4]int32
	eobrun := 0
	d.br.reset(d.data, d.pos)
	left, rst := d.restart, 0
	for my := 0; my < mcuy; my++ {
		for mx := 0; mx < mcux; mx++ {
			if d.restart > 0 {
				if left == 0 {
					if err := d.readRestart(rst); err != nil {
						return err
					}
					rst++
					left = d.restart
					pred = [4]int32{}
					eobrun = 0
				}
				left--
			}
			for k, s := range sc {
				c := s.c
				h, v := c.h, c.v
				if len(sc) == 1 {
					h, v = 1, 1
				}
				for j := 0; j < v; j++ {
					for i := 0; i < h; i++ {
						bx, by := mx*h+i, my*v+j
						blk := (*[64]int16)(c.coef[(by*c.cbw+bx)*64:])
						var err error
						switch {
						case dc && ah == 0:
							err = d.dcFirst(blk, s.dc, &pred[k], al)
						case dc:
							d.dcRefine(blk, al)
						case ah == 0:
							err = d.acFirst(blk, s.ac, ss, se, al, &eobrun)
						default:
							err = d.acRefine(blk, s.ac, ss, se, al, &eobrun)
						}
						if err != nil {
							return err
						}
					}
				}
			}
		}
		if d.br.overrun() {
			return errTruncated
		}
	}
	return d.endScan()
}

// bit returns the next bit.
func (br *bitReader) bit() int32 {
	if br.n < 1 {
		br.fill()
	}
	return br.bits(1)
}

func (d *decoder) dcFirst(blk *[64]int16, t *huffTable, pred *int32, al int) error {
	br := &d.br
	if br.n < 32 {
		br.fill()
	}
	s, err := br.decode(t)
	if err != nil {
		return err
	}
	*pred += br.receiveExtend(uint(s))
	blk[0] = int16(*pred << uint(al))
	return nil
}

func (d *decoder) dcRefine(blk *[64]int16, al int) {
	if d.br.bit() != 0 {
		blk[0] |= 1 << uint(al)
	}
}

// acFirst decodes the first pass of the band ss…se of one block (G.1.2.2).
func (d *decoder) acFirst(blk *[64]int16, t *huffTable, ss, se, al int, eobrun *int) error {
	if *eobrun > 0 {
		*eobrun--
		return nil
	}
	br := &d.br
	for k := ss; k <= se; k++ {
		if br.n < 32 {
			br.fill()
		}
		rs, err := br.decode(t)
		if err != nil {
			return err
		}
		r, s := int(rs>>4), uint(rs&15)
		if s == 0 {
			if r == 15 {
				k += 15
				continue
			}
			// EOBRUN: this block and 2^r - 1 + (r bits) more end here.
			run := 1 << uint(r)
			if r > 0 {
				run += int(br.bits(uint(r)))
			}
			*eobrun = run - 1
			return nil
		}
		k += r
		if k > se {
			return fmt.Errorf("%w: AC coefficients past the end of the band", codec.ErrFormat)
		}
		blk[zigzag[k]] = int16(br.receiveExtend(s) << uint(al))
	}
	return nil
}

// acRefine decodes a refinement pass of the band ss…se of one block
// (G.1.2.3): a correction bit for each coefficient already non-zero, and the
// new coefficients of magnitude 1 at bit al.
func (d *decoder) acRefine(blk *[64]int16, t *huffTable, ss, se, al int, eobrun *int) error {
	br := &d.br
	p1, m1 := int16(1)<<uint(al), int16(-1)<<uint(al)
	correct := func(z uint8) {
		if blk[z] != 0 && br.bit() != 0 && blk[z]&p1 == 0 {
			if blk[z] >= 0 {
				blk[z] += p1
			} else {
				blk[z] += m1
			}
		}
	}
	k := ss
	if *eobrun == 0 {
		for ; k <= se; k++ {
			if br.n < 32 {
				br.fill()
			}
			rs, err := br.decode(t)
			if err != nil {
				return err
			}
			r, s := int(rs>>4), int(rs&15)
			var val int16
			if s != 0 {
				if s != 1 {
					return fmt.Errorf("%w: refinement coefficient of size %d", codec.ErrFormat, s)
				}
				val = m1
				if br.bit() != 0 {
					val = p1
				}
			} else if r != 15 {
				run := 1 << uint(r)
				if r > 0 {
					run += int(br.bits(uint(r)))
				}
				*eobrun = run
				break
			}
			// Skip r zero coefficients, correcting the non-zero ones on
			// the way; the new coefficient takes the next zero position.
			for ; k <= se; k++ {
				z := zigzag[k]
				if blk[z] != 0 {
					correct(z)
				} else {
					if r == 0 {
						break
					}
					r--
				}
			}
			if val != 0 {
				if k > se {
					return fmt.Errorf("%w: refinement coefficient past the end of the band", codec.ErrFormat)
				}
				blk[zigzag[k]] = val
			}
		}
	}
	if *eobrun > 0 {
		for ; k <= se; k++ {
			correct(zigzag[k])
		}
		*eobrun--
	}
	return nil
}

// finishProgressive dequantises and inverse transforms every block.
func (d *decoder) finishProgressive() error {
	var coef [64]int32
	for i := range d.comps {
		c := &d.comps[i]
		q := d.quant[c.tq]
		if q == nil {
			return fmt.Errorf("%w: component %d uses undefined quantisation table %d", codec.ErrFormat, c.id, c.tq)
		}
		for by := 0; by < c.bh; by++ {
			for bx := 0; bx < c.bw; bx++ {
				blk := c.coef[(by*c.cbw+bx)*64:][:64]
				for j, v := range blk {
					coef[j] = int32(v) * int32(q[j])
				}
				d.idct(&coef, c, bx, by)
			}
		}
		c.coef = nil
	}
	return nil
}
