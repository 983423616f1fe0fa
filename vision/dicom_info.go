package vision

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DICOMInfo holds the attributes that identify a DICOM image and place it in
// a study and a view, read by [ReadDICOMInfo] without touching the pixels.
// Strings are the values with DICOM's padding (trailing spaces, a trailing
// NUL) removed, converted to UTF-8 (see [ReadDICOMInfo]); an absent
// attribute is "".
type DICOMInfo struct {
	TransferSyntax string // (0002,0010); implicit VR little endian for a bare data set

	SOPClassUID       string // (0008,0016)
	SOPInstanceUID    string // (0008,0018)
	StudyInstanceUID  string // (0020,000D)
	SeriesInstanceUID string // (0020,000E)

	PatientName       string // (0010,0010), components separated by ^
	PatientID         string // (0010,0020)
	IssuerOfPatientID string // (0010,0021): the namespace of PatientID
	PatientBirthDate  string // (0010,0030), YYYYMMDD
	PatientSex        string // (0010,0040)

	StudyDate              string // (0008,0020), YYYYMMDD
	StudyTime              string // (0008,0030), HHMMSS.FFFFFF
	TimezoneOffsetFromUTC  string // (0008,0201), ±HHMM: the zone of the dates and times
	AccessionNumber        string // (0008,0050)
	ReferringPhysicianName string // (0008,0090)
	StudyID                string // (0020,0010)
	StudyDescription       string // (0008,1030)
	SeriesNumber           string // (0020,0011)
	InstanceNumber         string // (0020,0013)
	Modality               string // (0008,0060)
	Manufacturer           string // (0008,0070)
	BodyPartExamined       string // (0018,0015)

	ViewPosition       string      // (0018,5101): PA, AP, LL, RL, LATERAL, …
	ViewCodes          []DICOMCode // the items of View Code Sequence (0054,0220)
	ImageLaterality    string      // (0020,0062)
	PatientOrientation string      // (0020,0020)
	Rows, Columns      int         // (0028,0010), (0028,0011); 0 when absent
	NumberOfFrames     int         // (0028,0008); 0 when absent
	CharacterSet       string      // Specific Character Set (0008,0005) as the file gives it
	HasPixelData       bool        // the data set reaches Pixel Data (7FE0,0010)
	UnknownCharacter   bool        // some value held characters of an unsupported character set, replaced by U+FFFD
}

// DICOMCode is a coded entry of a code sequence (PS3.3 Table 8.8-1).
type DICOMCode struct {
	Value   string // Code Value (0008,0100)
	Scheme  string // Coding Scheme Designator (0008,0102), e.g. SCT, SRT, DCM
	Meaning string // Code Meaning (0008,0104)
}

// Bounds of ReadDICOMInfo.
const (
	// maxInfoHeader bounds the bytes read before Pixel Data.
	maxInfoHeader = 64 << 20
	// maxInfoValue bounds one kept value; the attributes kept are at most
	// 64 characters per value (UI, LO, PN components), so a longer one is
	// malformed.
	maxInfoValue = 1024
	// maxInfoDepth bounds the nesting of sequences.
	maxInfoDepth = 32
	// maxInfoCodes bounds the items of View Code Sequence kept.
	maxInfoCodes = 16
)

// Tags ReadDICOMInfo reads, as group<<16 | element.
const (
	infoTagTransferSyntax = 0x00020010
	infoTagCharset        = 0x00080005
	infoTagCodeValue      = 0x00080100
	infoTagCodeScheme     = 0x00080102
	infoTagCodeMeaning    = 0x00080104
	infoTagNumberOfFrames = 0x00280008
	infoTagRows           = 0x00280010
	infoTagColumns        = 0x00280011
	infoTagViewCodeSeq    = 0x00540220
	infoTagPixelData      = 0x7fe00010
	infoTagItem           = 0xfffee000
	infoTagItemDelim      = 0xfffee00d
	infoTagSeqDelim       = 0xfffee0dd
	infoUndefined         = 0xffffffff
)

