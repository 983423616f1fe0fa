//go:build ignore

// gen_testdata writes testdata/: small synthetic images encoded by dcmtk
// (dcmcjpeg), by libjpeg-turbo (cjpeg) and by the lossless encoder below
// (restart intervals and one scan per component, which dcmcjpeg does not
// write), each with its reference samples as decoded by dcmtk's dcmdjpeg or
// libjpeg's djpeg. Run from this directory with dcmtk and libjpeg-turbo-progs
// installed:
//
//	go run gen_testdata.go
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// testCase is one entry of testdata/cases.json.
type testCase struct {
	Name       string `json:"name"`                   // testdata/<name>.jpg is the code stream
	Ref        string `json:"ref"`                    // testdata/<ref>.ref holds the samples, uint16 little endian
	Width      int    `json:"width"`                  // expected frame
	Height     int    `json:"height"`                 //
	Components int    `json:"components"`             //
	Precision  int    `json:"precision"`              //
	MaxDiff    int    `json:"max_diff"`               // allowed |Δ| against the reference
	ToRGB      bool   `json:"ycbcr_to_rgb,omitempty"` // compare after YCbCrToRGB
	Note       string `json:"note"`                   // how it was made
}

var (
	tmp   string
	cases []testCase
)

func main() {
	var err error
	tmp, err = os.MkdirTemp("", "jpeggen")
	check(err)
	defer os.RemoveAll(tmp)

	// Grey lossless, dcmtk: every selection value at 8, 12 and 16 bits.
	for _, bits := range []int{8, 12, 16} {
		w, h := 37, 29
		pix := synth(w, h, 1, bits, uint64(bits))
		for sv := 1; sv <= 7; sv++ {
			name := fmt.Sprintf("ll_gray%d_sv%d", bits, sv)
			dcmtk(name, pix, w, h, 1, bits, 0, fmt.Sprintf("dcmcjpeg +el +sv%d", sv), "+el", "+sv", strconv.Itoa(sv))
		}
	}
	// Point transform and process 14 SV1 (…4.70), 12 bits.
	{
		w, h := 33, 21
		pix := synth(w, h, 1, 12, 7)
		dcmtk("ll_gray12_sv1_pt3", pix, w, h, 1, 12, -1, "dcmcjpeg +e1 +pt 3", "+e1", "+pt", "3")
		dcmtk("ll_gray10_sv1", synth(w, h, 1, 10, 8), w, h, 1, 10, 0, "dcmcjpeg +e1 (10 of 16 bits)", "+e1")
	}
	// Colour lossless, dcmtk: one interleaved scan of three components.
	{
		w, h := 23, 19
		dcmtk("ll_rgb8_sv1", synth(w, h, 3, 8, 11), w, h, 3, 8, 0, "dcmcjpeg +e1, RGB", "+e1")
		dcmtk("ll_rgb8_sv5", synth(w, h, 3, 8, 12), w, h, 3, 8, 0, "dcmcjpeg +el +sv5, RGB", "+el", "+sv", "5")
	}
	// Lossless with restart intervals, one scan per component, long codes
	// and the 16-bit difference 32768: this file's encoder, checked against
	// dcmdjpeg.
	{
		w, h := 31, 17
		p16 := synth(w, h, 1, 16, 21)
		p16[5], p16[6] = 0, 32768 // a difference of exactly 2^15
		p16[w+9], p16[w+10] = 40000, 7232
		for sv := 1; sv <= 7; sv++ {
			own(fmt.Sprintf("ll_own_gray16_sv%d_rst", sv), p16, w, h, 1, 16, sv, 0, 2*w, true, "restart every 2 lines")
		}
		own("ll_own_gray2_sv1", synth(w, h, 1, 2, 22), w, h, 1, 2, 1, 0, 0, true, "2-bit samples")
		own("ll_own_gray16_sv7_pt4", p16, w, h, 1, 16, 7, 4, 3*w, true, "point transform 4, restart every 3 lines")
		rgb := synth(w, h, 3, 12, 23)
		own("ll_own_rgb12_sv4_scans", rgb, w, h, 3, 12, 4, 0, 5*w, false, "one scan per component, restart every 5 lines")
		own("ll_own_rgb12_sv6_rst", rgb, w, h, 3, 12, 6, 0, w, true, "interleaved, restart every line")
		rgba := synth(w, h, 4, 16, 24)
		own("ll_own_4c16_sv2", rgba, w, h, 4, 16, 2, 0, 0, true, "four components, interleaved")
	}
	// Extended sequential DCT, dcmtk.
	{
		w, h := 45, 38
		g12 := smooth(w, h, 1, 12, 31)
		dcmtk("dct_gray12_q90", g12, w, h, 1, 12, -1, "dcmcjpeg +ee (12-bit, quality 90)", "+ee")
		dcmtk("dct_gray12_q40", g12, w, h, 1, 12, -1, "dcmcjpeg +ee +q 40", "+ee", "+q", "40")
		g8 := smooth(w, h, 1, 8, 32)
		dcmtk("dct_gray8_ext", g8, w, h, 1, 8, -1, "dcmcjpeg +ee (8-bit)", "+ee")
		dcmtk("dct_gray8_base", g8, w, h, 1, 8, -1, "dcmcjpeg +eb", "+eb")
		c8 := smooth(w, h, 3, 8, 33)
		dcmtk("dct_ybr422_8", c8, w, h, 3, 8, -1, "dcmcjpeg +eb, YCbCr 4:2:2, decoded with dcmdjpeg +cn", "+eb")
		dcmtk("dct_ybr411_8", c8, w, h, 3, 8, -1, "dcmcjpeg +eb +n1, YCbCr 4:1:1", "+eb", "+n1")
		dcmtk("dct_ybr444_12", smooth(w, h, 3, 12, 34), w, h, 3, 12, -1, "dcmcjpeg +ee +s4, 12-bit YCbCr 4:4:4", "+ee", "+s4")
	}
	// Baseline with restarts, libjpeg-turbo.
	{
		w, h := 53, 27
		g8 := smooth(w, h, 1, 8, 41)
		turbo("dct_gray8_rst", g8, w, h, "cjpeg -grayscale -restart 2B -quality 85", "-grayscale", "-restart", "2B", "-quality", "85")
	}
	// Colour baseline, libjpeg-turbo: 4:2:0 and 4:2:2, converted to RGB.
	{
		w, h := 51, 35
		c8 := smooth(w, h, 3, 8, 42)
		turboRGB("dct_rgb420_8", c8, w, h, "cjpeg -sample 2x2 (YCbCr 4:2:0)", "-sample", "2x2", "-quality", "88")
		turboRGB("dct_rgb422_8", c8, w, h, "cjpeg -sample 2x1 -restart 1 (YCbCr 4:2:2)", "-sample", "2x1", "-restart", "1")
		script := filepath.Join(tmp, "scans.txt")
		check(os.WriteFile(script, []byte("0;\n1;\n2;\n"), 0o644))
		turboRGB("dct_rgb420_scans_8", c8, w, h, "cjpeg -sample 2x2 -restart 3B -scans (one sequential scan per component)",
			"-sample", "2x2", "-restart", "3B", "-scans", script)
	}
	// Progressive DCT: dcmtk (12 and 8 bits, spectral selection and
	// successive approximation) and libjpeg-turbo (colour, restarts).
	{
		w, h := 45, 38
		g12 := smooth(w, h, 1, 12, 51)
		dcmtk("prog_gray12", g12, w, h, 1, 12, -1, "dcmcjpeg +ep (12-bit progressive)", "+ep")
		dcmtk("prog_gray12_spectral", g12, w, h, 1, 12, -1, "dcmcjpeg +es (12-bit spectral selection)", "+es")
		dcmtk("prog_gray8", smooth(w, h, 1, 8, 52), w, h, 1, 8, -1, "dcmcjpeg +ep (8-bit progressive)", "+ep")
		c8 := smooth(51, 35, 3, 8, 53)
		turboRGB("prog_rgb420_8", c8, 51, 35, "cjpeg -progressive -sample 2x2 -restart 1", "-progressive", "-sample", "2x2", "-restart", "1")
		turbo("prog_gray8_rst", smooth(53, 27, 1, 8, 54), 53, 27, "cjpeg -grayscale -progressive -restart 2B -quality 95",
			"-grayscale", "-progressive", "-restart", "2B", "-quality", "95")
	}
	js, err := json.MarshalIndent(cases, "", "  ")
	check(err)
	check(os.WriteFile("testdata/cases.json", append(js, '\n'), 0o644))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// synth draws noisy structured samples: gradients, edges and noise over the
// full range of bits, so that every difference category appears.
func synth(w, h, nc, bits int, seed uint64) []uint16 {
	r := rand.New(rand.NewPCG(seed, 99))
	max := 1<<bits - 1
	pix := make([]uint16, w*h*nc)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < nc; c++ {
				v := float64(max) * (0.5 + 0.4*math.Sin(float64(x*(c+1))/5+float64(y)/7))
				if (x/8+y/6)%3 == 0 {
					v = float64(max) - v
				}
				v += r.NormFloat64() * float64(max) / float64(8+8*((x+y)%4))
				if r.IntN(40) == 0 {
					v = float64(r.IntN(max + 1))
				}
				pix[(y*w+x)*nc+c] = uint16(min(max, int(math.Max(0, v))))
			}
		}
	}
	return pix
}

