package vision

// The resampler follows Pillow's libImaging/Resample.c (Pillow 9, the version
// behind torchvision 0.14's PIL path): precompute_coeffs,
// normalize_coeffs_8bpc, ImagingResampleHorizontal_8bpc,
// ImagingResampleVertical_8bpc and ImagingResampleInner. Every rounding step
// is kept, so the output is bit-identical to Image.resize(size, BILINEAR).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// precisionBits is Pillow's PRECISION_BITS for 8-bit images: coefficients
// are fixed-point integers scaled by 2^22, leaving 8 bits for the sample and
// 2 for the sign and the overshoot of a sum.
const precisionBits = 32 - 8 - 2

// coeffs are the resampling weights of one axis: output i reads the n =
// bounds[2i+1] input samples starting at bounds[2i], with the fixed-point
// weights k[i*ksize : i*ksize+n].
type coeffs struct {
	ksize  int
	bounds []int
	k      []int32
}

// bilinearFilter is Pillow's triangle filter, support 1.
func bilinearFilter(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// precomputeCoeffs is Pillow's precompute_coeffs for the box [0, inSize)
// followed by normalize_coeffs_8bpc. When downsampling (scale > 1) the filter
// is stretched by the scale: that is the antialiasing.
func precomputeCoeffs(inSize, outSize int) coeffs {
	const support0 = 1.0 // bilinear support
	scale := float64(inSize) / float64(outSize)
	filterscale := max(scale, 1)
	support := support0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, bounds: make([]int, 2*outSize), k: make([]int32, outSize*ksize)}
	kf := make([]float64, ksize)
	ss := 1 / filterscale
	for xx := range outSize {
		// Explicit float64 conversions keep the compiler from fusing
		// multiply-adds, so the rounding is Pillow's on every platform.
		center := float64((float64(xx) + 0.5) * scale)
		xmin := int(center - support + 0.5) // truncation toward zero, as C's (int)
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		ww := 0.0
		for x := range xmax {
			w := bilinearFilter(float64((float64(x+xmin) - center + 0.5) * ss))
			kf[x] = w
			ww += w
		}
		k := c.k[xx*ksize : (xx+1)*ksize]
		for x := range xmax {
			v := kf[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				k[x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		c.bounds[2*xx], c.bounds[2*xx+1] = xmin, xmax
	}
	return c
}

// clip8 is Pillow's clip8: the fixed-point sum back to a byte, saturating.
func clip8(v int32) uint8 {
	v >>= precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// resampleHorizontal writes rows y0 … y0+dst.H-1 of src, resampled to dst.W
// columns, into dst (ImagingResampleHorizontal_8bpc).
func resampleHorizontal(dst, src *Pixels, y0 int, c *coeffs) {
	C := src.C
	const half = 1 << (precisionBits - 1)
	for y := range dst.H {
		srow := src.Pix[(y0+y)*src.W*C : (y0+y+1)*src.W*C]
		drow := dst.Pix[y*dst.W*C : (y+1)*dst.W*C]
		for xx := range dst.W {
			xmin, n := c.bounds[2*xx], c.bounds[2*xx+1]
			k := c.k[xx*c.ksize : xx*c.ksize+n]
			if C == 1 {
				s := int32(half)
				in := srow[xmin : xmin+n]
				for x, kv := range k {
					s += int32(in[x]) * kv
				}
				drow[xx] = clip8(s)
				continue
			}
			s0, s1, s2 := int32(half), int32(half), int32(half)
			in := srow[3*xmin : 3*(xmin+n)]
			for x, kv := range k {
				p := in[3*x : 3*x+3 : 3*x+3]
				s0 += int32(p[0]) * kv
				s1 += int32(p[1]) * kv
				s2 += int32(p[2]) * kv
			}
			drow[3*xx], drow[3*xx+1], drow[3*xx+2] = clip8(s0), clip8(s1), clip8(s2)
		}
	}
}

// resampleVertical resamples src to dst.H rows (ImagingResampleVertical_8bpc).
// The taps are accumulated row by row, which changes the order of integer
// additions only, not the result. acc has room for one row.
func resampleVertical(dst, src *Pixels, c *coeffs, acc []int32) {
	n := src.W * src.C
	acc = acc[:n]
	const half = 1 << (precisionBits - 1)
	for yy := range dst.H {
		ymin, ny := c.bounds[2*yy], c.bounds[2*yy+1]
		for i := range acc {
			acc[i] = half
		}
		for y, kv := range c.k[yy*c.ksize : yy*c.ksize+ny] {
			row := src.Pix[(ymin+y)*n : (ymin+y+1)*n]
			for i, v := range row {
				acc[i] += int32(v) * kv
			}
		}
		drow := dst.Pix[yy*n : (yy+1)*n]
		for i, s := range acc {
			drow[i] = clip8(s)
		}
	}
}

// Resize resamples src to w×h exactly as Pillow's PIL.Image.resize((w, h),
// PIL.Image.BILINEAR) does, reusing dst's storage (dst may be nil; it must not be
// src). It returns dst. Gray images stay gray. It panics if w or h is not
// positive or src is empty.
func Resize(dst, src *Pixels, w, h int) *Pixels {
	var s scratch
	return resize(dst, src, w, h, &s)
}

// scratch holds Resize's temporaries so a Transform can reuse them.
type scratch struct {
	tmp, out Pixels
	acc      []int32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func resize(dst, src *Pixels, w, h int, s *scratch) *Pixels {
	if w <= 0 || h <= 0 {
		panic(fmt.Sprintf("vision: Resize to %d×%d", w, h))
	}
	if src.W <= 0 || src.H <= 0 || len(src.Pix) < src.W*src.H*src.C {
		panic(fmt.Sprintf("vision: Resize of an empty or short %d×%d×%d image", src.W, src.H, src.C))
	}
	if dst == nil {
		dst = new(Pixels)
	}
	needH, needV := w != src.W, h != src.H
	if !needH && !needV {
		dst.reset(src.W, src.H, src.C)
		copy(dst.Pix, src.Pix)
		return dst
	}
	cv := precomputeCoeffs(src.H, h)
	in := src
	if needH {
		ch := precomputeCoeffs(src.W, w)
		// Only the rows the vertical pass reads are resampled horizontally
		// (ImagingResampleInner's ybox_first … ybox_last).
		first := cv.bounds[0]
		last := cv.bounds[2*h-2] + cv.bounds[2*h-1]
		tmp := dst
		if needV {
			tmp = &s.tmp
			for i := range h {
				cv.bounds[2*i] -= first
			}
		}
		tmp.reset(w, last-first, src.C)
		resampleHorizontal(tmp, src, first, &ch)
		in = tmp
	}
	if needV {
		if cap(s.acc) < in.W*in.C {
			s.acc = make([]int32, in.W*in.C)
		}
		dst.reset(in.W, h, in.C)
		resampleVertical(dst, in, &cv, s.acc)
	}
	return dst
}

// shorterSide returns the size torchvision's Resize(size) gives a w×h image:
// the shorter side becomes size and the longer int(size·long/short),
// truncated as Python's int() does.
func shorterSide(w, h, size int) (nw, nh int) {
	short, long := w, h
	if w > h {
		short, long = h, w
	}
	nl := int(float64(size) * float64(long) / float64(short))
	if w <= h {
		return size, nl
	}
	return nl, size
}

// ImageNet statistics used by R2Gen's Normalize, per RGB channel.
var (
	ImageNetMean = [3]float32{0.485, 0.456, 0.406}
	ImageNetStd  = [3]float32{0.229, 0.224, 0.225}
)

// Transform is an image pipeline in torchvision's order: Resize, RandomCrop,
// RandomHorizontalFlip, ToTensor, Normalize. The zero value is not useful;
// start from [TestTransform] or [TrainTransform]. A Transform is a value and
// safe for concurrent use; the randomness comes from the caller's source.
type Transform struct {
	// Width and Height, when both positive, resize to exactly Width×Height
	// (torchvision Resize((Height, Width)), aspect not preserved).
	Width, Height int
	// Shorter, when positive, resizes the shorter side to Shorter keeping
	// the aspect ratio (torchvision Resize(Shorter)). Exactly one of
	// Width×Height and Shorter must be set.
	Shorter int
	// Crop, when positive, takes a uniformly random Crop×Crop window
	// (torchvision RandomCrop(Crop)).
	Crop int
	// Flip is the probability of a horizontal flip (RandomHorizontalFlip).
	Flip float64
	// Mean and Std normalise each channel: (v/255 − Mean) / Std.
	Mean, Std [3]float32
}

// TestTransform is R2Gen's evaluation transform: Resize((size, size)),
// ToTensor, Normalize(ImageNet); size is 224 in R2Gen.
func TestTransform(size int) Transform {
	return Transform{Width: size, Height: size, Mean: ImageNetMean, Std: ImageNetStd}
}

// TrainTransform is R2Gen's training transform: Resize(resize) on the
// shorter side, RandomCrop(crop), RandomHorizontalFlip(0.5), ToTensor,
// Normalize(ImageNet); R2Gen uses resize 256, crop 224.
func TrainTransform(resize, crop int) Transform {
	return Transform{Shorter: resize, Crop: crop, Flip: 0.5, Mean: ImageNetMean, Std: ImageNetStd}
}

// String names the pipeline in torchvision's terms.
func (t Transform) String() string {
	s := ""
	switch {
	case t.Shorter > 0:
		s = fmt.Sprintf("Resize(%d)", t.Shorter)
	default:
		s = fmt.Sprintf("Resize((%d,%d))", t.Height, t.Width)
	}
	if t.Crop > 0 {
		s += fmt.Sprintf("+RandomCrop(%d)", t.Crop)
	}
	if t.Flip > 0 {
		s += fmt.Sprintf("+Flip(%g)", t.Flip)
	}
	return s + "+Normalize"
}

// Random reports whether the transform draws random numbers.
func (t Transform) Random() bool { return t.Crop > 0 || t.Flip > 0 }

// ErrTransform is returned by [Transform.Apply] for an invalid pipeline or an
// image it cannot be applied to.
var ErrTransform = errors.New("vision: invalid transform")

// maxSide bounds every side a Transform makes (and its output pixels are
// bounded by DefaultMaxPixels): the sizes come from configuration, but a typo
// should give an error, not exhaust memory.
const maxSide = 1 << 16

// Validate reports whether the pipeline is well formed: exactly one kind of
// resize, sides in range, a probability for Flip, a non-zero Std.
func (t Transform) Validate() error {
	fixed := t.Width > 0 || t.Height > 0
	switch {
	case fixed && t.Shorter > 0:
		return fmt.Errorf("%w: both Width×Height and Shorter set", ErrTransform)
	case fixed && (t.Width <= 0 || t.Height <= 0):
		return fmt.Errorf("%w: size %d×%d", ErrTransform, t.Width, t.Height)
	case !fixed && t.Shorter <= 0:
		return fmt.Errorf("%w: no resize size", ErrTransform)
	case t.Width > maxSide || t.Height > maxSide || t.Shorter > maxSide || t.Crop > maxSide:
		return fmt.Errorf("%w: a side over %d", ErrTransform, maxSide)
	case t.Crop < 0 || t.Flip < 0 || t.Flip > 1 || math.IsNaN(t.Flip):
		return fmt.Errorf("%w: crop %d, flip %v", ErrTransform, t.Crop, t.Flip)
	case t.Crop > 0 && (fixed && t.Crop > min(t.Width, t.Height) || !fixed && t.Crop > t.Shorter):
		return fmt.Errorf("%w: crop %d larger than the resized image", ErrTransform, t.Crop)
	}
	for c := range 3 {
		if !(t.Std[c] != 0) || math.IsNaN(float64(t.Mean[c])) {
			return fmt.Errorf("%w: mean %v std %v", ErrTransform, t.Mean, t.Std)
		}
	}
	return nil
}

// Size returns the resized size of a w×h image and the final output size
// (the crop, when there is one).
func (t Transform) Size(w, h int) (rw, rh, ow, oh int) {
	if t.Shorter > 0 {
		rw, rh = shorterSide(w, h, t.Shorter)
	} else {
		rw, rh = t.Width, t.Height
	}
	ow, oh = rw, rh
	if t.Crop > 0 {
		ow, oh = t.Crop, t.Crop
	}
	return rw, rh, ow, oh
}

// Apply runs the pipeline on src and writes a 3×H×W normalised image into
// dst (reusing its storage; dst may be nil) and returns it. rng supplies the
// crop offset and the flip (in that order, as torchvision draws them); it may
// be nil only for a transform without randomness.
func (t Transform) Apply(dst *Image, src *Pixels, rng *rand.Rand) (*Image, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if src.W <= 0 || src.H <= 0 || (src.C != 1 && src.C != 3) || len(src.Pix) < src.W*src.H*src.C {
		return nil, fmt.Errorf("%w: source image %d×%d×%d with %d samples", ErrTransform, src.W, src.H, src.C, len(src.Pix))
	}
	if t.Random() && rng == nil {
		return nil, fmt.Errorf("%w: %v needs a random source", ErrTransform, t)
	}
	rw, rh, ow, oh := t.Size(src.W, src.H)
	if rw <= 0 || rh <= 0 || rw > maxSide || rh > maxSide || int64(rw)*int64(rh) > DefaultMaxPixels {
		return nil, fmt.Errorf("%w: %v gives %d×%d for a %d×%d image", ErrTransform, t, rw, rh, src.W, src.H)
	}
	if ow > rw || oh > rh {
		return nil, fmt.Errorf("%w: crop %d larger than the resized %d×%d image", ErrTransform, t.Crop, rw, rh)
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	img := src
	if rw != src.W || rh != src.H {
		img = resize(&s.out, src, rw, rh, s)
	}

	// RandomCrop.get_params: top then left, each uniform over the valid range.
	top, left := 0, 0
	if t.Crop > 0 {
		top, left = rng.IntN(rh-oh+1), rng.IntN(rw-ow+1)
	}
	flip := t.Flip > 0 && rng.Float64() < t.Flip

	// ToTensor (v/255 in float32) then Normalize ((v−mean)/std in float32),
	// tabulated per channel: the same float32 operations as torch's.
	var lut [3][256]float32
	for c := range 3 {
		for v := range 256 {
			lut[c][v] = (float32(v)/255 - t.Mean[c]) / t.Std[c]
		}
	}
	if dst == nil {
		dst = new(Image)
	}
	dst.reset(3, oh, ow)
	C := img.C
	for c := range 3 {
		sc := min(c, C-1)
		tab := &lut[c]
		for y := range oh {
			srow := img.Pix[((top+y)*img.W+left)*C:]
			drow := dst.Pix[(c*oh+y)*ow : (c*oh+y+1)*ow]
			if flip {
				for x := range drow {
					drow[x] = tab[srow[(ow-1-x)*C+sc]]
				}
			} else {
				for x := range drow {
					drow[x] = tab[srow[x*C+sc]]
				}
			}
		}
	}
	return dst, nil
}