// infoText maps the text attributes kept to their DICOMInfo fields.
func infoText(d *DICOMInfo, t uint32) *string {
	switch t {
	case 0x00080016:
		return &d.SOPClassUID
	case 0x00080018:
		return &d.SOPInstanceUID
	case 0x0020000d:
		return &d.StudyInstanceUID
	case 0x0020000e:
		return &d.SeriesInstanceUID
	case 0x00100010:
		return &d.PatientName
	case 0x00100020:
		return &d.PatientID
	case 0x00100021:
		return &d.IssuerOfPatientID
	case 0x00080201:
		return &d.TimezoneOffsetFromUTC
	case 0x00100030:
		return &d.PatientBirthDate
	case 0x00100040:
		return &d.PatientSex
	case 0x00080020:
		return &d.StudyDate
	case 0x00080030:
		return &d.StudyTime
	case 0x00080050:
		return &d.AccessionNumber
	case 0x00080090:
		return &d.ReferringPhysicianName
	case 0x00200010:
		return &d.StudyID
	case 0x00081030:
		return &d.StudyDescription
	case 0x00200011:
		return &d.SeriesNumber
	case 0x00200013:
		return &d.InstanceNumber
	case 0x00080060:
		return &d.Modality
	case 0x00080070:
		return &d.Manufacturer
	case 0x00180015:
		return &d.BodyPartExamined
	case 0x00185101:
		return &d.ViewPosition
	case 0x00200062:
		return &d.ImageLaterality
	case 0x00200020:
		return &d.PatientOrientation
	}
	return nil
}

// ReadDICOMInfo reads the identifying attributes of a DICOM file of size
// bytes (a Part 10 file, or a bare data set as [IsDICOM] recognises it,
// read as implicit VR little endian) without decoding pixels: it stops at
// Pixel Data, reads at most 64 MiB of header (the walk skips values it does
// not keep, so memory stays a few kilobytes whatever the file declares) and
// keeps values of at most 1 KiB.
//
// Text in ISO_IR 100 (Latin-1) or the default repertoire is converted to
// UTF-8 (a byte above 0x7F in the default repertoire is read as Latin-1);
// ISO_IR 192 is UTF-8 already. Other character sets keep their ASCII
// characters; the others become U+FFFD and UnknownCharacter is set.
//
// Malformed input (a length beyond the file or its enclosing item, an
// unknown transfer syntax encoding, nesting deeper than 32, a kept value
// longer than 1 KiB) gives an error wrapping [ErrDICOM]; a header longer
// than 64 MiB gives one wrapping [ErrTooLarge].
func ReadDICOMInfo(r io.Reader, size int64) (*DICOMInfo, error) {
	br := bufio.NewReaderSize(r, 16<<10)
	head, _ := br.Peek(132)
	if !IsDICOM(head) && !infoBare(head) {
		return nil, fmt.Errorf("%w: neither a DICOM Part 10 file nor a bare data set", ErrDICOM)
	}
	ir := &infoReader{r: br, size: size, bo: binary.LittleEndian}
	info := &DICOMInfo{}
	if len(head) >= 132 && string(head[128:132]) == "DICM" {
		if err := ir.skip(132); err != nil {
			return nil, err
		}
	}
	// The file meta group, explicit VR little endian, with or without the
	// preamble before it.
	syntax := ""
	if b, _ := ir.r.Peek(2); len(b) == 2 && binary.LittleEndian.Uint16(b) == 0x0002 {
		if err := ir.elements(-1, 0, info, func(t uint32) bool { return t>>16 != 0x0002 }); err != nil {
			return nil, err
		}
		syntax = info.TransferSyntax
		if syntax == "" {
			return nil, fmt.Errorf("%w: file meta without a transfer syntax", ErrDICOM)
		}
	} else {
		// A bare data set: implicit VR little endian unless the bytes
		// after its first tag are a VR.
		syntax = "1.2.840.10008.1.2"
		if b, _ := ir.r.Peek(6); len(b) == 6 && infoIsVR(string(b[4:6])) {
			syntax = "1.2.840.10008.1.2.1"
		}
		info.TransferSyntax = syntax
	}
	switch syntax {
	case "1.2.840.10008.1.2":
		ir.implicit = true
	case "1.2.840.10008.1.2.2":
		ir.bo = binary.BigEndian
	case "1.2.840.10008.1.2.1.99":
		// Deflated: the data set after the meta group is a raw deflate
		// stream; its size is bounded by the header limit instead.
		fr := flate.NewReader(ir.r)
		defer fr.Close()
		ir.r = bufio.NewReaderSize(fr, 16<<10)
		ir.size = ir.pos + maxInfoHeader + 1
	}
	if err := ir.elements(-1, 0, info, nil); err != nil {
		return nil, err
	}
	return info, nil
}