// smooth draws a photograph-like image for the lossy codecs.
func smooth(w, h, nc, bits int, seed uint64) []uint16 {
	r := rand.New(rand.NewPCG(seed, 7))
	max := float64(int(1)<<bits - 1)
	pix := make([]uint16, w*h*nc)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < nc; c++ {
				v := max * (0.5 + 0.3*math.Sin(float64(x)/6+float64(c))*math.Cos(float64(y)/9))
				if x > w/2 && y > h/3 {
					v *= 0.6
				}
				v += r.NormFloat64() * max / 60
				pix[(y*w+x)*nc+c] = uint16(math.Min(max, math.Max(0, v)))
			}
		}
	}
	return pix
}

// dicom writes an explicit VR little endian Part 10 file holding pix.
func dicom(path string, pix []uint16, w, h, nc, bits int) {
	dicomTS(path, pix, w, h, nc, bits, "1.2.840.10008.1.2.1", nil)
}

// dicomTS writes pix natively, or the code stream jpg as one fragment.
func dicomTS(path string, pix []uint16, w, h, nc, bits int, ts string, jpg []byte) {
	var ds bytes.Buffer
	el := func(g, e uint16, vr string, val []byte) {
		if len(val)%2 == 1 {
			pad := byte(' ')
			if vr == "UI" || vr == "OB" {
				pad = 0
			}
			val = append(val, pad)
		}
		binary.Write(&ds, binary.LittleEndian, g)
		binary.Write(&ds, binary.LittleEndian, e)
		ds.WriteString(vr)
		switch vr {
		case "OB", "OW", "UN", "SQ", "UT":
			ds.Write([]byte{0, 0})
			binary.Write(&ds, binary.LittleEndian, uint32(len(val)))
		default:
			binary.Write(&ds, binary.LittleEndian, uint16(len(val)))
		}
		ds.Write(val)
	}
	us := func(v int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(v)) }
	const sop = "1.2.840.10008.5.1.4.1.1.7"
	const inst = "1.2.826.0.1.3680043.2.1143.1.1"
	var meta bytes.Buffer
	ds.Reset()
	el(2, 1, "OB", []byte{0, 1})
	el(2, 2, "UI", []byte(sop))
	el(2, 3, "UI", []byte(inst))
	el(2, 0x10, "UI", []byte(ts))
	el(2, 0x12, "UI", []byte("1.2.826.0.1.3680043.2.1143.9"))
	body := append([]byte(nil), ds.Bytes()...)
	ds.Reset()
	el(2, 0, "UL", binary.LittleEndian.AppendUint32(nil, uint32(len(body))))
	meta.Write(make([]byte, 128))
	meta.WriteString("DICM")
	meta.Write(ds.Bytes())
	meta.Write(body)
	ds.Reset()
	el(8, 0x16, "UI", []byte(sop))
	el(8, 0x18, "UI", []byte(inst))
	el(8, 0x60, "CS", []byte("OT"))
	el(0x10, 0x10, "PN", []byte("Synthetic"))
	el(0x20, 0x0d, "UI", []byte("1.2.826.0.1.3680043.2.1143.2"))
	el(0x20, 0x0e, "UI", []byte("1.2.826.0.1.3680043.2.1143.3"))
	el(0x28, 2, "US", us(nc))
	if nc == 3 {
		el(0x28, 4, "CS", []byte("RGB"))
		el(0x28, 6, "US", us(0))
	} else {
		el(0x28, 4, "CS", []byte("MONOCHROME2"))
	}
	el(0x28, 0x10, "US", us(h))
	el(0x28, 0x11, "US", us(w))
	alloc := 16
	if bits <= 8 {
		alloc = 8
	}
	el(0x28, 0x100, "US", us(alloc))
	el(0x28, 0x101, "US", us(bits))
	el(0x28, 0x102, "US", us(bits-1))
	el(0x28, 0x103, "US", us(0))
	var raw []byte
	for _, v := range pix {
		if alloc == 8 {
			raw = append(raw, byte(v))
		} else {
			raw = binary.LittleEndian.AppendUint16(raw, v)
		}
	}
	vr := "OW"
	if alloc == 8 {
		vr = "OB"
	}
	if jpg == nil {
		el(0x7fe0, 0x10, vr, raw)
	} else {
		if len(jpg)%2 == 1 {
			jpg = append(jpg, 0)
		}
		b := []byte{0xe0, 0x7f, 0x10, 0x00, 'O', 'B', 0, 0, 0xff, 0xff, 0xff, 0xff}
		b = append(b, 0xfe, 0xff, 0x00, 0xe0, 0, 0, 0, 0)
		b = append(b, 0xfe, 0xff, 0x00, 0xe0)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(jpg)))
		b = append(b, jpg...)
		b = append(b, 0xfe, 0xff, 0xdd, 0xe0, 0, 0, 0, 0)
		ds.Write(b)
	}
	check(os.WriteFile(path, append(meta.Bytes(), ds.Bytes()...), 0o644))
}

