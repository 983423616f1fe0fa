package jpeg2000

// Inverse discrete wavelet transforms (T.800 Annex F): for each level, a
// horizontal pass over the rows, then a vertical pass over the columns, both
// by lifting with whole-sample symmetric extension. The vertical pass works
// on whole rows at a time, so every lifting step is a loop over contiguous
// memory.

// 9/7 lifting constants (T.800 Table F.4). Each product is converted to
// float32 explicitly, which stops the compiler fusing it with the
// subtraction (as it may on arm64), so every machine gets the same result.
const (
	alpha97 = -1.586134342059924
	beta97  = -0.052980118572961
	gamma97 = 0.882911075530934
	delta97 = 0.443506852043971
	k97     = 1.230174104914001

	// Synthesis gains as OpenJPEG applies them: K on low-pass samples and
	// about 2/K on high-pass ones, whose step sizes then carry no sub-band
	// gain (see band.step). OpenJPEG's 2/K is 1.625732422 where 2/K is
	// 1.6257861; using its value keeps lossy decodes identical to
	// opj_decompress (and GDCM, which uses it), which DICOM references are
	// usually made with. The difference is 3.3e-5 of a high-pass sample.
	lowGain97  = float32(1.230174105)
	highGain97 = float32(1.625732422)
)

// idwt inverts the tile-component's wavelet transform in place.
func (ws *workspace) idwt(tc *tileComp) {
	if tc.w == 0 || tc.h == 0 {
		return
	}
	n := tc.w * tc.h
	if tc.rev {
		if cap(ws.tmpI) < n {
			ws.tmpI = make([]int32, n)
		}
	} else if cap(ws.tmpF) < n {
		ws.tmpF = make([]float32, n)
	}
	for r := 1; r < len(tc.res); r++ {
		res, lo := &tc.res[r], &tc.res[r-1]
		w, h := res.x1-res.x0, res.y1-res.y0
		if w == 0 || h == 0 {
			continue
		}
		snx, cx := lo.x1-lo.x0, res.x0&1
		sny, cy := lo.y1-lo.y0, res.y0&1
		stride := tc.w
		// Horizontal: rows split among workers, each with its own line.
		rowsPer := max(16, (h+ws.workers-1)/ws.workers)
		chunks := (h + rowsPer - 1) / rowsPer
		if tc.rev {
			ws.parallel(chunks, func(_, k int) {
				line := make([]int32, w)
				for y := k * rowsPer; y < min(h, (k+1)*rowsPer); y++ {
					row := tc.coefI[y*stride : y*stride+w]
					interleave(line, row, snx, cx)
					lift53(row, line, cx)
				}
			})
		} else {
			ws.parallel(chunks, func(_, k int) {
				line := make([]float32, w)
				for y := k * rowsPer; y < min(h, (k+1)*rowsPer); y++ {
					row := tc.coefF[y*stride : y*stride+w]
					interleave(line, row, snx, cx)
					lift97(row, line, cx)
				}
			})
		}
		if h == 1 {
			if cy == 1 && tc.rev {
				for x := range w {
					tc.coefI[x] /= 2
				}
			}
			continue
		}
		// Vertical: columns split among workers.
		colsPer := max(64, (w+ws.workers-1)/ws.workers)
		chunks = (w + colsPer - 1) / colsPer
		if tc.rev {
			ws.parallel(chunks, func(_, k int) {
				c0, c1 := k*colsPer, min(w, (k+1)*colsPer)
				vert53(tc.coefI, ws.tmpI, stride, c0, c1, h, sny, cy)
			})
		} else {
			ws.parallel(chunks, func(_, k int) {
				c0, c1 := k*colsPer, min(w, (k+1)*colsPer)
				vert97(tc.coefF, ws.tmpF, stride, c0, c1, h, sny, cy)
			})
		}
	}
}

// interleave copies the low half (sn samples) and high half of src into dst
// at their positions: low samples at parity cas.
func interleave[T int32 | float32](dst, src []T, sn, cas int) {
	n := len(dst)
	for i := 0; i < sn; i++ {
		dst[2*i+cas] = src[i]
	}
	hi := src[sn:]
	for i := 0; 2*i+1-cas < n && i < len(hi); i++ {
		dst[2*i+1-cas] = hi[i]
	}
}

