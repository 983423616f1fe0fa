package kernels

import (
	"fmt"
	"math"
)

// ConvGeom is the geometry of a 2-D convolution or pooling window over one
// channel plane, in PyTorch's convention:
//
//	Ho = (H + 2·PadH − DilH·(KH−1) − 1)/StrideH + 1   (floor)
//
// and likewise for W. Output pixel (oy, ox) reads input rows
// oy·StrideH − PadH + ky·DilH for ky < KH; rows outside [0, H) are padding.
type ConvGeom struct {
	H, W             int // input plane
	KH, KW           int // window
	StrideH, StrideW int
	PadH, PadW       int
	DilH, DilW       int
}

// OutH returns the output height (0 if the window does not fit).
func (c ConvGeom) OutH() int { return outSize(c.H, c.KH, c.StrideH, c.PadH, c.DilH) }

// OutW returns the output width (0 if the window does not fit).
func (c ConvGeom) OutW() int { return outSize(c.W, c.KW, c.StrideW, c.PadW, c.DilW) }

func outSize(n, k, s, p, d int) int {
	span := d*(k-1) + 1
	if n+2*p < span {
		return 0
	}
	return (n+2*p-span)/s + 1
}

// Check panics unless every size is positive (padding non-negative).
func (c ConvGeom) Check() {
	if c.H < 0 || c.W < 0 || c.KH < 1 || c.KW < 1 || c.StrideH < 1 || c.StrideW < 1 ||
		c.PadH < 0 || c.PadW < 0 || c.DilH < 1 || c.DilW < 1 {
		panic(fmt.Sprintf("kernels: invalid convolution geometry %+v", c))
	}
}

// Pointwise reports whether the window is 1×1 with stride 1 and no padding,
// so that the column matrix of a plane set is the plane set itself.
func (c ConvGeom) Pointwise() bool {
	return c.KH == 1 && c.KW == 1 && c.StrideH == 1 && c.StrideW == 1 && c.PadH == 0 && c.PadW == 0
}

// Im2col unfolds one image x (C, H, W) into the column matrix dst
// (C·KH·KW, Ho·Wo) with row stride ldd ≥ Ho·Wo: row (c·KH + ky)·KW + kx holds,
// for every output pixel, the input sample under window tap (ky, kx) of
// channel c, or 0 in the padding. Then a convolution with weight
// (Cout, C·KH·KW) is the product W·dst, which is how torch lays out conv
// weights (Cout, Cin, KH, KW). With ldd = B·Ho·Wo, B images unfold side by
// side (image b at column b·Ho·Wo) and one product serves them all.
func Im2col[T Float](dst []T, ldd int, x []T, c int, g ConvGeom) {
	ho, wo := g.OutH(), g.OutW()
	n := ho * wo
	rows := c * g.KH * g.KW
	if ldd < n || len(x) < c*g.H*g.W || rows > 0 && len(dst) < (rows-1)*ldd+n {
		panic("kernels: Im2col buffer too short")
	}
	row := 0
	for ch := 0; ch < c; ch++ {
		plane := x[ch*g.H*g.W : (ch+1)*g.H*g.W]
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				out := dst[row*ldd : row*ldd+n]
				row++
				dx := kx*g.DilW - g.PadW
				// Output columns whose input column ix = ox·s + dx lies in [0, W).
				lo, hi := validRange(wo, g.W, g.StrideW, dx)
				for oy := 0; oy < ho; oy++ {
					iy := oy*g.StrideH - g.PadH + ky*g.DilH
					o := out[oy*wo : (oy+1)*wo]
					if iy < 0 || iy >= g.H {
						clear(o)
						continue
					}
					src := plane[iy*g.W : (iy+1)*g.W]
					clear(o[:lo])
					if g.StrideW == 1 {
						copy(o[lo:hi], src[lo+dx:hi+dx])
					} else {
						for ox := lo; ox < hi; ox++ {
							o[ox] = src[ox*g.StrideW+dx]
						}
					}
					clear(o[hi:])
				}
			}
		}
	}
}