// fragments returns the concatenated fragments of encapsulated pixel data.
func fragments(b []byte) []byte {
	i := bytes.LastIndex(b, []byte{0xe0, 0x7f, 0x10, 0x00, 'O', 'B', 0, 0, 0xff, 0xff, 0xff, 0xff})
	if i < 0 {
		log.Fatal("no encapsulated pixel data")
	}
	p := b[i+12:]
	var out []byte
	first := true
	for len(p) >= 8 {
		tag := binary.LittleEndian.Uint32(p)
		n := int(binary.LittleEndian.Uint32(p[4:]))
		if tag == 0xe0ddfffe {
			break
		}
		if !first {
			out = append(out, p[8:8+n]...)
		}
		first = false
		p = p[8+n:]
	}
	return out
}

// native returns the native pixel data of an explicit VR LE file as uint16.
func native(b []byte, bits int) []uint16 {
	i := bytes.LastIndex(b, []byte{0xe0, 0x7f, 0x10, 0x00})
	n := int(binary.LittleEndian.Uint32(b[i+8:]))
	p := b[i+12 : i+12+n]
	var out []uint16
	if bits <= 8 {
		for _, v := range p {
			out = append(out, uint16(v))
		}
	} else {
		for j := 0; j+1 < len(p); j += 2 {
			out = append(out, binary.LittleEndian.Uint16(p[j:]))
		}
	}
	return out
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func writeRef(name string, pix []uint16) {
	var b []byte
	for _, v := range pix {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	check(os.WriteFile(filepath.Join("testdata", name+".ref"), b, 0o644))
}

// dcmtk encodes pix with dcmcjpeg and decodes it back with dcmdjpeg.
// maxDiff < 0 marks a lossy encoding (the reference is dcmdjpeg's output
// and must match exactly); 0 also checks dcmdjpeg gave back the source.
func dcmtk(name string, pix []uint16, w, h, nc, bits, maxDiff int, note string, args ...string) {
	src := filepath.Join(tmp, name+".src.dcm")
	enc := filepath.Join(tmp, name+".enc.dcm")
	dec := filepath.Join(tmp, name+".dec.dcm")
	dicom(src, pix, w, h, nc, bits)
	run("dcmcjpeg", append(args, src, enc)...)
	run("dcmdjpeg", "+cn", enc, dec)
	eb, err := os.ReadFile(enc)
	check(err)
	jpg := fragments(eb)
	db, err := os.ReadFile(dec)
	check(err)
	ref := native(db, bits)
	if len(ref) < w*h*nc {
		log.Fatalf("%s: dcmdjpeg gave %d samples", name, len(ref))
	}
	ref = ref[:w*h*nc]
	if maxDiff == 0 {
		for i := range pix {
			if pix[i] != ref[i] {
				log.Fatalf("%s: dcmdjpeg is not lossless at %d: %d vs %d", name, i, ref[i], pix[i])
			}
		}
	}
	check(os.WriteFile(filepath.Join("testdata", name+".jpg"), jpg, 0o644))
	writeRef(name, ref)
	cases = append(cases, testCase{Name: name, Ref: name, Width: w, Height: h, Components: nc, Precision: sofPrecision(jpg),
		Note: fmt.Sprintf("%d-bit samples, %s; reference: dcmdjpeg", bits, note)})
}

// turbo encodes a grey 8-bit image with cjpeg; the reference is djpeg's.
func turbo(name string, pix []uint16, w, h int, note string, args ...string) {
	pgm := filepath.Join(tmp, name+".pgm")
	var b bytes.Buffer
	fmt.Fprintf(&b, "P5\n%d %d\n255\n", w, h)
	for _, v := range pix {
		b.WriteByte(byte(v))
	}
	check(os.WriteFile(pgm, b.Bytes(), 0o644))
	jpgPath := filepath.Join("testdata", name+".jpg")
	run("cjpeg", append(args, "-outfile", jpgPath, pgm)...)
	out := filepath.Join(tmp, name+".out.pgm")
	run("djpeg", "-dct", "int", "-pnm", "-outfile", out, jpgPath)
	ob, err := os.ReadFile(out)
	check(err)
	ref := make([]uint16, w*h)
	body := ob[len(ob)-w*h:]
	for i := range ref {
		ref[i] = uint16(body[i])
	}
	writeRef(name, ref)
	cases = append(cases, testCase{Name: name, Ref: name, Width: w, Height: h, Components: 1, Precision: 8, Note: note + "; reference: djpeg -dct int"})
}

// own encodes pix losslessly with the encoder below, wraps it in DICOM and
// checks dcmdjpeg decodes it back to pix (shifted for the point transform).
func own(name string, pix []uint16, w, h, nc, bits, psv, pt, restart int, interleaved bool, note string) {
	jpg := encodeLossless(pix, w, h, nc, bits, psv, pt, restart, interleaved)
	enc := filepath.Join(tmp, name+".enc.dcm")
	dec := filepath.Join(tmp, name+".dec.dcm")
	dicomTS(enc, nil, w, h, nc, bits, "1.2.840.10008.1.2.4.57", jpg)
	run("dcmdjpeg", enc, dec)
	db, err := os.ReadFile(dec)
	check(err)
	ref := native(db, bits)[:w*h*nc]
	for i := range pix {
		want := pix[i] >> pt << pt
		if ref[i] != want {
			log.Fatalf("%s: dcmdjpeg disagrees at %d: %d vs %d", name, i, ref[i], want)
		}
	}
	check(os.WriteFile(filepath.Join("testdata", name+".jpg"), jpg, 0o644))
	writeRef(name, ref)
	cases = append(cases, testCase{Name: name, Ref: name, Width: w, Height: h, Components: nc, Precision: bits,
		Note: fmt.Sprintf("lossless encoder in gen_testdata.go, selection value %d, %s; reference: dcmdjpeg", psv, note)})
}

// bitWriter writes entropy-coded data with 0xFF stuffing.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) put(v uint32, n uint) {
	if n == 0 {
		return
	}
	w.acc = w.acc<<n | uint64(v)&(1<<n-1)
	w.nacc += n
	for w.nacc >= 8 {
		b := byte(w.acc >> (w.nacc - 8))
		w.out = append(w.out, b)
		if b == 0xff {
			w.out = append(w.out, 0)
		}
		w.nacc -= 8
	}
}

func (w *bitWriter) flush() {
	if w.nacc > 0 {
		w.put(1<<(8-w.nacc)-1, 8-w.nacc)
	}
}

func category(d int) int {
	if d < 0 {
		d = -d
	}
	n := 0
	for d > 0 {
		n++
		d >>= 1
	}
	return n
}

// encodeLossless is a plain T.81 Annex H encoder: the given selection value
// and point transform, restart intervals in MCUs (whole lines), one scan per
// component unless interleaved. Its Huffman table gives code lengths 2 to 16
// to the categories by frequency, so long codes occur.
func encodeLossless(pix []uint16, w, h, nc, bits, psv, pt, restart int, interleaved bool) []byte {
	red := make([]int, len(pix))
	for i, v := range pix {
		red[i] = int(v) >> pt
	}
	at := func(x, y, c int) int { return red[(y*w+x)*nc+c] }
	rowsPer := 0
	if restart > 0 {
		rowsPer = restart / w
	}
	diff := func(x, y, c int) int {
		first := y == 0 || (rowsPer > 0 && y%rowsPer == 0)
		var p int
		switch {
		case first && x == 0:
			p = 1 << (bits - pt - 1)
		case first:
			p = at(x-1, y, c)
		case x == 0:
			p = at(x, y-1, c)
		default:
			ra, rb, rc := at(x-1, y, c), at(x, y-1, c), at(x-1, y-1, c)
			switch psv {
			case 1:
				p = ra
			case 2:
				p = rb
			case 3:
				p = rc
			case 4:
				p = ra + rb - rc
			case 5:
				p = ra + (rb-rc)>>1
			case 6:
				p = rb + (ra-rc)>>1
			case 7:
				p = (ra + rb) >> 1
			}
		}
		d := (at(x, y, c) - p) & 0xffff
		if d >= 32768 {
			d -= 65536
		}
		if d == -32768 {
			d = 32768
		}
		return d
	}
	// Table from the category frequencies over all components.
	freq := make([]int, 17)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < nc; c++ {
				freq[category(diff(x, y, c))]++
			}
		}
	}
	order := make([]int, 17)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return freq[order[a]] > freq[order[b]] })
	lengths := []int{2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16}
	var counts [16]byte
	var vals []byte
	for l := 1; l <= 16; l++ {
		for i, s := range order {
			if lengths[i] == l {
				counts[l-1]++
				vals = append(vals, byte(s))
			}
		}
	}
	codes := make([]uint32, 17)
	size := make([]uint, 17)
	code, k := uint32(0), 0
	for l := 1; l <= 16; l++ {
		for i := 0; i < int(counts[l-1]); i++ {
			codes[vals[k]] = code
			size[vals[k]] = uint(l)
			code++
			k++
		}
		code <<= 1
	}
	var out []byte
	seg := func(m byte, p []byte) {
		out = append(out, 0xff, m, byte((len(p)+2)>>8), byte(len(p)+2))
		out = append(out, p...)
	}
	out = append(out, 0xff, 0xd8)
	sof := []byte{byte(bits), byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(nc)}
	for c := 0; c < nc; c++ {
		sof = append(sof, byte(c+1), 0x11, 0)
	}
	seg(0xc3, sof)
	seg(0xc4, append(append([]byte{0x00}, counts[:]...), vals...))
	if restart > 0 {
		seg(0xdd, []byte{byte(restart >> 8), byte(restart)})
	}
	scan := func(comps []int) {
		sos := []byte{byte(len(comps))}
		for _, c := range comps {
			sos = append(sos, byte(c+1), 0x00)
		}
		sos = append(sos, byte(psv), 0, byte(pt))
		seg(0xda, sos)
		bw := &bitWriter{}
		rst := 0
		for y := 0; y < h; y++ {
			if rowsPer > 0 && y > 0 && y%rowsPer == 0 {
				bw.flush()
				bw.out = append(bw.out, 0xff, byte(0xd0+rst%8))
				rst++
			}
			for x := 0; x < w; x++ {
				for _, c := range comps {
					d := diff(x, y, c)
					s := category(d)
					bw.put(codes[s], size[s])
					if s > 0 && s < 16 {
						v := d
						if d < 0 {
							v = d - 1
						}
						bw.put(uint32(v), uint(s))
					}
				}
			}
		}
		bw.flush()
		out = append(out, bw.out...)
	}
	if interleaved {
		var all []int
		for c := 0; c < nc; c++ {
			all = append(all, c)
		}
		scan(all)
	} else {
		for c := 0; c < nc; c++ {
			scan([]int{c})
		}
	}
	return append(out, 0xff, 0xd9)
}

