package half

import "math"

// FromFloat32 returns the binary16 encoding of f rounded to nearest, ties to
// even: magnitudes of 65520 and above become ±Inf, those of 2⁻²⁵ and below
// ±0; a NaN stays a NaN (quiet, with the top bits of its payload), as
// VCVTPS2PH converts.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15 // biased binary16 exponent
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0:
		// A subnormal result (or zero): value = m·2^(e−25) with the
		// implicit bit, in units of 2⁻²⁴ after shifting right by 14−e.
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++ // may carry into the smallest normal, 0x0400
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to Inf (0x7c00)
	}
	return sign | uint16(h)
}

// ToFloat32 returns the value of the binary16 encoding h, exactly.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	if h&0x7c00 == 0x7c00 { // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | uint32(h&0x3ff)<<13)
	}
	// Normal and subnormal numbers alike: place the 15 bits as a float32
	// with the exponent 112 too small, and scale by 2¹¹² (exact).
	f := math.Float32frombits(uint32(h&0x7fff)<<13) * 0x1p112
	return math.Float32frombits(sign | math.Float32bits(f))
}

// Encode writes the binary16 encodings of src into dst (FromFloat32 for each
// value). It panics if dst is shorter than src.
func Encode(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic("half: Encode destination too short")
	}
	n := len(src)
	n8 := 0
	if useAsm() {
		n8 = n &^ 7
		if n8 > 0 {
			encodeAsm(dst[:n8], src[:n8])
		}
	}
	for i := n8; i < n; i++ {
		dst[i] = FromFloat32(src[i])
	}
}

// Decode writes the values of the binary16 encodings src into dst. It
// panics if dst is shorter than src.
func Decode(dst []float32, src []uint16) {
	if len(dst) < len(src) {
		panic("half: Decode destination too short")
	}
	n := len(src)
	n8 := 0
	if useAsm() {
		n8 = n &^ 7
		if n8 > 0 {
			decodeAsm(dst[:n8], src[:n8])
		}
	}
	for i := n8; i < n; i++ {
		dst[i] = ToFloat32(src[i])
	}
}