// Im2colNHWC unfolds the output rows [lo, hi) of images x (B, H, W, C),
// channels last, into the column matrix dst (B·Ho·Wo, KH·KW·C): the row of
// output pixel (oy, ox) of image b, (b·Ho + oy)·Wo + ox, holds its window
// tap by tap, channels innermost:
//
//	dst[((b·Ho+oy)·Wo+ox)·KH·KW·C + (ky·KW+kx)·C + c] = x[b][oy·s−p+ky·d][ox·s−p+kx·d][c]
//
// or 0 in the padding. A row index r in [lo, hi) is b·Ho + oy, so that
// goroutines can share out the rows. Then a convolution is the product of
// dst with its weight laid out (KH·KW·C, Cout), tap-major, and the product
// is (B·Ho·Wo, Cout), channels last again. With an undilated window the
// taps of a window row are one contiguous run of x, copied at once.
func Im2colNHWC[T Float](dst, x []T, c int, g ConvGeom, lo, hi int) {
	ho, wo := g.OutH(), g.OutW()
	k := g.KH * g.KW * c
	if hi > lo && (len(dst) < hi*wo*k || len(x) < ((hi-1)/max(ho, 1)+1)*g.H*g.W*c) {
		panic("kernels: Im2colNHWC buffer too short")
	}
	for r := lo; r < hi; r++ {
		b, oy := r/ho, r%ho
		img := x[b*g.H*g.W*c : (b+1)*g.H*g.W*c]
		for ox := 0; ox < wo; ox++ {
			row := dst[(r*wo+ox)*k : (r*wo+ox+1)*k]
			ix0 := ox*g.StrideW - g.PadW
			// The taps kx in [kxLo, kxHi) fall inside the image.
			kxLo, kxHi := validRange(g.KW, g.W, g.DilW, ix0)
			for ky := 0; ky < g.KH; ky++ {
				seg := row[ky*g.KW*c : (ky+1)*g.KW*c]
				iy := oy*g.StrideH - g.PadH + ky*g.DilH
				if iy < 0 || iy >= g.H || kxLo >= kxHi {
					clear(seg)
					continue
				}
				src := img[iy*g.W*c : (iy+1)*g.W*c]
				clear(seg[:kxLo*c])
				if g.DilW == 1 {
					copy(seg[kxLo*c:kxHi*c], src[(ix0+kxLo)*c:(ix0+kxHi)*c])
				} else {
					for kx := kxLo; kx < kxHi; kx++ {
						ix := ix0 + kx*g.DilW
						copy(seg[kx*c:(kx+1)*c], src[ix*c:(ix+1)*c])
					}
				}
				clear(seg[kxHi*c:])
			}
		}
	}
}

// MaxPoolNHWC writes into the output rows [lo, hi) of dst (B, Ho, Wo, C)
// the maximum of each window of x (B, H, W, C), channels last, as MaxPool
// does without the argmax (inference): padding never wins, NaN propagates,
// and a window of padding only yields −∞. A row index r is b·Ho + oy.
func MaxPoolNHWC[T Float](dst, x []T, c int, g ConvGeom, lo, hi int) {
	ho, wo := g.OutH(), g.OutW()
	if hi > lo && (len(dst) < hi*wo*c || len(x) < ((hi-1)/max(ho, 1)+1)*g.H*g.W*c) {
		panic("kernels: MaxPoolNHWC buffer too short")
	}
	for r := lo; r < hi; r++ {
		b, oy := r/ho, r%ho
		img := x[b*g.H*g.W*c : (b+1)*g.H*g.W*c]
		for ox := 0; ox < wo; ox++ {
			d := dst[(r*wo+ox)*c : (r*wo+ox+1)*c]
			ix0 := ox*g.StrideW - g.PadW
			kxLo, kxHi := validRange(g.KW, g.W, g.DilW, ix0)
			first := true
			for ky := 0; ky < g.KH; ky++ {
				iy := oy*g.StrideH - g.PadH + ky*g.DilH
				if iy < 0 || iy >= g.H {
					continue
				}
				for kx := kxLo; kx < kxHi; kx++ {
					ix := ix0 + kx*g.DilW
					src := img[(iy*g.W+ix)*c : (iy*g.W+ix+1)*c]
					if first {
						copy(d, src)
						first = false
						continue
					}
					maxInto(d, src)
				}
			}
			if first {
				for i := range d {
					d[i] = T(math.Inf(-1))
				}
			}
		}
	}
}

// maxInto sets d[i] = max(d[i], s[i]), where a NaN, once in d or from s,
// stays (the built-in max, which compiles without branches).
func maxInto[T Float](d, s []T) {
	s = s[:len(d)]
	for i, v := range s {
		d[i] = max(d[i], v)
	}
}

