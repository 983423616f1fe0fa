package testutil

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// DICOM tags the tests set, as group<<16 | element.
const (
	TagStudyDate             = 0x00080020
	TagStudyTime             = 0x00080030
	TagAccessionNumber       = 0x00080050
	TagModality              = 0x00080060
	TagTimezoneOffsetFromUTC = 0x00080201
	TagStudyDescription      = 0x00081030
	TagPatientName           = 0x00100010
	TagPatientID             = 0x00100020
	TagIssuerOfPatientID     = 0x00100021
	TagPatientSex            = 0x00100040
	TagViewPosition          = 0x00185101
	TagStudyInstanceUID      = 0x0020000d
	TagSeriesInstanceUID     = 0x0020000e
)

// vrs are the value representations of the tags DICOMImage writes.
var vrs = map[uint32]string{
	TagStudyDate: "DA", TagStudyTime: "TM", TagAccessionNumber: "SH", TagModality: "CS", TagTimezoneOffsetFromUTC: "SH",
	TagStudyDescription: "LO", TagPatientName: "PN", TagPatientID: "LO", TagIssuerOfPatientID: "LO", TagPatientSex: "CS",
	TagViewPosition: "CS", TagStudyInstanceUID: "UI", TagSeriesInstanceUID: "UI",
	0x00080016: "UI", 0x00080018: "UI", 0x00280002: "US", 0x00280004: "CS", 0x00280010: "US", 0x00280011: "US",
	0x00280100: "US", 0x00280101: "US", 0x00280102: "US", 0x00280103: "US",
}

// DICOMImage writes a Part 10 file, explicit VR little endian, holding an
// 8-bit MONOCHROME2 image of w×h pixels (pix, row-major) and the text
// attributes attrs (keyed by the Tag constants).
func DICOMImage(w, h int, pix []byte, attrs map[uint32]string) []byte {
	const sopClass = "1.2.840.10008.5.1.4.1.1.1.1" // Digital X-Ray Image Storage - For Presentation
	sop := "1.2.826.0.1.3680043.8.498.99"
	var ds bytes.Buffer
	el := func(b *bytes.Buffer, tag uint32, vr string, v []byte) {
		if len(v)%2 == 1 {
			pad := byte(' ')
			if vr == "UI" || vr == "OB" {
				pad = 0
			}
			v = append(slices.Clone(v), pad)
		}
		binary.Write(b, binary.LittleEndian, uint16(tag>>16))
		binary.Write(b, binary.LittleEndian, uint16(tag))
		b.WriteString(vr)
		switch vr {
		case "OB", "OW", "SQ", "UN", "UT":
			b.Write([]byte{0, 0})
			binary.Write(b, binary.LittleEndian, uint32(len(v)))
		default:
			binary.Write(b, binary.LittleEndian, uint16(len(v)))
		}
		b.Write(v)
	}
	us := func(n int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(n)) }
	all := map[uint32][]byte{
		0x00080016: []byte(sopClass), 0x00080018: []byte(sop),
		0x00280002: us(1), 0x00280004: []byte("MONOCHROME2"), 0x00280010: us(h), 0x00280011: us(w),
		0x00280100: us(8), 0x00280101: us(8), 0x00280102: us(7), 0x00280103: us(0),
	}
	for t, v := range attrs {
		all[t] = []byte(v)
	}
	tags := make([]uint32, 0, len(all))
	for t := range all {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		el(&ds, t, vrs[t], all[t])
	}
	el(&ds, 0x7fe00010, "OB", pix[:w*h])

	var meta bytes.Buffer
	el(&meta, 0x00020001, "OB", []byte{0, 1})
	el(&meta, 0x00020002, "UI", []byte(sopClass))
	el(&meta, 0x00020003, "UI", []byte(sop))
	el(&meta, 0x00020010, "UI", []byte("1.2.840.10008.1.2.1"))
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	el(&out, 0x00020000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(meta.Len())))
	out.Write(meta.Bytes())
	out.Write(ds.Bytes())
	return out.Bytes()
}
