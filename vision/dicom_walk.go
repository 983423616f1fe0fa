package vision

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/suyashkumar/dicom/pkg/tag"
)

// The DICOM reader of github.com/suyashkumar/dicom trusts the value lengths
// it reads: a 20-byte file declaring a 4 GiB string makes it allocate 4 GiB,
// and deeply nested sequences recurse without limit. So the bytes are first
// walked here, element by element, checking every length against what is
// left of the file and of the enclosing item; only bytes that passed are
// handed to it. The walk stops at the top-level Pixel Data element, so the
// image size is known, and checked against the pixel limit, before any pixel
// byte is read.

// Bounds of the walk.
const (
	// maxDICOMHeader bounds the bytes before the pixel data (the header
	// of a chest film is a few kilobytes; private tags and overlays can
	// make it megabytes).
	maxDICOMHeader = 64 << 20
	// maxDICOMDepth bounds the nesting of sequences.
	maxDICOMDepth = 32
	// maxInflated bounds the inflated size of a deflated data set; what
	// it may allocate is bounded by the header limit and the pixel limit.
	maxInflated = 1 << 40
)

// Tags of the encoding itself (group FFFE: no VR, even in explicit syntaxes).
var (
	tagItem         = tag.Tag{Group: 0xfffe, Element: 0xe000}
	tagItemDelim    = tag.Tag{Group: 0xfffe, Element: 0xe00d}
	tagSeqDelim     = tag.Tag{Group: 0xfffe, Element: 0xe0dd}
	undefinedLength = uint32(0xffffffff)
)

// dicomWalker reads a DICOM stream, keeping the header bytes.
type dicomWalker struct {
	r        *bufio.Reader
	pos      int64 // bytes consumed
	size     int64 // bytes the stream holds
	head     bytes.Buffer
	bo       binary.ByteOrder
	implicit bool
	syntax   string  // transfer syntax UID
	drop     int     // > 0 while walking bytes left out of the header
	pixelTag tag.Tag // the pixel data element reached (integer, float or double)
	// The Extended Offset Table and its lengths (PS3.3 C.7.6.3.1.8), raw.
	extOffsets, extLengths []byte
}

// Transfer syntaxes.
const (
	tsImplicitLE = "1.2.840.10008.1.2"
	tsExplicitLE = "1.2.840.10008.1.2.1"
	tsDeflated   = "1.2.840.10008.1.2.1.99"
	tsExplicitBE = "1.2.840.10008.1.2.2"
)

func (w *dicomWalker) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format+" (at byte %d)", append([]any{ErrDICOM}, append(args, w.pos)...)...)
}

// take reads n bytes, appending them to the header when keep is set.
func (w *dicomWalker) take(n int64, keep bool) ([]byte, error) {
	if n > w.size-w.pos {
		return nil, w.fail("%d bytes needed, %d left", n, w.size-w.pos)
	}
	if w.drop > 0 {
		keep = false
	}
	if keep && int64(w.head.Len())+n > maxDICOMHeader {
		return nil, fmt.Errorf("%w: DICOM header exceeds %d bytes", ErrTooLarge, maxDICOMHeader)
	}
	if !keep {
		// n has been checked against what the stream declares to hold;
		// callers bound it further (pixel data by the pixel limit).
		b := make([]byte, n)
		if _, err := io.ReadFull(w.r, b); err != nil {
			return nil, w.fail("truncated: %v", err)
		}
		w.pos += n
		return b, nil
	}
	start := w.head.Len()
	if _, err := io.CopyN(&w.head, w.r, n); err != nil {
		return nil, w.fail("truncated: %v", err)
	}
	w.pos += n
	return w.head.Bytes()[start:], nil
}

func (w *dicomWalker) peekTag(bo binary.ByteOrder) (tag.Tag, error) {
	if w.size-w.pos < 4 {
		return tag.Tag{}, w.fail("truncated before a tag")
	}
	b, err := w.r.Peek(4)
	if err != nil {
		return tag.Tag{}, w.fail("truncated: %v", err)
	}
	return tag.Tag{Group: bo.Uint16(b), Element: bo.Uint16(b[2:])}, nil
}

