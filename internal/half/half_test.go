package half

import (
	"math"
	"math/rand/v2"
	"testing"
)

// withoutAsm runs f with the assembly switched off.
func withoutAsm(f func()) {
	old := noAsm.Load()
	noAsm.Store(true)
	defer noAsm.Store(old)
	f()
}

// asmModes returns the kernel choices to test: the pure-Go loops, and the
// assembly where it runs.
func asmModes() []bool {
	if useAsm() {
		return []bool{false, true}
	}
	return []bool{false}
}

func runMode(useAsm bool, f func()) {
	if useAsm {
		f()
		return
	}
	withoutAsm(f)
}

// TestDecodeExhaustive checks every binary16 value: ToFloat32 against the
// definition of the format, Decode (assembly or not) against ToFloat32, and
// that FromFloat32 gives back each encoding (NaNs as a NaN).
func TestDecodeExhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, asm := range asmModes() {
		dst := make([]float32, len(src))
		runMode(asm, func() { Decode(dst, src) })
		for i, h := range src {
			want := reference(h)
			got := ToFloat32(h)
			if math.IsNaN(want) {
				if !math.IsNaN(float64(got)) || !math.IsNaN(float64(dst[i])) {
					t.Fatalf("%#04x: %v, %v, want NaN", h, got, dst[i])
				}
				if FromFloat32(got)&0x7e00 != 0x7e00 {
					t.Fatalf("%#04x: NaN encoded as %#04x", h, FromFloat32(got))
				}
				continue
			}
			if float64(got) != want || math.Float32bits(got) != math.Float32bits(dst[i]) {
				t.Fatalf("asm=%v %#04x: ToFloat32 %v, Decode %v, want %v", asm, h, got, dst[i], want)
			}
			if back := FromFloat32(got); back != h {
				t.Fatalf("%#04x: round trip gives %#04x", h, back)
			}
		}
	}
}

// reference is the value of a binary16 encoding from the definition of the
// format, in float64.
func reference(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * m * math.Ldexp(1, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + m/1024) * math.Ldexp(1, e-15)
}

// nearest is the binary16 rounding of f by exhaustive comparison with its
// neighbours: the encoding of least |value − f|, the even one on a tie, and
// ±Inf from 65520 on.
func nearest(f float32) uint16 {
	x := math.Abs(float64(f))
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	if x >= 65520 {
		return sign | 0x7c00
	}
	// Binary search for the largest finite encoding ≤ x.
	lo, hi := uint16(0), uint16(0x7bff)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if reference(mid) <= x {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if reference(lo) == x || lo == 0x7bff {
		return sign | lo
	}
	d0, d1 := x-reference(lo), reference(lo+1)-x
	if d1 < d0 || d1 == d0 && (lo+1)&1 == 0 {
		return sign | (lo + 1)
	}
	return sign | lo
}

// TestEncode checks FromFloat32 and Encode against exhaustive rounding on
// the values near every binary16 value and its midpoints, the overflow and
// underflow thresholds, and random floats of every exponent.
func TestEncode(t *testing.T) {
	var fs []float32
	for h := 0; h < 0x7c00; h++ {
		v := float32(reference(uint16(h)))
		next := float32(reference(uint16(h + 1)))
		if h == 0x7bff {
			next = 65536
		}
		mid := (v + next) / 2 // exact in float32
		for _, f := range []float32{v, mid, next} {
			fs = append(fs, f, math.Nextafter32(f, 0), math.Nextafter32(f, 1e9), -f)
		}
	}
	fs = append(fs, 65504, 65519.996, 65520, 1e10, float32(math.Inf(1)), float32(math.Inf(-1)),
		0x1p-25, math.Nextafter32(0x1p-25, 1), 0x1p-26, 1e-30, math.SmallestNonzeroFloat32, 0, float32(math.Copysign(0, -1)))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		fs = append(fs, math.Float32frombits(rng.Uint32()))
	}
	for _, asm := range asmModes() {
		got := make([]uint16, len(fs))
		runMode(asm, func() { Encode(got, fs) })
		for i, f := range fs {
			if math.IsNaN(float64(f)) {
				b := math.Float32bits(f)
				want := uint16(b>>16)&0x8000 | 0x7e00 | uint16(b>>13&0x3ff)
				if got[i] != want || FromFloat32(f) != want {
					t.Fatalf("asm=%v NaN %#08x: %#04x, %#04x, want %#04x", asm, b, got[i], FromFloat32(f), want)
				}
				continue
			}
			want := nearest(f)
			if got[i] != want || FromFloat32(f) != want {
				t.Fatalf("asm=%v %g (%#08x): Encode %#04x, FromFloat32 %#04x, want %#04x", asm, f, math.Float32bits(f), got[i], FromFloat32(f), want)
			}
		}
	}
}

func TestEncodeShort(t *testing.T) {
	for _, f := range []func(){
		func() { Encode(make([]uint16, 3), make([]float32, 4)) },
		func() { Decode(make([]float32, 3), make([]uint16, 4)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic on a short destination")
				}
			}()
			f()
		}()
	}
}
