package jpeg2000

import (
	"encoding/binary"
	"slices"
	"testing"
)

// markerAt finds the first marker segment with the given code in the main
// header and returns its start and total length.
func markerAt(t *testing.T, cs []byte, code int) (int, int) {
	t.Helper()
	p := 2
	for p+4 <= len(cs) {
		m := int(binary.BigEndian.Uint16(cs[p:]))
		l := int(binary.BigEndian.Uint16(cs[p+2:]))
		if m == code {
			return p, 2 + l
		}
		if m == mSOT {
			break
		}
		p += 2 + l
	}
	t.Fatalf("no marker %04X in the main header", code)
	return 0, 0
}

func seg(code int, body []byte) []byte {
	out := binary.BigEndian.AppendUint16(nil, uint16(code))
	out = binary.BigEndian.AppendUint16(out, uint16(2+len(body)))
	return append(out, body...)
}

// withTileMarkers inserts extra after the SOT marker segment of every
// tile-part with TPsot 0, fixing Psot.
func withTileMarkers(t *testing.T, cs []byte, extra []byte) []byte {
	t.Helper()
	p, _ := markerAt(t, cs, mCOD)
	for p+4 <= len(cs) && binary.BigEndian.Uint16(cs[p:]) != mSOT {
		p += 2 + int(binary.BigEndian.Uint16(cs[p+2:]))
	}
	out := slices.Clone(cs[:p])
	for p+12 <= len(cs) && binary.BigEndian.Uint16(cs[p:]) == mSOT {
		psot := int(binary.BigEndian.Uint32(cs[p+6:]))
		if psot == 0 {
			psot = len(cs) - p - 2
		}
		sot := slices.Clone(cs[p : p+12])
		add := []byte(nil)
		if cs[p+10] == 0 {
			add = extra
		}
		binary.BigEndian.PutUint32(sot[6:], uint32(psot+len(add)))
		out = append(append(append(out, sot...), add...), cs[p+12:p+psot]...)
		p += psot
	}
	return append(out, cs[p:]...)
}

// TestParameterPrecedence checks T.800's order of coding and quantisation
// parameters (tile COC/QCC > tile COD/QCD > main COC/QCC > main COD/QCD):
// each variant spoils the lower-precedence marker and carries the original
// values in the higher one, so it must decode as the original does.
func TestParameterPrecedence(t *testing.T) {
	for _, name := range []string{"ll_rgb8_nomct.j2k", "ly_g8_layers.j2k", "ll_g8_tiles.j2k"} {
		cs := readTestdata(t, name)
		want, err := Decode(cs, 0)
		if err != nil {
			t.Fatal(err)
		}
		nc := int(binary.BigEndian.Uint16(cs[40:]))
		codP, codL := markerAt(t, cs, mCOD)
		qcdP, qcdL := markerAt(t, cs, mQCD)
		cod := slices.Clone(cs[codP+4 : codP+codL])
		qcd := slices.Clone(cs[qcdP+4 : qcdP+qcdL])
		badCOD := slices.Clone(cod)
		badCOD[6] ^= 0x7 // code-block width 2^6 → 2^5
		badQCD := slices.Clone(qcd)
		badQCD[0] ^= 0x60 // guard bits
		var cocs, qccs []byte
		for c := range nc {
			cocs = append(cocs, seg(mCOC, append([]byte{byte(c), cod[0] & 1}, cod[5:]...))...)
			qccs = append(qccs, seg(mQCC, append([]byte{byte(c)}, qcd...))...)
		}
		// mainWith replaces the main COD and QCD and appends extra to the
		// main header.
		mainWith := func(c, q, extra []byte) []byte {
			out := slices.Clone(cs)
			copy(out[codP+4:], c)
			copy(out[qcdP+4:], q)
			return slices.Concat(out[:codP+codL], extra, out[codP+codL:])
		}
		variants := map[string][]byte{
			"main COC and QCC over main COD and QCD": mainWith(badCOD, badQCD, slices.Concat(cocs, qccs)),
			"tile COD and QCD over main":             withTileMarkers(t, mainWith(badCOD, badQCD, nil), slices.Concat(seg(mCOD, cod), seg(mQCD, qcd))),
			"tile COC and QCC over tile COD and QCD": withTileMarkers(t, cs, slices.Concat(seg(mCOD, badCOD), seg(mQCD, badQCD), cocs, qccs)),
		}
		for v, data := range variants {
			got, err := Decode(data, 0)
			if err != nil {
				t.Errorf("%s, %s: %v", name, v, err)
				continue
			}
			if !slices.Equal(got.Pix, want.Pix) {
				t.Errorf("%s, %s: samples differ", name, v)
			}
		}
		// The spoiled parameters alone must change the result (or fail),
		// or the variants above test nothing.
		if got, err := Decode(mainWith(badCOD, badQCD, nil), 0); err == nil && slices.Equal(got.Pix, want.Pix) {
			t.Errorf("%s: spoiled COD and QCD decode as the original", name)
		}
	}
}