// elemHeader reads an element's tag, VR ("" for implicit syntaxes and
// group FFFE) and value length.
func (w *dicomWalker) elemHeader(bo binary.ByteOrder, implicit, keep bool) (t tag.Tag, vr string, vl uint32, err error) {
	b, err := w.take(4, keep)
	if err != nil {
		return
	}
	t = tag.Tag{Group: bo.Uint16(b), Element: bo.Uint16(b[2:])}
	if implicit || t.Group == 0xfffe {
		b, err = w.take(4, keep)
		if err != nil {
			return
		}
		return t, "", bo.Uint32(b), nil
	}
	b, err = w.take(4, keep)
	if err != nil {
		return
	}
	vr = string(b[:2])
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		if b, err = w.take(4, keep); err != nil {
			return
		}
		vl = bo.Uint32(b)
	default:
		vl = uint32(bo.Uint16(b[2:]))
	}
	return t, vr, vl, nil
}

// start reads the preamble and the file meta group and sets the transfer
// syntax of the data set. A stream without the preamble is read as a bare
// data set (as older archives and the NEMA samples hold them): its file meta
// group when it starts with one, otherwise implicit VR little endian (PS3.5
// 10.1) unless its first element carries an explicit VR. For a bare data set
// a preamble and a file meta group naming the syntax are written into the
// kept header, so that it parses as a Part 10 file.
func (w *dicomWalker) start() error {
	b, err := w.r.Peek(int(min(132, w.size)))
	if err != nil && len(b) < int(min(132, w.size)) {
		return w.fail("truncated: %v", err)
	}
	if len(b) == 132 && string(b[128:]) == dicomMagic {
		if _, err := w.take(132, true); err != nil {
			return err
		}
		return w.meta()
	}
	kind := bareDataSet(b)
	if kind == bareNone {
		return fmt.Errorf("%w: neither a DICM preamble nor a data set", ErrDICOM)
	}
	if kind == bareMeta {
		w.head.Write(make([]byte, 128))
		w.head.WriteString(dicomMagic)
		return w.meta()
	}
	w.syntax = tsImplicitLE
	if kind == bareExplicit {
		w.syntax = tsExplicitLE
	}
	w.writeMeta(w.syntax)
	return w.setSyntax()
}

// writeMeta writes a preamble and a file meta group naming the transfer
// syntax ts into the kept header, for a data set read without them (or
// inflated from a deflated one).
func (w *dicomWalker) writeMeta(ts string) {
	w.head.Write(make([]byte, 128))
	w.head.WriteString(dicomMagic)
	uid := []byte(ts)
	if len(uid)%2 == 1 {
		uid = append(uid, 0)
	}
	var m [12]byte
	binary.LittleEndian.PutUint16(m[0:], 0x0002)
	binary.LittleEndian.PutUint16(m[2:], 0x0000)
	copy(m[4:], "UL")
	binary.LittleEndian.PutUint16(m[6:], 4)
	binary.LittleEndian.PutUint32(m[8:], uint32(8+len(uid)))
	w.head.Write(m[:])
	binary.LittleEndian.PutUint16(m[0:], 0x0002)
	binary.LittleEndian.PutUint16(m[2:], 0x0010)
	copy(m[4:], "UI")
	binary.LittleEndian.PutUint16(m[6:], uint16(len(uid)))
	w.head.Write(m[:8])
	w.head.Write(uid)
}

// Kinds of streams without a preamble.
const (
	bareNone     = iota // not a data set
	bareMeta            // a file meta group without the preamble
	bareImplicit        // a data set, implicit VR
	bareExplicit        // a data set, explicit VR
)

// bareDataSet tells whether head, the first bytes of a stream without a
// preamble, starts a data set: its first tag is of group 0002 (file meta,
// explicit VR) or 0008 (identification, where an image's data set begins),
// with a plausible VR or length after it.
func bareDataSet(head []byte) int {
	if len(head) < 8 {
		return bareNone
	}
	g := binary.LittleEndian.Uint16(head)
	explicit := isVR(string(head[4:6]))
	switch {
	case g == 0x0002 && explicit:
		return bareMeta
	case g != 0x0008:
		return bareNone
	case explicit:
		return bareExplicit
	}
	if vl := binary.LittleEndian.Uint32(head[4:]); vl > 1<<16 && vl != undefinedLength {
		return bareNone
	}
	return bareImplicit
}

// isVR reports whether s is one of the value representations of PS3.5.
func isVR(s string) bool {
	switch s {
	case "AE", "AS", "AT", "CS", "DA", "DS", "DT", "FL", "FD", "IS", "LO", "LT", "OB", "OD", "OF", "OL",
		"OV", "OW", "PN", "SH", "SL", "SQ", "SS", "ST", "SV", "TM", "UC", "UI", "UL", "UN", "UR", "US", "UT", "UV":
		return true
	}
	return false
}