// validRange returns [lo, hi): the output indices o < nOut with
// 0 ≤ o·s + off < nIn.
func validRange(nOut, nIn, s, off int) (lo, hi int) {
	if off < 0 {
		lo = (-off + s - 1) / s
	}
	if nIn-off <= 0 {
		return 0, 0
	}
	hi = min(nOut, (nIn-off+s-1)/s)
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// Col2im is the adjoint of Im2col: it adds every entry of the column matrix
// col (C·KH·KW, Ho·Wo), row stride ldc, into the input sample it was read
// from, dx (C, H, W). Padding entries are dropped. In the forward pass this
// was col[(c·KH+ky)·KW+kx][oy·Wo+ox] = x[c][oy·s−p+ky·d][ox·s−p+kx·d].
func Col2im[T Float](dx, col []T, ldc int, c int, g ConvGeom) {
	ho, wo := g.OutH(), g.OutW()
	n := ho * wo
	rows := c * g.KH * g.KW
	if ldc < n || len(dx) < c*g.H*g.W || rows > 0 && len(col) < (rows-1)*ldc+n {
		panic("kernels: Col2im buffer too short")
	}
	row := 0
	for ch := 0; ch < c; ch++ {
		plane := dx[ch*g.H*g.W : (ch+1)*g.H*g.W]
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				in := col[row*ldc : row*ldc+n]
				row++
				off := kx*g.DilW - g.PadW
				lo, hi := validRange(wo, g.W, g.StrideW, off)
				for oy := 0; oy < ho; oy++ {
					iy := oy*g.StrideH - g.PadH + ky*g.DilH
					if iy < 0 || iy >= g.H {
						continue
					}
					dst := plane[iy*g.W : (iy+1)*g.W]
					src := in[oy*wo : (oy+1)*wo]
					for ox := lo; ox < hi; ox++ {
						dst[ox*g.StrideW+off] += src[ox]
					}
				}
			}
		}
	}
}

// MaxPool writes into dst (C, Ho, Wo) the maximum of each window of x
// (C, H, W) and into arg the flat index in its plane (iy·W + ix) of the
// maximum (the first one on ties, scanning rows then columns), as
// torch.nn.MaxPool2d. Padding counts as −∞: it never wins. A window that
// holds only padding (possible only with PadH ≥ KH) yields −∞ and arg −1.
func MaxPool[T Float](dst []T, arg []int32, x []T, c int, g ConvGeom) {
	ho, wo := g.OutH(), g.OutW()
	if len(x) < c*g.H*g.W || len(dst) < c*ho*wo || len(arg) < c*ho*wo {
		panic("kernels: MaxPool buffer too short")
	}
	for ch := 0; ch < c; ch++ {
		plane := x[ch*g.H*g.W : (ch+1)*g.H*g.W]
		o := ch * ho * wo
		for oy := 0; oy < ho; oy++ {
			for ox := 0; ox < wo; ox++ {
				best, at := T(0), int32(-1)
				for ky := 0; ky < g.KH; ky++ {
					iy := oy*g.StrideH - g.PadH + ky*g.DilH
					if iy < 0 || iy >= g.H {
						continue
					}
					for kx := 0; kx < g.KW; kx++ {
						ix := ox*g.StrideW - g.PadW + kx*g.DilW
						if ix < 0 || ix >= g.W {
							continue
						}
						v := plane[iy*g.W+ix]
						// NaN propagates, as in torch: a NaN always wins.
						if at < 0 || v > best || v != v {
							best, at = v, int32(iy*g.W+ix)
						}
					}
				}
				if at < 0 {
					best = T(math.Inf(-1))
				}
				dst[o] = best
				arg[o] = at
				o++
			}
		}
	}
}

// MaxPoolBackward routes dy (C, Ho, Wo) back to the argmax positions:
// dx[c][arg] += dy. In the forward pass this was y = x[c][arg].
func MaxPoolBackward[T Float](dx, dy []T, arg []int32, c, planeIn, planeOut int) {
	for ch := 0; ch < c; ch++ {
		d := dx[ch*planeIn : (ch+1)*planeIn]
		for i, a := range arg[ch*planeOut : (ch+1)*planeOut] {
			if a >= 0 {
				d[a] += dy[ch*planeOut+i]
			}
		}
	}
}

// ChannelAffine writes dst[b][c][i] = x[b][c][i]·scale[c] + shift[c] for x
// laid out (B, C, plane): batch norm with folded statistics. scale or shift
// may be nil (1 or 0).
func ChannelAffine[T Float](dst, x, scale, shift []T, c, plane int) {
	for off := 0; off+c*plane <= len(x) && c*plane > 0; off += c * plane {
		for ch := 0; ch < c; ch++ {
			s, t := T(1), T(0)
			if scale != nil {
				s = scale[ch]
			}
			if shift != nil {
				t = shift[ch]
			}
			src := x[off+ch*plane : off+(ch+1)*plane]
			out := dst[off+ch*plane : off+(ch+1)*plane]
			for i, v := range src {
				out[i] = v*s + t
			}
		}
	}
}

