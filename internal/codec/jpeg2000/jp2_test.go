package jpeg2000

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

func box(typ string, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	return append(append(out, typ...), body...)
}

// xlBox writes a box with the extended (XLBox) length.
func xlBox(typ string, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, 1)
	out = append(out, typ...)
	out = binary.BigEndian.AppendUint64(out, uint64(16+len(body)))
	return append(out, body...)
}

// TestJP2 unwraps hand-built JP2 files around a code stream and refuses
// palettes.
func TestJP2(t *testing.T) {
	cs := readTestdata(t, "ll_g8_default.j2k")
	want, err := Decode(cs, 0)
	if err != nil {
		t.Fatal(err)
	}
	ihdr := box("ihdr", make([]byte, 14))
	ftyp := box("ftyp", []byte("jp2 \x00\x00\x00\x00jp2 "))
	ok := map[string][]byte{
		"plain":          slices.Concat(jp2Signature, ftyp, box("jp2h", ihdr), box("jp2c", cs)),
		"XLBox":          slices.Concat(jp2Signature, ftyp, xlBox("jp2h", ihdr), xlBox("jp2c", cs)),
		"length 0, last": slices.Concat(jp2Signature, ftyp, box("jp2h", ihdr), []byte{0, 0, 0, 0}, []byte("jp2c"), cs),
	}
	for name, b := range ok {
		got, err := Decode(b, 0)
		if err != nil || !slices.Equal(got.Pix, want.Pix) {
			t.Errorf("%s: err %v or samples differ", name, err)
		}
	}
	bad := map[string]struct {
		b    []byte
		want error
	}{
		"palette":         {slices.Concat(jp2Signature, ftyp, box("jp2h", slices.Concat(ihdr, box("pclr", make([]byte, 8)))), box("jp2c", cs)), codec.ErrUnsupported},
		"no code stream":  {slices.Concat(jp2Signature, ftyp, box("jp2h", ihdr)), codec.ErrFormat},
		"box too long":    {slices.Concat(jp2Signature, []byte{0, 0, 0x10, 0}, []byte("ftyp")), codec.ErrFormat},
		"not J2K in jp2c": {slices.Concat(jp2Signature, box("jp2c", []byte("hello"))), codec.ErrFormat},
	}
	for name, c := range bad {
		if _, err := Decode(c.b, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}
