package dicomsr

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// element is one data element to write: a value or, for VR SQ, items.
type element struct {
	tag   uint32 // group<<16 | element
	vr    string
	value []byte
	items []dataset
}

// dataset is a list of elements; encode sorts it by tag.
type dataset []element

// str adds a text element, padded to even length as its VR requires (UI
// with NUL, the others with a space).
func (d *dataset) str(tag uint32, vr, s string) {
	b := []byte(s)
	if len(b)%2 == 1 {
		if vr == "UI" {
			b = append(b, 0)
		} else {
			b = append(b, ' ')
		}
	}
	*d = append(*d, element{tag: tag, vr: vr, value: b})
}

// seq adds a sequence of items (none for an empty Type 2 sequence).
func (d *dataset) seq(tag uint32, items ...dataset) {
	*d = append(*d, element{tag: tag, vr: "SQ", items: items})
}

// code adds a code sequence of one item (PS3.3 Table 8.8-1).
func (d *dataset) code(tag uint32, c Code) {
	var item dataset
	item.str(0x00080100, "SH", c.Value)
	item.str(0x00080102, "SH", c.Scheme)
	item.str(0x00080104, "LO", c.Meaning)
	d.seq(tag, item)
}

// Code is a coded concept: value, coding scheme designator and meaning.
type Code struct {
	Value, Scheme, Meaning string
}

// longVR lists the VRs whose explicit encoding has a 4-byte length.
func longVR(vr string) bool {
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		return true
	}
	return false
}

// encode appends ds in explicit VR little endian, elements in ascending
// tag order, sequences and items with explicit lengths.
func encode(dst []byte, ds dataset) []byte {
	sorted := slices.Clone(ds)
	slices.SortStableFunc(sorted, func(a, b element) int {
		switch {
		case a.tag < b.tag:
			return -1
		case a.tag > b.tag:
			return 1
		}
		return 0
	})
	for _, e := range sorted {
		val := e.value
		if e.vr == "SQ" {
			var body []byte
			for _, it := range e.items {
				inner := encode(nil, it)
				body = appendTag(body, 0xfffee000)
				body = binary.LittleEndian.AppendUint32(body, uint32(len(inner)))
				body = append(body, inner...)
			}
			val = body
		}
		dst = appendTag(dst, e.tag)
		dst = append(dst, e.vr...)
		if longVR(e.vr) {
			dst = append(dst, 0, 0)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(val)))
		} else {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(val)))
		}
		dst = append(dst, val...)
	}
	return dst
}

func appendTag(dst []byte, tag uint32) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(tag>>16))
	return binary.LittleEndian.AppendUint16(dst, uint16(tag))
}

// part10 wraps a data set in the 128-byte preamble, "DICM" and the file
// meta group (PS3.10 7.1).
func part10(sopClass, sopInstance string, body []byte) []byte {
	var meta dataset
	meta = append(meta, element{tag: 0x00020001, vr: "OB", value: []byte{0, 1}})
	meta.str(0x00020002, "UI", sopClass)
	meta.str(0x00020003, "UI", sopInstance)
	meta.str(0x00020010, "UI", explicitVRLittleEndian)
	meta.str(0x00020012, "UI", ImplementationClassUID)
	meta.str(0x00020013, "SH", ImplementationVersionName)
	m := encode(nil, meta)
	var out bytes.Buffer
	out.Grow(132 + 12 + len(m) + len(body))
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	var gl dataset
	gl = append(gl, element{tag: 0x00020000, vr: "UL", value: binary.LittleEndian.AppendUint32(nil, uint32(len(m)))})
	out.Write(encode(nil, gl))
	out.Write(m)
	out.Write(body)
	return out.Bytes()
}