// ReadDICOMInfoFile is ReadDICOMInfo on a file.
func ReadDICOMInfoFile(name string) (*DICOMInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	info, err := ReadDICOMInfo(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return info, nil
}

// infoBare reports whether head starts a data set without preamble: a
// file meta group (explicit VR), a first element of group 0008 or a group length of a group up to 0008,
// followed by a VR or a plausible implicit length.
func infoBare(head []byte) bool {
	if len(head) < 8 {
		return false
	}
	g, e := binary.LittleEndian.Uint16(head), binary.LittleEndian.Uint16(head[2:])
	if g == 0x0002 {
		return infoIsVR(string(head[4:6])) // a file meta group without the preamble
	}
	if g != 0x0008 && !(e == 0 && g%2 == 0 && g <= 0x0008) {
		return false
	}
	vl := binary.LittleEndian.Uint32(head[4:])
	return infoIsVR(string(head[4:6])) || vl <= 1<<16 || vl == infoUndefined
}

// infoReader walks DICOM elements, keeping only what DICOMInfo holds.
type infoReader struct {
	r        *bufio.Reader
	pos      int64 // bytes consumed
	size     int64 // bytes the stream holds
	bo       binary.ByteOrder
	implicit bool
	buf      [maxInfoValue]byte
}

func (ir *infoReader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format+" (at byte %d)", append([]any{ErrDICOM}, append(args, ir.pos)...)...)
}

func (ir *infoReader) check(n int64) error {
	if n > ir.size-ir.pos {
		return ir.fail("%d bytes needed, %d left", n, ir.size-ir.pos)
	}
	if ir.pos+n > maxInfoHeader {
		return fmt.Errorf("%w: DICOM header exceeds %d bytes", ErrTooLarge, maxInfoHeader)
	}
	return nil
}

// read returns the next n ≤ maxInfoValue bytes (valid until the next call).
func (ir *infoReader) read(n int) ([]byte, error) {
	if err := ir.check(int64(n)); err != nil {
		return nil, err
	}
	b := ir.buf[:n]
	if _, err := io.ReadFull(ir.r, b); err != nil {
		return nil, ir.fail("truncated: %v", err)
	}
	ir.pos += int64(n)
	return b, nil
}

func (ir *infoReader) skip(n int64) error {
	if err := ir.check(n); err != nil {
		return err
	}
	if _, err := ir.r.Discard(int(n)); err != nil {
		return ir.fail("truncated: %v", err)
	}
	ir.pos += n
	return nil
}

// header reads an element's tag, VR ("" where the encoding gives none) and
// value length.
func (ir *infoReader) header(bo binary.ByteOrder, implicit bool) (t uint32, vr string, vl uint32, err error) {
	b, err := ir.read(8)
	if err != nil {
		return 0, "", 0, err
	}
	t = uint32(bo.Uint16(b))<<16 | uint32(bo.Uint16(b[2:]))
	if implicit || t>>16 == 0xfffe {
		return t, "", bo.Uint32(b[4:]), nil
	}
	vr = string(b[4:6])
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		if b, err = ir.read(4); err != nil {
			return 0, "", 0, err
		}
		return t, vr, bo.Uint32(b), nil
	}
	if !infoIsVR(vr) {
		return 0, "", 0, ir.fail("element (%04X,%04X) has no VR (%q)", t>>16, t&0xffff, vr)
	}
	return t, vr, uint32(bo.Uint16(b[6:])), nil
}