// sofPrecision returns the sample precision of the code stream's frame
// header (dcmcjpeg's lossless codec codes 9 to 16 bits stored as 16).
func sofPrecision(jpg []byte) int {
	for i := 2; i+4 < len(jpg); {
		m := jpg[i+1]
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc {
			return int(jpg[i+4])
		}
		i += 2 + int(binary.BigEndian.Uint16(jpg[i+2:]))
	}
	log.Fatal("no frame header")
	return 0
}

// turboRGB encodes a colour 8-bit image with cjpeg; the reference is djpeg's
// RGB output (fancy upsampling, integer IDCT).
func turboRGB(name string, pix []uint16, w, h int, note string, args ...string) {
	ppm := filepath.Join(tmp, name+".ppm")
	var b bytes.Buffer
	fmt.Fprintf(&b, "P6\n%d %d\n255\n", w, h)
	for _, v := range pix {
		b.WriteByte(byte(v))
	}
	check(os.WriteFile(ppm, b.Bytes(), 0o644))
	jpgPath := filepath.Join("testdata", name+".jpg")
	run("cjpeg", append(args, "-outfile", jpgPath, ppm)...)
	out := filepath.Join(tmp, name+".out.ppm")
	run("djpeg", "-dct", "int", "-ppm", "-outfile", out, jpgPath)
	ob, err := os.ReadFile(out)
	check(err)
	ref := make([]uint16, w*h*3)
	body := ob[len(ob)-w*h*3:]
	for i := range ref {
		ref[i] = uint16(body[i])
	}
	writeRef(name, ref)
	cases = append(cases, testCase{Name: name, Ref: name, Width: w, Height: h, Components: 3, Precision: 8, ToRGB: true,
		Note: note + "; reference: djpeg -dct int -ppm (RGB)"})
}
