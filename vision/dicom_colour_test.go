package vision

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// TestDICOMColour renders native colour data: RGB of 12 bits scaled to 8,
// YBR_FULL converted by PS3.3 C.7.6.3.1.2, YBR_FULL_422 upsampled, planar
// configuration 1 interleaved.
func TestDICOMColour(t *testing.T) {
	colour := func(photometric string, planar uint16, alloc, stored int, cols int, raw []byte) []byte {
		d := newDCM(false).el(0x0008, 0x0016, "UI", pad([]byte("1.2.840.10008.5.1.4.1.1.7"), 0))
		d.el(0x0028, 0x0002, "US", us(3)).el(0x0028, 0x0004, "CS", str(photometric)).el(0x0028, 0x0006, "US", us(planar))
		d.el(0x0028, 0x0010, "US", us(1)).el(0x0028, 0x0011, "US", us(uint16(cols)))
		d.el(0x0028, 0x0100, "US", us(uint16(alloc))).el(0x0028, 0x0101, "US", us(uint16(stored))).el(0x0028, 0x0102, "US", us(uint16(stored-1)))
		vr := "OB"
		if alloc == 16 {
			vr = "OW"
		}
		return d.el(0x7fe0, 0x0010, vr, raw).bytes()
	}
	// JFIF / PS3.3 equations, written out again.
	ybr := func(y, cb, cr float64) [3]uint8 {
		q := func(x float64) uint8 { return uint8(math.Round(max(0, min(255, x)))) }
		return [3]uint8{q(y + 1.402*(cr-128)), q(y - 0.344136*(cb-128) - 0.714136*(cr-128)), q(y + 1.772*(cb-128))}
	}
	px := [][3]float64{{128, 128, 128}, {76, 85, 255}, {150, 44, 21}, {29, 255, 107}}
	var raw []byte
	var want []uint8
	for _, p := range px {
		raw = append(raw, uint8(p[0]), uint8(p[1]), uint8(p[2]))
		c := ybr(p[0], p[1], p[2])
		want = append(want, c[:]...)
	}
	p, err := decodeBytes(colour("YBR_FULL", 0, 8, 8, 4, raw))
	if err != nil || p.C != 3 || !bytes.Equal(p.Pix, want) {
		t.Fatalf("YBR_FULL: %v %v, want %v", p, err, want)
	}
	// The same pixels by plane.
	var planes []byte
	for c := range 3 {
		for i := range 4 {
			planes = append(planes, raw[3*i+c])
		}
	}
	if p, err := decodeBytes(colour("YBR_FULL", 1, 8, 8, 4, planes)); err != nil || !bytes.Equal(p.Pix, want) {
		t.Fatalf("YBR_FULL planar: %v %v, want %v", p, err, want)
	}
	// YBR_FULL_422: Y0 Y1 Cb Cr for each pair; stored values come back
	// upsampled as YBR_FULL.
	b := colour("YBR_FULL_422", 0, 8, 8, 4, []byte{100, 200, 128, 128, 76, 80, 85, 255})
	fr, err := DecodeDICOMFrame(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	wantStored := []uint16{100, 128, 128, 200, 128, 128, 76, 85, 255, 80, 85, 255}
	if fr.Photometric != "YBR_FULL" || fr.SamplesPerPixel != 3 || len(fr.Pix) != 12 {
		t.Fatalf("YBR_FULL_422: %+v", fr)
	}
	for i, v := range wantStored {
		if fr.Pix[i] != v {
			t.Fatalf("YBR_FULL_422 stored %v, want %v", fr.Pix, wantStored)
		}
	}
	p, err = decodeBytes(b)
	r0, r3 := ybr(76, 85, 255), ybr(80, 85, 255)
	if err != nil || !bytes.Equal(p.Pix[:6], []uint8{100, 100, 100, 200, 200, 200}) || !bytes.Equal(p.Pix[6:9], r0[:]) || !bytes.Equal(p.Pix[9:], r3[:]) {
		t.Fatalf("YBR_FULL_422 rendered %v %v", p, err)
	}
	if _, err := decodeBytes(colour("YBR_FULL_422", 0, 8, 8, 3, make([]byte, 6))); !errors.Is(err, ErrDICOM) {
		t.Errorf("YBR_FULL_422 of odd width: %v", err)
	}
	// RGB of 12 bits stored: scaled by 255/4095.
	b = colour("RGB", 0, 16, 12, 1, us(0, 4095, 2048))
	if p, err := decodeBytes(b); err != nil || !bytes.Equal(p.Pix, []uint8{0, 255, uint8(math.Round(2048 * 255.0 / 4095))}) {
		t.Fatalf("RGB 12-bit: %v %v", p, err)
	}
}

// TestDICOMBareDataSet reads data sets without the preamble and file meta
// group, in implicit VR (the NEMA samples) and explicit VR, and recognises
// them with IsDICOM; other bytes are neither.
func TestDICOMBareDataSet(t *testing.T) {
	for _, implicit := range []bool{true, false} {
		d := newDCM(implicit).el(0x0008, 0x0060, "CS", str("CR")).image(2, 2, 16, 10, 9, 0, "MONOCHROME1")
		d.el(0x7fe0, 0x0010, "OW", us(0, 1023, 512, 3))
		bare := d.body.Bytes()
		if !IsDICOM(bare[:min(len(bare), 132)]) {
			t.Errorf("implicit %v: IsDICOM false", implicit)
		}
		fr, err := DecodeDICOMFrame(bytes.NewReader(bare), int64(len(bare)))
		if err != nil {
			t.Fatalf("implicit %v: %v", implicit, err)
		}
		want := tsImplicitLE
		if !implicit {
			want = tsExplicitLE
		}
		if fr.TransferSyntax != want || fr.Value(1) != 1023 || fr.Photometric != "MONOCHROME1" || fr.BitsStored != 10 {
			t.Errorf("implicit %v: %+v", implicit, fr)
		}
		p, err := decodeBytes(bare)
		if err != nil || !bytes.Equal(p.Pix, []uint8{255, 0, 127, 254}) {
			t.Errorf("implicit %v: rendered %v %v", implicit, p, err)
		}
	}
	// A file meta group without the preamble before it.
	full := newDCM(false).el(0x0008, 0x0060, "CS", str("CR")).image(1, 2, 8, 8, 7, 0, "MONOCHROME2").
		el(0x7fe0, 0x0010, "OB", []byte{0, 9}).bytes()
	noPreamble := full[132:]
	if !IsDICOM(noPreamble) {
		t.Error("IsDICOM on a file meta group without the preamble")
	}
	if fr, err := DecodeDICOMFrame(bytes.NewReader(noPreamble), int64(len(noPreamble))); err != nil || fr.Value(1) != 9 || fr.TransferSyntax != tsExplicitLE {
		t.Errorf("file meta without the preamble: %+v %v", fr, err)
	}
	// A data set whose first element is not of group 0008 or 0002 is not
	// taken for DICOM.
	d := newDCM(true).image(1, 1, 8, 8, 7, 0, "MONOCHROME2").el(0x7fe0, 0x0010, "OB", []byte{1, 0})
	if IsDICOM(d.body.Bytes()) {
		t.Error("IsDICOM on a data set starting with group 0028")
	}
	if _, err := decodeBytes(d.body.Bytes()); !errors.Is(err, ErrDICOM) {
		t.Errorf("data set starting with group 0028: %v", err)
	}
	for _, b := range [][]byte{nil, []byte("GIF89a"), bytes.Repeat([]byte{0}, 200), []byte("\x89PNG\r\n\x1a\n")} {
		if IsDICOM(b) {
			t.Errorf("IsDICOM(%q)", b)
		}
	}
}
