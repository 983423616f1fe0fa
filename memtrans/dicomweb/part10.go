package dicomweb

import (
	"encoding/binary"
	"strings"
)

// maxMetaBytes bounds the file meta information read from an instance.
const maxMetaBytes = 64 << 10

// sopInstanceUID returns the Media Storage SOP Instance UID (0002,0003)
// of a DICOM Part 10 file: the 128-byte preamble, "DICM", and the file
// meta group, always explicit VR little endian (PS3.10 7.1). ok is false
// when b is not such a file or the group has no UID within its first
// maxMetaBytes.
func sopInstanceUID(b []byte) (uid string, ok bool) {
	if len(b) < 132 || string(b[128:132]) != "DICM" {
		return "", false
	}
	b = b[:min(len(b), 132+maxMetaBytes)]
	for p := 132; p+8 <= len(b); {
		group, elem := binary.LittleEndian.Uint16(b[p:]), binary.LittleEndian.Uint16(b[p+2:])
		if group != 0x0002 {
			return "", false
		}
		hdr, n := 8, int(binary.LittleEndian.Uint16(b[p+6:]))
		switch string(b[p+4 : p+6]) {
		case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT", "UV":
			if p+12 > len(b) {
				return "", false
			}
			hdr, n = 12, int(min(binary.LittleEndian.Uint32(b[p+8:]), uint32(len(b))))
		}
		if n > len(b)-p-hdr {
			return "", false
		}
		if elem == 0x0003 {
			uid = strings.TrimRight(string(b[p+hdr:p+hdr+n]), "\x00 ")
			return uid, uid != ""
		}
		p += hdr + n
	}
	return "", false
}
