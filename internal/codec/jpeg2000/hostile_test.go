package jpeg2000

import (
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// TestHostileHeaders patches lying values into a valid stream's SIZ and COD
// markers and requires an error, with the bytes allocated bounded: nothing
// proportional to the declared image is allocated before its data is read.
func TestHostileHeaders(t *testing.T) {
	base := readTestdata(t, "ll_g8_default.j2k") // SIZ at 2, COD at 45
	u32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) }
	}
	u16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.BigEndian.PutUint16(b[off:], v) }
	}
	u8 := func(off int, v byte) func([]byte) {
		return func(b []byte) { b[off] = v }
	}
	const limit = 1 << 24
	cases := []struct {
		name    string
		patches []func([]byte)
		want    error
	}{
		{"huge image", []func([]byte){u32(8, 1<<20), u32(12, 1<<20), u32(24, 1<<20), u32(28, 1<<20)}, codec.ErrTooLarge},
		{"4096² image, 53 rows of data", []func([]byte){u32(8, 4096), u32(12, 4096), u32(24, 4096), u32(28, 4096)}, codec.ErrFormat},
		{"a million 1×1 tiles", []func([]byte){u32(8, 1000), u32(12, 1000), u32(24, 1), u32(28, 1)}, codec.ErrFormat},
		{"65535 layers", []func([]byte){u16(51, 65535)}, codec.ErrFormat},
		{"32 levels, 16 step sizes", []func([]byte){u8(54, 32)}, codec.ErrFormat},
		{"33 levels", []func([]byte){u8(54, 33)}, codec.ErrFormat},
		{"code-block 2^11", []func([]byte){u8(55, 9)}, codec.ErrFormat},
		{"Part 2 wavelet", []func([]byte){u8(58, 2)}, codec.ErrUnsupported},
		{"HT code-blocks", []func([]byte){u8(57, 0x40)}, codec.ErrUnsupported},
		{"HTJ2K Rsiz", []func([]byte){u16(6, 0x4000)}, codec.ErrUnsupported},
		{"SIZ length", []func([]byte){u16(4, 0xFFFF)}, codec.ErrFormat},
		{"COD length", []func([]byte){u16(47, 3)}, codec.ErrFormat},
		{"zero sub-sampling", []func([]byte){u8(43, 0)}, codec.ErrFormat},
		{"precision 17", []func([]byte){u8(42, 16)}, codec.ErrUnsupported},
		{"tile offset beyond image", []func([]byte){u32(32, 100)}, codec.ErrFormat},
	}
	for _, c := range cases {
		b := slices.Clone(base)
		for _, p := range c.patches {
			p(b)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		_, err := Decode(b, limit)
		runtime.ReadMemStats(&m1)
		alloc := m1.TotalAlloc - m0.TotalAlloc
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if alloc > 4<<20 {
			t.Errorf("%s: allocated %d bytes before failing", c.name, alloc)
		}
		t.Logf("%s: %v (%d bytes allocated)", c.name, err, alloc)
	}
}
