package jpeg2000

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/radgen/radgen/internal/codec"
)

// repack rewrites a code stream (one tile-part per tile) with its packet
// headers moved into PPM (main header) or PPT (tile-part header) markers,
// using the decoder's own packet boundaries.
func repack(t *testing.T, cs []byte, ppm bool) []byte {
	t.Helper()
	d, err := parseMain(cs, 0)
	if err != nil {
		t.Fatal(err)
	}
	mainHdr := cs[:len(cs)-len(d.cs)]
	if err := d.readTiles(); err != nil {
		t.Fatal(err)
	}
	var f *codec.Frame
	ws := newWorkspace()
	hdrs := make([][]byte, len(d.tiles))
	bodies := make([][]byte, len(d.tiles))
	for ti, td := range slices.Clone(d.tiles) {
		if len(td.bodies) != 1 {
			t.Fatalf("tile %d has %d tile-parts", ti, len(td.bodies))
		}
		b := td.bodies[0]
		d.rec = func(sop, hdr, body, end int) {
			bodies[ti] = append(bodies[ti], b[sop:hdr]...)
			hdrs[ti] = append(hdrs[ti], b[hdr:body]...)
			bodies[ti] = append(bodies[ti], b[body:end]...)
		}
		if err := d.decodeTile(ws, ti, td, &f); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(code int, z int, data []byte) []byte {
		out := binary.BigEndian.AppendUint16(nil, uint16(code))
		out = binary.BigEndian.AppendUint16(out, uint16(3+len(data)))
		return append(append(out, byte(z)), data...)
	}
	chunks := func(b []byte) [][]byte {
		var out [][]byte
		for len(b) > 1000 {
			out = append(out, b[:1000])
			b = b[1000:]
		}
		return append(out, b)
	}
	out := slices.Clone(mainHdr)
	if ppm {
		var all []byte
		for ti := range d.tiles {
			all = binary.BigEndian.AppendUint32(all, uint32(len(hdrs[ti])))
			all = append(all, hdrs[ti]...)
		}
		for z, c := range chunks(all) {
			out = append(out, marker(mPPM, z, c)...)
		}
	}
	for ti := range d.tiles {
		var th []byte
		if !ppm {
			for z, c := range chunks(hdrs[ti]) {
				th = append(th, marker(mPPT, z, c)...)
			}
		}
		psot := 12 + len(th) + 2 + len(bodies[ti])
		sot := []byte{0xFF, 0x90, 0, 10}
		sot = binary.BigEndian.AppendUint16(sot, uint16(ti))
		sot = binary.BigEndian.AppendUint32(sot, uint32(psot))
		sot = append(sot, 0, 1)
		out = append(append(append(append(out, sot...), th...), 0xFF, 0x93), bodies[ti]...)
	}
	return append(out, 0xFF, 0xD9)
}

// TestPackedHeaders decodes streams rewritten with PPM and PPT packed packet
// headers and requires the same samples as the originals.
func TestPackedHeaders(t *testing.T) {
	for _, name := range []string{"ll_g8_layers_LRCP.j2k", "ll_g8_layers_RPCL.j2k", "ll_g8_sop_eph.j2k",
		"ll_rgb8_cprl_tiles.j2k", "ll_g8_tiles_off.j2k", "ly_g8_layers.j2k", "ll_g16_layers.j2k"} {
		data := readTestdata(t, name)
		want, err := Decode(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ppm := range []bool{false, true} {
			packed := repack(t, data, ppm)
			code := []byte{0xFF, 0x61}
			if ppm {
				code = []byte{0xFF, 0x60}
			}
			if !bytes.Contains(packed, code) || len(packed) > 2*len(data) {
				t.Fatalf("%s: repacked stream of %d bytes (from %d) lacks %X", name, len(packed), len(data), code)
			}
			got, err := Decode(packed, 0)
			if err != nil {
				t.Errorf("%s (PPM %v): %v", name, ppm, err)
				continue
			}
			if !slices.Equal(got.Pix, want.Pix) {
				t.Errorf("%s (PPM %v): samples differ from the unpacked stream", name, ppm)
			}
		}
	}
}
