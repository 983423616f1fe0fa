package vision

import (
	"bufio"
	"bytes"
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
	syntax   string // transfer syntax UID
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
	if keep && int64(w.head.Len())+n > maxDICOMHeader {
		return nil, fmt.Errorf("%w: DICOM header exceeds %d bytes", ErrTooLarge, maxDICOMHeader)
	}
	if !keep {
		// Grown as bytes arrive, so a size that overstates the stream
		// costs no more than the stream holds.
		var b bytes.Buffer
		if _, err := io.CopyN(&b, w.r, n); err != nil {
			return nil, w.fail("truncated: %v", err)
		}
		w.pos += n
		return b.Bytes(), nil
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
// syntax of the data set.
func (w *dicomWalker) start() error {
	b, err := w.take(132, true)
	if err != nil {
		return err
	}
	if string(b[128:]) != "DICM" {
		return fmt.Errorf("%w: no DICM preamble", ErrDICOM)
	}
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
	switch w.syntax {
	case tsImplicitLE:
		w.bo, w.implicit = binary.LittleEndian, true
	case tsExplicitBE:
		w.bo = binary.BigEndian
	case tsDeflated:
		return fmt.Errorf("%w: deflated transfer syntax", ErrDICOMUnsupported)
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
		t, err := w.peekTag(w.bo)
		if err != nil {
			return false, err
		}
		if depth == 0 && t == tag.PixelData {
			return true, nil
		}
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
		case vr == "SQ" || (vr == "UN" && vl == undefinedLength):
			if vr == "UN" && !w.implicit {
				return false, fmt.Errorf("%w: element %v of VR UN and undefined length", ErrDICOMUnsupported, t)
			}
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

// fragments reads the items of encapsulated pixel data (after its element
// header) up to the sequence delimiter: the basic offset table first, then
// the fragments, whose total may not exceed limit bytes.
func (w *dicomWalker) fragments(limit int64) ([][]byte, error) {
	var out [][]byte
	total := int64(0)
	for first := true; ; first = false {
		t, _, il, err := w.elemHeader(w.bo, true, false)
		if err != nil {
			return nil, err
		}
		if t == tagSeqDelim {
			return out, nil
		}
		if t != tagItem || il == undefinedLength {
			return nil, w.fail("%v where a pixel data fragment was expected", t)
		}
		if total += int64(il); total > limit {
			return nil, fmt.Errorf("%w: encapsulated pixel data over %d bytes", ErrTooLarge, limit)
		}
		b, err := w.take(int64(il), false)
		if err != nil {
			return nil, err
		}
		if !first {
			out = append(out, b)
		}
	}
}