// lift53 inverts the 5/3 lifting of x (interleaved) into out. cas is the
// parity of the first sample (1: it is a high-pass sample).
func lift53(out, x []int32, cas int) {
	n := len(x)
	if n == 1 {
		if cas == 1 {
			out[0] = x[0] / 2
		} else {
			out[0] = x[0]
		}
		return
	}
	at := func(i int) int32 {
		if i < 0 {
			i = -i
		} else if i >= n {
			i = 2*(n-1) - i
		}
		return x[i]
	}
	// Even (low) samples: x[k] -= (x[k-1] + x[k+1] + 2) >> 2.
	k := cas
	if k == 0 {
		x[0] -= (at(-1) + at(1) + 2) >> 2
		k = 2
	}
	for ; k+1 < n; k += 2 {
		x[k] -= (x[k-1] + x[k+1] + 2) >> 2
	}
	if k < n {
		x[k] -= (x[k-1] + at(k+1) + 2) >> 2
	}
	// Odd (high) samples: x[k] += (x[k-1] + x[k+1]) >> 1.
	k = 1 - cas
	if k == 0 {
		x[0] += (at(-1) + at(1)) >> 1
		k = 2
	}
	for ; k+1 < n; k += 2 {
		x[k] += (x[k-1] + x[k+1]) >> 1
	}
	if k < n {
		x[k] += (x[k-1] + at(k+1)) >> 1
	}
	copy(out, x)
}

// lift97 inverts the 9/7 lifting of x into out.
func lift97(out, x []float32, cas int) {
	n := len(x)
	if n == 1 {
		out[0] = x[0]
		return
	}
	for k := cas; k < n; k += 2 {
		x[k] *= lowGain97
	}
	for k := 1 - cas; k < n; k += 2 {
		x[k] *= highGain97
	}
	step97(x, cas, delta97)
	step97(x, 1-cas, gamma97)
	step97(x, cas, beta97)
	step97(x, 1-cas, alpha97)
	copy(out, x)
}

// step97 applies x[k] -= c·(x[k-1] + x[k+1]) for k of parity par.
func step97(x []float32, par int, c float32) {
	n := len(x)
	at := func(i int) float32 {
		if i < 0 {
			i = -i
		} else if i >= n {
			i = 2*(n-1) - i
		}
		return x[i]
	}
	k := par
	if k == 0 {
		x[0] -= float32(c * (at(-1) + at(1)))
		k = 2
	}
	for ; k+1 < n; k += 2 {
		x[k] -= float32(c * (x[k-1] + x[k+1]))
	}
	if k < n {
		x[k] -= float32(c * (x[k-1] + at(k+1)))
	}
}

// mirror maps row index i into [0,n) by whole-sample symmetric extension.
func mirror(i, n int) int {
	if i < 0 {
		i = -i
	} else if i >= n {
		i = 2*(n-1) - i
	}
	return i
}

// vert53 inverts the vertical 5/3 transform of columns [c0,c1) of a region
// of h rows (sn low rows first, then high rows) with row stride stride,
// using tmp (same layout) as scratch.
func vert53(a, tmp []int32, stride, c0, c1, h, sn, cas int) {
	row := func(buf []int32, y int) []int32 { return buf[y*stride+c0 : y*stride+c1] }
	// Interleave rows into tmp.
	for y := range h {
		var src int
		if (y-cas)&1 == 0 {
			src = (y - cas) / 2
		} else {
			src = sn + (y-1+cas)/2
		}
		copy(row(tmp, y), row(a, src))
	}
	// Low rows (parity cas), then high rows, written into a.
	for y := cas; y < h; y += 2 {
		d, s := row(a, y), row(tmp, y)
		u, v := row(tmp, mirror(y-1, h)), row(tmp, mirror(y+1, h))
		u, v = u[:len(s)], v[:len(s)]
		d = d[:len(s)]
		for x := range s {
			d[x] = s[x] - (u[x]+v[x]+2)>>2
		}
	}
	for y := 1 - cas; y < h; y += 2 {
		d, s := row(a, y), row(tmp, y)
		u, v := row(a, mirror(y-1, h)), row(a, mirror(y+1, h))
		u, v = u[:len(s)], v[:len(s)]
		d = d[:len(s)]
		for x := range s {
			d[x] = s[x] + (u[x]+v[x])>>1
		}
	}
}

// vert97 is vert53 for the 9/7 transform.
func vert97(a, tmp []float32, stride, c0, c1, h, sn, cas int) {
	row := func(buf []float32, y int) []float32 { return buf[y*stride+c0 : y*stride+c1] }
	for y := range h {
		var src int
		if (y-cas)&1 == 0 {
			src = (y - cas) / 2
		} else {
			src = sn + (y-1+cas)/2
		}
		copy(row(tmp, y), row(a, src))
	}
	for y := range h {
		f := lowGain97
		if (y-cas)&1 != 0 {
			f = highGain97
		}
		d := row(tmp, y)
		for x := range d {
			d[x] *= f
		}
	}
	step := func(par int, c float32) {
		for y := par; y < h; y += 2 {
			d := row(tmp, y)
			u, v := row(tmp, mirror(y-1, h)), row(tmp, mirror(y+1, h))
			u, v = u[:len(d)], v[:len(d)]
			for x := range d {
				d[x] -= float32(c * (u[x] + v[x]))
			}
		}
	}
	step(cas, delta97)
	step(1-cas, gamma97)
	step(cas, beta97)
	step(1-cas, alpha97)
	for y := range h {
		copy(row(a, y), row(tmp, y))
	}
}