// IsDICOM reports whether head, the first bytes of a file (at least 132,
// or the whole file when shorter), is the start of DICOM: a Part 10 file
// ("DICM" after the 128-byte preamble) or a bare data set that
// [DecodeDICOM] reads (no preamble; a first element of group 0002 with an
// explicit VR, or of group 0008 with a plausible VR or length).
func IsDICOM(head []byte) bool {
	if len(head) >= 132 && string(head[128:132]) == dicomMagic {
		return true
	}
	return bareDataSet(head) != bareNone
}

// meta reads the file meta group (group 0002, explicit VR little endian).
func (w *dicomWalker) meta() error {
	for {
		t, err := w.peekTag(binary.LittleEndian)
		if err != nil {
			return err
		}
		if t.Group != 0x0002 {
			break
		}
		t, vr, vl, err := w.elemHeader(binary.LittleEndian, false, true)
		if err != nil {
			return err
		}
		if vl == undefinedLength || vr == "SQ" {
			return fmt.Errorf("%w: file meta element %v of undefined length", ErrDICOM, t)
		}
		v, err := w.take(int64(vl), true)
		if err != nil {
			return err
		}
		if t == tag.TransferSyntaxUID {
			w.syntax = strings.TrimRight(string(v), " \x00")
		}
	}
	return w.setSyntax()
}

// setSyntax sets the byte order and VR encoding of the data set.
func (w *dicomWalker) setSyntax() error {
	switch w.syntax {
	case tsImplicitLE:
		w.bo, w.implicit = binary.LittleEndian, true
	case tsExplicitBE:
		w.bo = binary.BigEndian
	case tsDeflated:
		// The data set is a raw deflate stream (PS3.5 A.5): it is read
		// inflated, its lengths checked against what inflates as it is
		// read (the file's size says nothing of them), and kept behind a
		// file meta group that names explicit VR little endian.
		w.bo = binary.LittleEndian
		w.r = bufio.NewReaderSize(flate.NewReader(w.r), 64<<10)
		w.size = w.pos + maxInflated
		w.head.Reset()
		w.writeMeta(tsExplicitLE)
	case "":
		return fmt.Errorf("%w: no transfer syntax", ErrDICOM)
	default: // explicit little endian, and every encapsulated syntax
		w.bo = binary.LittleEndian
	}
	return nil
}

// dataset walks elements at the given depth until end (a byte position),
// an item delimiter (end < 0), or — at depth 0 — the Pixel Data element,
// which is left unread. It reports whether Pixel Data was reached.
func (w *dicomWalker) dataset(end int64, depth int) (bool, error) {
	if depth > maxDICOMDepth {
		return false, w.fail("sequences nest deeper than %d", maxDICOMDepth)
	}
	for {
		if end >= 0 && w.pos >= end {
			if w.pos > end {
				return false, w.fail("element overruns its item")
			}
			return false, nil
		}
		if end < 0 && depth == 0 && w.pos == w.size {
			return false, nil // the data set ends without pixel data
		}
		if end < 0 && depth == 0 {
			if _, err := w.r.Peek(1); err == io.EOF {
				return false, nil // a deflated data set ends without pixel data
			}
		}
		t, err := w.peekTag(w.bo)
		if err != nil {
			return false, err
		}
		if depth == 0 && (t == tag.PixelData || t == tag.FloatPixelData || t == tag.DoubleFloatPixelData) {
			w.pixelTag = t
			return true, nil
		}
		if depth == 0 && (t == tag.ExtendedOffsetTable || t == tag.ExtendedOffsetTableLengths) {
			// Kept aside: the header parser may not know their VR (OV).
			_, _, vl, err := w.elemHeader(w.bo, w.implicit, false)
			if err != nil {
				return false, err
			}
			if vl == undefinedLength || vl%8 != 0 || vl > maxDICOMHeader {
				return false, w.fail("%v of %d bytes", t, vl)
			}
			v, err := w.take(int64(vl), false)
			if err != nil {
				return false, err
			}
			if t == tag.ExtendedOffsetTable {
				w.extOffsets = v
			} else {
				w.extLengths = v
			}
			continue
		}
		mark := w.head.Len()
		t, vr, vl, err := w.elemHeader(w.bo, w.implicit, true)
		if err != nil {
			return false, err
		}
		if t == tagItemDelim {
			if end >= 0 || depth == 0 {
				return false, w.fail("unexpected item delimiter")
			}
			return false, nil
		}
		if t.Group == 0xfffe {
			return false, w.fail("unexpected %v in a data set", t)
		}
		if vr == "" {
			vr = "UN"
			if info, err := tag.Find(t); err == nil && len(info.VRs) > 0 {
				vr = info.VRs[0]
			}
		}
		switch {
		case vr == "UN" && vl == undefinedLength && !w.implicit:
			// A sequence of unknown VR in an explicit syntax is encoded
			// in implicit VR (PS3.5 6.2.2); it is walked and left out of
			// the kept header, which the header parser could not read.
			w.head.Truncate(mark)
			w.implicit = true
			w.drop++
			err := w.sequence(vl, depth, false)
			w.implicit = false
			w.drop--
			if err != nil {
				return false, err
			}
		case vr == "SQ" || (vr == "UN" && vl == undefinedLength):
			if err := w.sequence(vl, depth, false); err != nil {
				return false, err
			}
		case vl == undefinedLength:
			// OB or OW of undefined length: items of raw bytes.
			if err := w.sequence(vl, depth, true); err != nil {
				return false, err
			}
		default:
			if end >= 0 && int64(vl) > end-w.pos {
				return false, w.fail("element %v of %d bytes overruns its item", t, vl)
			}
			if _, err := w.take(int64(vl), true); err != nil {
				return false, err
			}
		}
	}
}