// elements walks a data set up to end (a byte position; -1: to the end of
// the stream, an item delimiter or Pixel Data), keeping attributes at depth
// 0 and codes of View Code Sequence items. stop, when set, ends the walk
// before the first tag it accepts (the end of the file meta group).
func (ir *infoReader) elements(end int64, depth int, info *DICOMInfo, stop func(uint32) bool) error {
	meta := stop != nil
	for end < 0 || ir.pos < end {
		if end < 0 && depth == 0 {
			if _, err := ir.r.Peek(1); ir.pos == ir.size || err == io.EOF {
				return nil
			}
		}
		if stop != nil {
			b, err := ir.r.Peek(4)
			if err != nil || ir.size-ir.pos < 4 {
				return ir.fail("truncated in the file meta group")
			}
			if stop(uint32(binary.LittleEndian.Uint16(b))<<16 | uint32(binary.LittleEndian.Uint16(b[2:]))) {
				return nil
			}
		}
		bo, implicit := ir.bo, ir.implicit
		if meta {
			bo, implicit = binary.LittleEndian, false
		}
		t, vr, vl, err := ir.header(bo, implicit)
		if err != nil {
			return err
		}
		switch {
		case t == infoTagItemDelim && depth > 0 && end < 0:
			return nil
		case t>>16 == 0xfffe:
			return ir.fail("item tag (%04X,%04X) outside a sequence", t>>16, t&0xffff)
		case t == infoTagPixelData && depth == 0:
			info.HasPixelData = true
			return nil
		case t == infoTagViewCodeSeq && depth == 0:
			if err := ir.sequence(vl, depth+1, info); err != nil {
				return err
			}
		case vr == "UN" && vl == infoUndefined:
			// An unknown VR of undefined length is a sequence in implicit
			// VR little endian (PS3.5 6.2.2).
			saveBO, saveImplicit := ir.bo, ir.implicit
			ir.bo, ir.implicit = binary.LittleEndian, true
			err := ir.sequence(vl, depth+1, nil)
			ir.bo, ir.implicit = saveBO, saveImplicit
			if err != nil {
				return err
			}
		case vr == "SQ" || vl == infoUndefined:
			if err := ir.sequence(vl, depth+1, nil); err != nil {
				return err
			}
		default:
			if err := ir.value(t, vr, vl, depth, info); err != nil {
				return err
			}
		}
		if end >= 0 && ir.pos > end {
			return ir.fail("element overruns its item")
		}
	}
	return nil
}

// value keeps or skips one element's value.
func (ir *infoReader) value(t uint32, vr string, vl uint32, depth int, info *DICOMInfo) error {
	var dst *string
	numeric := t == infoTagRows || t == infoTagColumns
	switch {
	case depth == 0 && t == infoTagTransferSyntax, depth == 0 && t == infoTagCharset, depth == 0 && t == infoTagNumberOfFrames:
	case depth == 0 && numeric:
	case depth == 0:
		dst = infoText(info, t)
		if dst == nil {
			return ir.skip(int64(vl))
		}
	case depth == 1 && info != nil && (t == infoTagCodeValue || t == infoTagCodeScheme || t == infoTagCodeMeaning) && len(info.ViewCodes) > 0:
		c := &info.ViewCodes[len(info.ViewCodes)-1]
		dst = map[uint32]*string{infoTagCodeValue: &c.Value, infoTagCodeScheme: &c.Scheme, infoTagCodeMeaning: &c.Meaning}[t]
	default:
		return ir.skip(int64(vl))
	}
	if vl > maxInfoValue {
		return ir.fail("value of (%04X,%04X) is %d bytes", t>>16, t&0xffff, vl)
	}
	b, err := ir.read(int(vl))
	if err != nil {
		return err
	}
	switch {
	case numeric:
		if len(b) != 2 || (vr != "" && vr != "US" && vr != "UN") {
			return ir.fail("(%04X,%04X) is %d bytes of %s, not a US", t>>16, t&0xffff, len(b), vr)
		}
		n := int(ir.bo.Uint16(b))
		if t == infoTagRows {
			info.Rows = n
		} else {
			info.Columns = n
		}
	case t == infoTagTransferSyntax:
		info.TransferSyntax = infoTrim(string(b))
	case t == infoTagCharset:
		info.CharacterSet = infoTrim(string(b))
	case t == infoTagNumberOfFrames:
		n, err := strconv.Atoi(infoTrim(string(b)))
		if err != nil || n < 0 {
			return ir.fail("Number of Frames %q", b)
		}
		info.NumberOfFrames = n
	default:
		*dst = infoTrim(infoDecode(b, info))
	}
	return nil
}

