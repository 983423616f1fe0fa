package orthanctest

import "encoding/binary"

// Film describes a small synthetic DX film for tests.
type Film struct {
	Study, Series, SOP string // UIDs
	PatientID          string // default "PID-1"
	ViewPosition       string // PA, LL, …; "" for none
	Modality           string // default DX
	Rows, Columns      int    // default 64×64
	// PixelBytes, when not negative and not zero, overrides the Pixel
	// Data length (a film whose attributes lie about its size).
	PixelBytes int
	StudyDate  string // default 20240102
	// LyingJPEG encapsulates the pixels as JPEG baseline whose frame
	// header claims 65535×65535 while Rows and Columns say otherwise.
	LyingJPEG bool
}

// Bytes returns the film as a Part 10 file, explicit VR little endian,
// 8-bit MONOCHROME2.
func (f Film) Bytes() []byte {
	if f.PatientID == "" {
		f.PatientID = "PID-1"
	}
	if f.Modality == "" {
		f.Modality = "DX"
	}
	if f.Rows == 0 {
		f.Rows, f.Columns = 64, 64
	}
	if f.StudyDate == "" {
		f.StudyDate = "20240102"
	}
	n := f.Rows * f.Columns
	if f.PixelBytes > 0 {
		n = f.PixelBytes
	}
	pix := make([]byte, n+n%2)
	for i := range n {
		pix[i] = byte((i*7 + len(f.SOP)) % 251)
	}
	const class = "1.2.840.10008.5.1.4.1.1.1.1" // Digital X-Ray Image Storage - For Presentation
	var ds []byte
	ds = el(ds, 0x00080016, "UI", class)
	ds = el(ds, 0x00080018, "UI", f.SOP)
	ds = el(ds, 0x00080020, "DA", f.StudyDate)
	ds = el(ds, 0x00080030, "TM", "101500")
	ds = el(ds, 0x00080050, "SH", "ACC-"+f.Study[max(0, len(f.Study)-6):])
	ds = el(ds, 0x00080060, "CS", f.Modality)
	ds = el(ds, 0x00080090, "PN", "")
	ds = el(ds, 0x00100010, "PN", "Doe^Jane")
	ds = el(ds, 0x00100020, "LO", f.PatientID)
	ds = el(ds, 0x00100030, "DA", "19700101")
	ds = el(ds, 0x00100040, "CS", "F")
	if f.ViewPosition != "" {
		ds = el(ds, 0x00185101, "CS", f.ViewPosition)
	}
	ds = el(ds, 0x0020000d, "UI", f.Study)
	ds = el(ds, 0x0020000e, "UI", f.Series)
	ds = el(ds, 0x00200010, "SH", "1")
	ds = el(ds, 0x00200011, "IS", "1")
	ds = el(ds, 0x00200013, "IS", "1")
	ds = us(ds, 0x00280002, 1)
	ds = el(ds, 0x00280004, "CS", "MONOCHROME2")
	ds = us(ds, 0x00280010, f.Rows)
	ds = us(ds, 0x00280011, f.Columns)
	ds = us(ds, 0x00280100, 8)
	ds = us(ds, 0x00280101, 8)
	ds = us(ds, 0x00280102, 7)
	ds = us(ds, 0x00280103, 0)
	ts := "1.2.840.10008.1.2.1"
	if f.LyingJPEG {
		ts = "1.2.840.10008.1.2.4.50"
		// SOI, a SOF0 of one 8-bit component, 65535 lines of 65535, EOI.
		jpeg := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0xff, 0xff, 0xff, 0xff, 1, 1, 0x11, 0, 0xff, 0xd9, 0}
		ds = binary.LittleEndian.AppendUint16(ds, 0x7fe0)
		ds = binary.LittleEndian.AppendUint16(ds, 0x0010)
		ds = append(ds, "OB\x00\x00"...)
		ds = binary.LittleEndian.AppendUint32(ds, 0xffffffff)
		for _, item := range [][]byte{{}, jpeg} { // an empty offset table, one fragment
			ds = append(ds, 0xfe, 0xff, 0x00, 0xe0)
			ds = binary.LittleEndian.AppendUint32(ds, uint32(len(item)))
			ds = append(ds, item...)
		}
		ds = append(ds, 0xfe, 0xff, 0xdd, 0xe0, 0, 0, 0, 0)
	} else {
		ds = raw(ds, 0x7fe00010, "OB", pix)
	}
	var meta []byte
	meta = raw(meta, 0x00020001, "OB", []byte{0, 1})
	meta = el(meta, 0x00020002, "UI", class)
	meta = el(meta, 0x00020003, "UI", f.SOP)
	meta = el(meta, 0x00020010, "UI", ts)
	out := append(make([]byte, 128), "DICM"...)
	out = raw(out, 0x00020000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(len(meta))))
	out = append(out, meta...)
	return append(out, ds...)
}

func el(dst []byte, tag uint32, vr, s string) []byte {
	b := []byte(s)
	if len(b)%2 == 1 {
		if vr == "UI" {
			b = append(b, 0)
		} else {
			b = append(b, ' ')
		}
	}
	return raw(dst, tag, vr, b)
}

func us(dst []byte, tag uint32, v int) []byte {
	return raw(dst, tag, "US", binary.LittleEndian.AppendUint16(nil, uint16(v)))
}

func raw(dst []byte, tag uint32, vr string, val []byte) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(tag>>16))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(tag))
	dst = append(dst, vr...)
	switch vr {
	case "OB", "OW", "SQ", "UN", "UT":
		dst = append(dst, 0, 0)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(val)))
	default:
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(val)))
	}
	return append(dst, val...)
}
