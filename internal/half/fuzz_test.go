package half

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzProduct checks products of fuzzed shapes, strides, storage and
// epilogue against the float64 reference, on the kernels the CPU runs and
// on the Go loops.
func FuzzProduct(f *testing.F) {
	f.Add(uint8(3), uint16(513), uint16(65), uint8(1), uint8(0b111), uint64(1))
	f.Add(uint8(1), uint16(7), uint16(8), uint8(0), uint8(0b1000), uint64(2))
	f.Add(uint8(9), uint16(64), uint16(511), uint8(2), uint8(0b1010), uint64(3))
	f.Add(uint8(4), uint16(1), uint16(1), uint8(0), uint8(0), uint64(4))
	f.Fuzz(func(t *testing.T, m uint8, n, k uint16, pad, flags uint8, seed uint64) {
		M, N, K := int(m%13), int(n%700), int(k%700)
		rng := rand.New(rand.NewPCG(seed, 7))
		half := flags&8 != 0
		for _, asm := range asmModes() {
			p := newProduct(rng, half, M, N, K, int(pad%4), flags&1 != 0, flags&2 != 0, flags&4 != 0)
			runMode(asm, func() {
				var r Runner
				r.Add(p.op)
				r.Run()
			})
			if err := p.verify(); err != nil {
				t.Fatalf("asm=%v half=%v m=%d n=%d k=%d: %v", asm, half, M, N, K, err)
			}
		}
	})
}

// FuzzConvert checks Encode and Decode against FromFloat32 and ToFloat32
// (the assembly, where it runs, against the Go) on fuzzed bit patterns, and
// that decoding an encoding is within half an ulp of binary16.
func FuzzConvert(f *testing.F) {
	f.Add(uint32(0x3f800000), uint32(0x477fe000), uint16(0x7bff))
	f.Add(uint32(0x33000000), uint32(0x7fc00001), uint16(0x0001))
	f.Fuzz(func(t *testing.T, a, b uint32, h uint16) {
		src := make([]float32, 19)
		for i := range src {
			src[i] = math.Float32frombits(a + uint32(i)*(b|1))
		}
		enc := make([]uint16, len(src))
		Encode(enc, src)
		for i, v := range src {
			if enc[i] != FromFloat32(v) {
				t.Fatalf("Encode(%g) = %#04x, FromFloat32 %#04x", v, enc[i], FromFloat32(v))
			}
			back := float64(ToFloat32(enc[i]))
			x := float64(v)
			if math.IsNaN(x) || math.Abs(x) >= 65520 || math.IsInf(back, 0) {
				continue
			}
			// Half an ulp: 2⁻¹¹ relative for normals, 2⁻²⁵ absolute below.
			if tol := math.Max(math.Abs(x)*0x1p-11, 0x1p-25); math.Abs(back-x) > tol {
				t.Fatalf("%g encodes to %g", x, back)
			}
		}
		hs := []uint16{h, h ^ 0x8000, h + 1, h - 1, 0, 0x3c00, 0x7c00, 0x8400, h, h, h, h, h, h, h, h, 0x0001}
		dec := make([]float32, len(hs))
		Decode(dec, hs)
		for i, v := range hs {
			want := ToFloat32(v)
			if math.Float32bits(dec[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(dec[i]))) {
				t.Fatalf("Decode(%#04x) = %v, want %v", v, dec[i], want)
			}
		}
	})
}
