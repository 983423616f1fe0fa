package vision

import (
	"fmt"
	"math"
)

// render applies the modality LUT, the VOI LUT and the MONOCHROME1
// inversion to a monochrome frame's stored values, or converts a colour
// frame to 8-bit RGB. The monochrome mapping is tabulated over the stored
// values present when they span at most 2^20 (every image of 20 bits stored
// or fewer), and computed per pixel otherwise; both give the same bytes.
func (im *dicomImage) render(fr *DICOMFrame) (*Pixels, error) {
	if fr.SamplesPerPixel == 3 {
		return renderColour(fr)
	}
	n := fr.Rows * fr.Columns
	lo, hi := fr.Value(0), fr.Value(0)
	for i := range n {
		v := fr.Value(i)
		lo, hi = min(lo, v), max(hi, v)
	}
	gray, err := im.grayMap(float64(lo), float64(hi))
	if err != nil {
		return nil, err
	}
	p := &Pixels{W: fr.Columns, H: fr.Rows, C: 1, Pix: make([]uint8, n)}
	if hi-lo < 1<<20 {
		table := make([]uint8, hi-lo+1)
		for i := range table {
			table[i] = gray(float64(lo + int64(i)))
		}
		switch {
		case fr.Pix != nil && !fr.Signed:
			for i, v := range fr.Pix {
				p.Pix[i] = table[int64(v)-lo]
			}
		default:
			for i := range p.Pix {
				p.Pix[i] = table[fr.Value(i)-lo]
			}
		}
		return p, nil
	}
	for i := range p.Pix {
		p.Pix[i] = gray(float64(fr.Value(i)))
	}
	return p, nil
}

// renderFloat renders Float Pixel Data (finite values): the VOI window or
// LUT when present, the image's own range otherwise, and the inversion.
func (im *dicomImage) renderFloat(vals []float64) (*Pixels, error) {
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	im.slope, im.intercept = 1, 0 // float pixel data has no modality LUT
	gray, err := im.grayMap(lo, hi)
	if err != nil {
		return nil, err
	}
	p := &Pixels{W: im.cols, H: im.rows, C: 1, Pix: make([]uint8, len(vals))}
	for i, v := range vals {
		p.Pix[i] = gray(v)
	}
	return p, nil
}

// grayMap returns the mapping from a stored value to 8-bit gray, given the
// range of the stored values; it refuses a rescale whose output is not
// finite over that range.
func (im *dicomImage) grayMap(lo, hi float64) (func(float64) uint8, error) {
	a, b := lo*im.slope+im.intercept, hi*im.slope+im.intercept
	xlo, xhi := min(a, b), max(a, b)
	if math.IsInf(xlo, 0) || math.IsInf(xhi, 0) || math.IsInf(xhi-xlo, 0) || math.IsNaN(xhi-xlo) {
		return nil, fmt.Errorf("%w: Rescale Slope %g and Intercept %g map the stored values %g..%g outside the finite range",
			ErrDICOM, im.slope, im.intercept, lo, hi)
	}
	var voi func(x float64) float64
	switch {
	case im.window != nil:
		voi = im.window.apply
	case im.lut != nil:
		lut := im.lut
		voi = func(x float64) float64 {
			// The table is indexed by the value after the modality LUT
			// (PS3.3 C.11.2.1.1).
			i := int(max(-1<<31, min(1<<31, math.Floor(x)))) - lut.first
			i = max(0, min(i, len(lut.data)-1))
			return float64(lut.data[i]) * lut.scale
		}
	default:
		// The image's own range, after the modality LUT (whose slope may
		// be negative).
		voi = func(x float64) float64 {
			if xhi <= xlo {
				return 0
			}
			return (x - xlo) / (xhi - xlo) * 255
		}
	}
	return func(v float64) uint8 {
		y := voi(v*im.slope + im.intercept)
		q := uint8(math.Round(max(0, min(255, y))))
		if im.monochrome1 {
			q = 255 - q
		}
		return q
	}, nil
}

// renderColour converts a colour frame to 8-bit RGB: RGB samples scaled
// from Bits Stored to 8 bits, YBR_FULL converted by PS3.3 C.7.6.3.1.2 (the
// JFIF equations, chroma centred at half the range).
func renderColour(fr *DICOMFrame) (*Pixels, error) {
	n := fr.Rows * fr.Columns
	p := &Pixels{W: fr.Columns, H: fr.Rows, C: 3, Pix: make([]uint8, 3*n)}
	maxv := float64(int64(1)<<fr.BitsStored - 1)
	scale := 255 / maxv
	q := func(x float64) uint8 { return uint8(math.Round(max(0, min(255, x*scale)))) }
	val := func(i int) float64 {
		v := fr.Value(i)
		if fr.Signed { // centre signed samples at half the range
			v += int64(1) << (fr.BitsStored - 1)
		}
		return float64(v)
	}
	switch fr.Photometric {
	case "RGB":
		if fr.BitsStored == 8 && !fr.Signed {
			for i, v := range fr.Pix {
				p.Pix[i] = uint8(v)
			}
			return p, nil
		}
		for i := range p.Pix {
			p.Pix[i] = q(val(i))
		}
	case "YBR_FULL":
		half := float64(int64(1) << (fr.BitsStored - 1))
		for i := range n {
			y, cb, cr := val(3*i), val(3*i+1)-half, val(3*i+2)-half
			p.Pix[3*i] = q(y + 1.402*cr)
			p.Pix[3*i+1] = q(y - 0.344136*cb - 0.714136*cr)
			p.Pix[3*i+2] = q(y + 1.772*cb)
		}
	default:
		return nil, fmt.Errorf("%w: rendering photometric interpretation %s", ErrDICOMUnsupported, fr.Photometric)
	}
	return p, nil
}
