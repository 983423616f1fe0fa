package jpeg

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// zigzag maps the position of a coefficient in the zig-zag sequence to its
// index in the 8×8 block in natural (row-major) order (T.81 Figure A.6).
var zigzag = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// frameMCUs returns the frame's grid of interleaved MCUs, each hmax×vmax
// blocks of 8×8 samples.
func (d *decoder) frameMCUs() (x, y int) {
	return (d.width + 8*d.hmax - 1) / (8 * d.hmax), (d.height + 8*d.vmax - 1) / (8 * d.vmax)
}

// scanMCUs returns the MCU grid of a scan over sc: one block per MCU for a
// single component (its own block grid), the frame's MCUs when interleaved.
func (d *decoder) scanMCUs(sc []scanComp) (x, y int) {
	if len(sc) == 1 {
		return sc[0].c.bw, sc[0].c.bh
	}
	return d.frameMCUs()
}

// sequential decodes one scan of a sequential DCT frame (T.81 Annex F):
// Huffman-coded DC differences and AC run/size pairs, dequantised and
// inverse transformed block by block into the component planes.
func (d *decoder) sequential(sc []scanComp) error {
	mcux, mcuy := d.scanMCUs(sc)
	var pred [4]int32
	var coef [64]int32
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
						if err := d.block(&coef, s, &pred[k]); err != nil {
							return err
						}
						bx, by := mx*h+i, my*v+j
						if bx < c.bw && by < c.bh {
							d.idct(&coef, c, bx, by)
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

// block decodes one 8×8 block's coefficients into coef (natural order,
// dequantised).
func (d *decoder) block(coef *[64]int32, s scanComp, pred *int32) error {
	br := &d.br
	q := d.quant[s.c.tq]
	*coef = [64]int32{}
	if br.n < 32 {
		br.fill()
	}
	t, err := br.decode(s.dc)
	if err != nil {
		return err
	}
	*pred += br.receiveExtend(uint(t))
	coef[0] = *pred * int32(q[0])
	for k := 1; k < 64; k++ {
		if br.n < 32 {
			br.fill()
		}
		rs, err := br.decode(s.ac)
		if err != nil {
			return err
		}
		r, sz := int(rs>>4), uint(rs&15)
		if sz == 0 {
			if r != 15 {
				break // end of block
			}
			k += 15
			continue
		}
		k += r
		if k > 63 {
			return fmt.Errorf("%w: AC coefficients past the end of the block", codec.ErrFormat)
		}
		z := zigzag[k]
		coef[z] = br.receiveExtend(sz) * int32(q[z])
	}
	return nil
}

// Fixed-point constants of the inverse DCT: round(x·2^13) for the cosine
// terms of the Loeffler–Ligtenberg–Moschytz factorisation (as libjpeg's
// "islow" IDCT uses, so the outputs agree bit for bit).
const (
	constBits  = 13
	fix0298631 = 2446  // 0.298631336
	fix0390181 = 3196  // 0.390180644
	fix0541196 = 4433  // 0.541196100
	fix0765367 = 6270  // 0.765366865
	fix0899976 = 7373  // 0.899976223
	fix1175876 = 9633  // 1.175875602
	fix1501321 = 12299 // 1.501321110
	fix1847759 = 15137 // 1.847759065
	fix1961571 = 16069 // 1.961570560
	fix2053120 = 16819 // 2.053119869
	fix2562915 = 20995 // 2.562915447
	fix3072711 = 25172 // 3.072711026
)

// idct inverse transforms the dequantised block coef and stores it, level
// shifted and clamped, at block (bx, by) of component c, clipped to the
// component's size. The arithmetic is a separable 1-D 8-point IDCT on the
// columns, scaled up by 2^pass1, then on the rows, with the rounding and
// range limiting of libjpeg's jidctint.c.
func (d *decoder) idct(coef *[64]int32, c *component, bx, by int) {
	pass1 := uint(2)
	if d.precision == 12 {
		pass1 = 1
	}
	maxv := int32(1)<<uint(d.precision) - 1
	center := (maxv + 1) / 2
	var ws [64]int32
	for col := 0; col < 8; col++ {
		in := coef[col:]
		if in[8] == 0 && in[16] == 0 && in[24] == 0 && in[32] == 0 && in[40] == 0 && in[48] == 0 && in[56] == 0 {
			dc := in[0] << pass1
			for r := 0; r < 8; r++ {
				ws[r*8+col] = dc
			}
			continue
		}
		var o [8]int32
		idct1(&o, in[0], in[8], in[16], in[24], in[32], in[40], in[48], in[56], constBits-pass1)
		for r := 0; r < 8; r++ {
			ws[r*8+col] = o[r]
		}
	}
	w := min(8, c.width-bx*8)
	h := min(8, c.height-by*8)
	base := c.offset + by*8*c.stride + bx*8*c.step
	for r := 0; r < h; r++ {
		in := ws[r*8 : r*8+8]
		var o [8]int32
		if in[1] == 0 && in[2] == 0 && in[3] == 0 && in[4] == 0 && in[5] == 0 && in[6] == 0 && in[7] == 0 {
			v := descale(in[0], pass1+3)
			for i := range o {
				o[i] = v
			}
		} else {
			idct1(&o, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], constBits+pass1+3)
		}
		row := c.plane[base+r*c.stride:]
		for i := 0; i < w; i++ {
			row[i*c.step] = rangeLimit(o[i], center, maxv)
		}
	}
}

// rangeLimit level-shifts an IDCT output and clamps it to [0, maxv] the way
// libjpeg's range-limit table does: the value is first taken modulo
// 4·(maxv+1), so wildly out-of-range outputs of corrupt data wrap as there.
func rangeLimit(x, center, maxv int32) uint16 {
	n := maxv + 1
	k := x & (4*n - 1)
	if k >= 2*n {
		k -= 4 * n
	}
	k += center
	return uint16(min(max(k, 0), maxv))
}

func descale(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }

// idct1 is the 8-point 1-D inverse DCT of inputs x0…x7, descaled by n bits.
func idct1(o *[8]int32, x0, x1, x2, x3, x4, x5, x6, x7 int32, n uint) {
	// Even part.
	z1 := (x2 + x6) * fix0541196
	t2 := z1 - x6*fix1847759
	t3 := z1 + x2*fix0765367
	t0 := (x0 + x4) << constBits
	t1 := (x0 - x4) << constBits
	t10, t13 := t0+t3, t0-t3
	t11, t12 := t1+t2, t1-t2
	// Odd part.
	t0, t1, t2, t3 = x7, x5, x3, x1
	z1 = t0 + t3
	z2 := t1 + t2
	z3 := t0 + t2
	z4 := t1 + t3
	z5 := (z3 + z4) * fix1175876
	t0 *= fix0298631
	t1 *= fix2053120
	t2 *= fix3072711
	t3 *= fix1501321
	z1 *= -fix0899976
	z2 *= -fix2562915
	z3 = z3*-fix1961571 + z5
	z4 = z4*-fix0390181 + z5
	t0 += z1 + z3
	t1 += z2 + z4
	t2 += z2 + z3
	t3 += z1 + z4
	o[0] = descale(t10+t3, n)
	o[7] = descale(t10-t3, n)
	o[1] = descale(t11+t2, n)
	o[6] = descale(t11-t2, n)
	o[2] = descale(t12+t1, n)
	o[5] = descale(t12-t1, n)
	o[3] = descale(t13+t0, n)
	o[4] = descale(t13-t0, n)
}

// upsample expands the subsampled component i of f, held in c.plane, to the
// frame's size with libjpeg's default ("fancy") triangular filter for 2:1
// horizontal and 2:1×2:1 factors, and by replication otherwise.
func upsample(f *codec.Frame, i int, c *component, hmax, vmax int) {
	nf := f.Components
	hs, vs := hmax/c.h, vmax/c.v
	exact := hmax%c.h == 0 && vmax%c.v == 0
	switch {
	case exact && hs == 2 && vs == 1 && c.width >= 2:
		buf := make([]uint16, 2*c.width)
		for y := 0; y < f.Height; y++ {
			fancyH2(buf, c.plane[y*c.width:(y+1)*c.width])
			dst := f.Pix[y*f.Width*nf+i:]
			for x := 0; x < f.Width; x++ {
				dst[x*nf] = buf[x]
			}
		}
	case exact && hs == 2 && vs == 2 && c.width >= 2:
		buf := make([]uint16, 2*c.width)
		for y := 0; y < f.Height; y++ {
			// Output line y lies between input lines y/2 and its
			// neighbour above (even y) or below (odd y); edges repeat.
			near := y / 2
			far := near - 1
			if y%2 == 1 {
				far = near + 1
			}
			far = min(max(far, 0), c.height-1)
			near = min(near, c.height-1)
			fancyH2V2(buf, c.plane[near*c.width:(near+1)*c.width], c.plane[far*c.width:(far+1)*c.width])
			dst := f.Pix[y*f.Width*nf+i:]
			for x := 0; x < f.Width; x++ {
				dst[x*nf] = buf[x]
			}
		}
	default:
		for y := 0; y < f.Height; y++ {
			sy := min(y*c.v/vmax, c.height-1)
			src := c.plane[sy*c.width:]
			dst := f.Pix[y*f.Width*nf+i:]
			for x := 0; x < f.Width; x++ {
				dst[x*nf] = src[min(x*c.h/hmax, c.width-1)]
			}
		}
	}
}

// fancyH2 doubles a line horizontally: each output sample is 3/4 of the
// nearer input sample and 1/4 of the further, rounding alternately up and
// down (libjpeg's h2v1 fancy upsampling); the end samples are copied.
func fancyH2(dst, in []uint16) {
	n := len(in)
	dst[0] = in[0]
	dst[1] = uint16((3*int(in[0]) + int(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := 3 * int(in[i])
		dst[2*i] = uint16((v + int(in[i-1]) + 1) >> 2)
		dst[2*i+1] = uint16((v + int(in[i+1]) + 2) >> 2)
	}
	dst[2*n-2] = uint16((3*int(in[n-1]) + int(in[n-2]) + 1) >> 2)
	dst[2*n-1] = in[n-1]
}

// fancyH2V2 is the 2:1×2:1 triangular filter of libjpeg (h2v2 fancy
// upsampling) for one output line: vertical weights 3/4 (near) and 1/4 (far),
// then horizontal as in fancyH2, with one rounding at the end.
func fancyH2V2(dst, near, far []uint16) {
	n := len(near)
	col := func(i int) int { return 3*int(near[i]) + int(far[i]) }
	this, next := col(0), col(1)
	dst[0] = uint16((this*4 + 8) >> 4)
	dst[1] = uint16((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = col(i + 1)
		dst[2*i] = uint16((this*3 + last + 8) >> 4)
		dst[2*i+1] = uint16((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	dst[2*n-2] = uint16((this*3 + last + 8) >> 4)
	dst[2*n-1] = uint16((this*4 + 7) >> 4)
}