// ChannelStats returns, in float64, the mean and biased variance of each
// channel of x (B, C, plane) over the batch and the plane.
func ChannelStats[T Float](mean, variance []float64, x []T, c, plane int) {
	batch := 0
	if c*plane > 0 {
		batch = len(x) / (c * plane)
	}
	m := float64(batch * plane)
	for ch := 0; ch < c; ch++ {
		var s float64
		for b := 0; b < batch; b++ {
			for _, v := range x[(b*c+ch)*plane : (b*c+ch+1)*plane] {
				s += float64(v)
			}
		}
		mu := s / m
		var ss float64
		for b := 0; b < batch; b++ {
			for _, v := range x[(b*c+ch)*plane : (b*c+ch+1)*plane] {
				d := float64(v) - mu
				ss += d * d
			}
		}
		mean[ch], variance[ch] = mu, ss/m
	}
}

// ChannelSums adds, for each channel, Σ dy into sdy and Σ dy·x into sdyx over
// the batch and the plane (either output may be nil), in float64. x may be nil
// when sdyx is.
func ChannelSums[T Float](sdy, sdyx []float64, dy, x []T, c, plane int) {
	if c*plane == 0 {
		return
	}
	batch := len(dy) / (c * plane)
	for ch := 0; ch < c; ch++ {
		var s, sx float64
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			d := dy[off : off+plane]
			if sdyx != nil {
				xs := x[off : off+plane]
				for i, v := range d {
					s += float64(v)
					sx += float64(v) * float64(xs[i])
				}
			} else {
				for _, v := range d {
					s += float64(v)
				}
			}
		}
		if sdy != nil {
			sdy[ch] += s
		}
		if sdyx != nil {
			sdyx[ch] += sx
		}
	}
}

// BatchNormTrainBackward accumulates into dx the gradient of batch
// normalisation with batch statistics. In the forward pass this was
// x̂ = (x − μ_c)·inv_c, y = x̂·γ_c + β_c with μ, σ² the biased statistics over
// the m = B·plane samples of channel c and inv = 1/sqrt(σ² + eps), so
//
//	dx = γ·inv·(dy − mean(dy) − x̂·mean(dy·x̂))
//
// with the means over the channel's m samples. xhat is x̂ (B, C, plane);
// sdy and sdyx are Σdy and Σdy·x̂ per channel; gamma may be nil (1).
func BatchNormTrainBackward[T Float](dx, dy, xhat []T, gamma []T, inv, sdy, sdyx []float64, c, plane int) {
	if c*plane == 0 {
		return
	}
	batch := len(dy) / (c * plane)
	m := float64(batch * plane)
	for ch := 0; ch < c; ch++ {
		g := 1.0
		if gamma != nil {
			g = float64(gamma[ch])
		}
		k := g * inv[ch]
		mdy, mdyx := sdy[ch]/m, sdyx[ch]/m
		for b := 0; b < batch; b++ {
			off := (b*c + ch) * plane
			d, xh, o := dy[off:off+plane], xhat[off:off+plane], dx[off:off+plane]
			for i := range d {
				o[i] += T(k * (float64(d[i]) - mdy - float64(xh[i])*mdyx))
			}
		}
	}
}

// AvgPlanes writes dst[i] = mean of plane i of x (len(dst) planes of size
// plane), summing in float64: global average pooling of (B, C, H, W) into
// (B, C).
func AvgPlanes[T Float](dst, x []T, plane int) {
	for i := range dst {
		var s float64
		for _, v := range x[i*plane : (i+1)*plane] {
			s += float64(v)
		}
		dst[i] = T(s / float64(plane))
	}
}

// AvgPlanesBackward spreads each dy[i]/plane over plane i of dx. In the
// forward pass this was y[i] = Σ x[i·plane:(i+1)·plane]/plane.
func AvgPlanesBackward[T Float](dx, dy []T, plane int) {
	for i, d := range dy {
		v := d / T(plane)
		for j := range dx[i*plane : (i+1)*plane] {
			dx[i*plane+j] += v
		}
	}
}

// CopyRows copies the rows×n matrix src (row stride lds) into dst (row
// stride ldd): dst[r·ldd+j] = src[r·lds+j].
func CopyRows[T Float](dst []T, ldd int, src []T, lds int, rows, n int) {
	for r := 0; r < rows; r++ {
		copy(dst[r*ldd:r*ldd+n], src[r*lds:r*lds+n])
	}
}

// AddRows adds the rows×n matrix src (row stride lds) into dst (row stride
// ldd): dst[r·ldd+j] += src[r·lds+j].
func AddRows[T Float](dst []T, ldd int, src []T, lds int, rows, n int) {
	for r := 0; r < rows; r++ {
		d, s := dst[r*ldd:r*ldd+n], src[r*lds:r*lds+n]
		for j, v := range s {
			d[j] += v
		}
	}
}