// sequence walks a sequence's items (vl bytes, or up to its delimiter),
// adding one DICOMCode per item when codes is set.
func (ir *infoReader) sequence(vl uint32, depth int, codes *DICOMInfo) error {
	if depth > maxInfoDepth {
		return ir.fail("sequences nested deeper than %d", maxInfoDepth)
	}
	if vl != infoUndefined && codes == nil {
		return ir.skip(int64(vl))
	}
	end := int64(-1)
	if vl != infoUndefined {
		if err := ir.check(int64(vl)); err != nil {
			return err
		}
		end = ir.pos + int64(vl)
	}
	for end < 0 || ir.pos < end {
		t, _, il, err := ir.header(ir.bo, true)
		if err != nil {
			return err
		}
		switch t {
		case infoTagSeqDelim:
			if end >= 0 {
				return ir.fail("sequence delimiter in a sequence of defined length")
			}
			return nil
		case infoTagItem:
		default:
			return ir.fail("(%04X,%04X) where a sequence item belongs", t>>16, t&0xffff)
		}
		if codes != nil && len(codes.ViewCodes) < maxInfoCodes && depth == 1 {
			codes.ViewCodes = append(codes.ViewCodes, DICOMCode{})
		} else {
			codes = nil
		}
		if il == infoUndefined {
			if err := ir.elements(-1, depth, codes, nil); err != nil {
				return err
			}
		} else {
			if err := ir.check(int64(il)); err != nil {
				return err
			}
			if codes == nil {
				if err := ir.skip(int64(il)); err != nil {
					return err
				}
			} else if err := ir.elements(ir.pos+int64(il), depth, codes, nil); err != nil {
				return err
			}
		}
		if end >= 0 && ir.pos > end {
			return ir.fail("item overruns its sequence")
		}
	}
	return nil
}

// infoDecode converts a text value to UTF-8 by the data set's character
// set.
func infoDecode(b []byte, info *DICOMInfo) string {
	ascii := true
	for _, c := range b {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return string(b)
	}
	cs := strings.Fields(strings.ReplaceAll(info.CharacterSet, `\`, " "))
	switch {
	case len(cs) == 0 || (len(cs) == 1 && (cs[0] == "ISO_IR" || cs[0] == "ISO_IR 6")) || info.CharacterSet == "ISO_IR 100":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c) // Latin-1 is the first 256 code points
		}
		return string(r)
	case info.CharacterSet == "ISO_IR 192" && utf8.Valid(b):
		return string(b)
	}
	info.UnknownCharacter = true
	var s strings.Builder
	for _, c := range b {
		if c < 0x80 {
			s.WriteByte(c)
		} else {
			s.WriteRune(utf8.RuneError)
		}
	}
	return s.String()
}

// infoTrim removes DICOM padding: trailing NULs and spaces (and leading
// spaces, insignificant in every VR kept).
func infoTrim(s string) string {
	return strings.TrimSpace(strings.TrimRight(s, "\x00 "))
}

// infoIsVR reports whether s is a value representation of PS3.5.
func infoIsVR(s string) bool {
	return len(s) == 2 && strings.Contains("AE AS AT CS DA DS DT FL FD IS LO LT OB OD OF OL OV OW PN SH SL SQ SS ST SV TM UC UI UL UN UR US UT UV", s) && s[0] != ' ' && s[1] != ' '
}

// String summarises the attributes that place the image: study, series,
// instance and view.
func (d *DICOMInfo) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "study %s series %s instance %s", d.StudyInstanceUID, d.SeriesInstanceUID, d.SOPInstanceUID)
	if d.ViewPosition != "" {
		fmt.Fprintf(&b, " view %s", d.ViewPosition)
	}
	for _, c := range d.ViewCodes {
		fmt.Fprintf(&b, " (%s,%s,%q)", c.Value, c.Scheme, c.Meaning)
	}
	return b.String()
}