// sequence walks the items of a sequence (their content as data sets, or
// as raw bytes).
func (w *dicomWalker) sequence(vl uint32, depth int, raw bool) error {
	end := int64(-1)
	if vl != undefinedLength {
		if int64(vl) > w.size-w.pos {
			return w.fail("sequence of %d bytes overruns the file", vl)
		}
		end = w.pos + int64(vl)
	}
	for {
		if end >= 0 && w.pos >= end {
			if w.pos > end {
				return w.fail("item overruns its sequence")
			}
			return nil
		}
		t, _, il, err := w.elemHeader(w.bo, true, true)
		if err != nil {
			return err
		}
		switch t {
		case tagSeqDelim:
			if end >= 0 {
				return w.fail("sequence delimiter in a sequence of defined length")
			}
			return nil
		case tagItem:
		default:
			return w.fail("%v where an item was expected", t)
		}
		switch {
		case raw && il == undefinedLength:
			return w.fail("raw item of undefined length")
		case raw:
			if _, err := w.take(int64(il), true); err != nil {
				return err
			}
		case il == undefinedLength:
			if _, err := w.dataset(-1, depth+1); err != nil {
				return err
			}
		default:
			if int64(il) > w.size-w.pos {
				return w.fail("item of %d bytes overruns the file", il)
			}
			if _, err := w.dataset(w.pos+int64(il), depth+1); err != nil {
				return err
			}
		}
	}
}

// fragment reads the next item of encapsulated pixel data (after the
// element header). It returns nil, false at the sequence delimiter. The
// item's bytes are refused when total, the bytes read so far, would exceed
// limit.
func (w *dicomWalker) fragment(total *int64, limit int64) ([]byte, bool, error) {
	t, _, il, err := w.elemHeader(w.bo, true, false)
	if err != nil {
		return nil, false, err
	}
	if t == tagSeqDelim {
		return nil, false, nil
	}
	if t != tagItem || il == undefinedLength {
		return nil, false, w.fail("%v where a pixel data fragment was expected", t)
	}
	if int64(il) > w.size-w.pos {
		return nil, false, w.fail("pixel data fragment of %d bytes overruns the file (%d bytes left)", il, w.size-w.pos)
	}
	if *total += int64(il); *total > limit {
		return nil, false, fmt.Errorf("%w: encapsulated pixel data over %d bytes", ErrTooLarge, limit)
	}
	b, err := w.take(int64(il), false)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// stream passes the next n bytes to f in chunks of at most 64 KiB (whole
// multiples of unit bytes), without buffering them all.
func (w *dicomWalker) stream(n int64, unit int, f func(chunk []byte)) error {
	if n > w.size-w.pos {
		return w.fail("%d bytes needed, %d left", n, w.size-w.pos)
	}
	buf := make([]byte, min(n, int64(64<<10/unit*unit)))
	for n > 0 {
		b := buf[:min(n, int64(len(buf)))]
		if _, err := io.ReadFull(w.r, b); err != nil {
			return w.fail("truncated: %v", err)
		}
		w.pos += int64(len(b))
		n -= int64(len(b))
		f(b)
	}
	return nil
}
