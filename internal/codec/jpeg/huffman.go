package jpeg

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// lookBits is the width of the Huffman lookahead: codes of at most lookBits
// bits decode with one table load; longer ones (rare) walk maxCode.
const lookBits = 12

// Lookahead entries (int32): bits 0–4 hold the number of bits the entry
// consumes, bit 5 says whether the entry is complete, bits 8 and up hold the
// value. An incomplete entry's value is the Huffman symbol alone and its
// length the code's; a complete entry (lossless tables only) has the code and
// its additional bits folded in, with the signed difference as value. Zero
// means the code is longer than lookBits.
const (
	lookLenMask  = 0x1f
	lookComplete = 0x20
)

// huffTable is one decoded DHT table (T.81 Annex C).
type huffTable struct {
	spec     [16]uint8 // codes of each length, as in the DHT
	specVals []uint8   // symbols, as in the DHT
	built    bool      // look, maxCode, valPtr and vals reflect spec
	lossless bool      // look was built with lossless complete entries

	look    [1 << lookBits]int32
	maxCode [18]int32 // largest code of each length, -1 if none; maxCode[17] is a sentinel
	valPtr  [17]int32 // index in vals of the first code of each length, minus that code
	vals    [256]uint8
	nvals   int
	maxVal  uint8 // largest symbol (DC and lossless: largest category)
}

// check validates the table's code set without building it: the counts
// match the symbols and every code length's codes fit (see build).
func (t *huffTable) check() error {
	n, code := 0, 0
	for l := 1; l <= 16; l++ {
		n += int(t.spec[l-1])
		code += int(t.spec[l-1])
		if code >= 1<<l {
			return fmt.Errorf("%w: Huffman code lengths overflow at %d bits", codec.ErrFormat, l)
		}
		code <<= 1
	}
	if n == 0 || n > 256 || n != len(t.specVals) {
		return fmt.Errorf("%w: Huffman table with %d codes", codec.ErrFormat, n)
	}
	return nil
}

// ready builds the table for a scan of a lossless or DCT frame.
func (t *huffTable) ready(lossless bool) error {
	if t.built && t.lossless == lossless {
		return nil
	}
	spec, vals := t.spec, t.specVals
	if err := t.build(&spec, vals, lossless); err != nil {
		return err
	}
	t.spec, t.specVals, t.built, t.lossless = spec, vals, true, lossless
	return nil
}

// build fills t from the DHT counts (bits[i] codes of length i+1) and values,
// rejecting code sets that overflow a code length. lossless folds the
// additional bits of short codes into complete lookahead entries.
func (t *huffTable) build(bits *[16]uint8, vals []uint8, lossless bool) error {
	n := 0
	for _, b := range bits {
		n += int(b)
	}
	if n == 0 || n > 256 || n != len(vals) {
		return fmt.Errorf("%w: Huffman table with %d codes", codec.ErrFormat, n)
	}
	*t = huffTable{nvals: n}
	copy(t.vals[:], vals)
	for _, v := range vals {
		t.maxVal = max(t.maxVal, v)
	}
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		cnt := int32(bits[l-1])
		t.valPtr[l] = k - code
		if cnt == 0 {
			t.maxCode[l] = -1
		} else {
			code += cnt
			k += cnt
			t.maxCode[l] = code - 1
		}
		// All codes of length l must fit in l bits, and the all-ones code
		// is reserved (T.81 C.2), so the next code must not exceed 2^l - 1.
		if code >= 1<<l {
			return fmt.Errorf("%w: Huffman code lengths overflow at %d bits", codec.ErrFormat, l)
		}
		code <<= 1
	}
	t.maxCode[17] = 1 << 30 // sentinel: never used, lengths stop at 16
	t.maxCode[0] = -1
	// Lookahead.
	code, k = 0, 0
	for l := 1; l <= lookBits; l++ {
		for i := 0; i < int(bits[l-1]); i++ {
			sym := t.vals[k]
			k++
			shift := uint(lookBits - l)
			base := code << shift
			for j := int32(0); j < 1<<shift; j++ {
				e := int32(sym)<<8 | int32(l)
				if lossless {
					s := int(sym)
					switch {
					case s == 0:
						e = int32(l) | lookComplete
					case s == 16:
						e = 32768<<8 | int32(l) | lookComplete
					case s < 16 && l+s <= lookBits:
						v := int32(j >> (uint(lookBits-l) - uint(s)))
						e = extend(v, uint(s))<<8 | int32(l+s) | lookComplete
					}
				}
				t.look[base+j] = e
			}
			code++
		}
		code <<= 1
	}
	return nil
}

// extend maps the s additional bits v of a difference category to the signed
// difference (T.81 F.2.2.1).
func extend(v int32, s uint) int32 {
	// v < 2^(s-1) means a negative difference, v - 2^s + 1; the sign of
	// v - 2^(s-1) selects the correction without a branch.
	return v + ((v-1<<(s-1))>>31)&(1-1<<s)
}

// bitReader reads the entropy-coded segment of a scan, most significant bit
// first, removing the stuffed zero after each 0xFF. At a marker or the end of
// data it supplies zero bits and counts them in pad; a decoder that consumed
// any of them ran past the end of the segment (overrun reports that).
type bitReader struct {
	data []byte
	pos  int    // next byte of data to load
	acc  uint64 // bits, left aligned: the next bit is bit 63
	n    uint   // valid bits in acc
	pad  uint   // zero bits appended after the segment's end, still in acc or consumed

	plain bool // reference paths only (see decode)
}

func (br *bitReader) reset(data []byte, pos int) {
	*br = bitReader{data: data, pos: pos, plain: br.plain}
}

// fill loads bytes until acc holds more than 56 bits.
func (br *bitReader) fill() {
	// Fast path: eight bytes with no 0xFF among them load at once.
	if br.pos+8 <= len(br.data) && br.pad == 0 && !br.plain {
		d := br.data[br.pos : br.pos+8]
		w := uint64(d[0])<<56 | uint64(d[1])<<48 | uint64(d[2])<<40 | uint64(d[3])<<32 |
			uint64(d[4])<<24 | uint64(d[5])<<16 | uint64(d[6])<<8 | uint64(d[7])
		x := ^w // bytes equal to 0xFF become zero bytes
		if (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
			nb := (64 - br.n) >> 3
			keep := br.n + nb*8
			v := w >> br.n
			if keep < 64 {
				v &^= 1<<(64-keep) - 1
			}
			br.acc |= v
			br.n = keep
			br.pos += int(nb)
			return
		}
	}
	for br.n <= 56 {
		var b byte
		if br.pad == 0 && br.pos < len(br.data) {
			b = br.data[br.pos]
			if b == 0xff {
				if br.pos+1 < len(br.data) && br.data[br.pos+1] == 0 {
					br.pos += 2
				} else {
					// A marker (or 0xFF at the very end): the segment ends.
					b = 0
					br.pad += 8
				}
			} else {
				br.pos++
			}
		} else {
			br.pad += 8
		}
		br.acc |= uint64(b) << (56 - br.n)
		br.n += 8
	}
}

// overrun reports whether bits past the end of the segment were consumed.
func (br *bitReader) overrun() bool { return br.n < br.pad }

// bits returns the next s (0 < s <= 16) bits; the caller has ensured n >= s.
func (br *bitReader) bits(s uint) int32 {
	v := int32(br.acc >> (64 - s))
	br.acc <<= s
	br.n -= s
	return v
}

// decode returns the next Huffman symbol. It assumes n >= 16.
func (br *bitReader) decode(t *huffTable) (int32, error) {
	e := t.look[br.acc>>(64-lookBits)]
	if e != 0 && e&lookComplete == 0 && !br.plain {
		l := uint(e & lookLenMask)
		br.acc <<= l
		br.n -= l
		return e >> 8, nil
	}
	return br.decodeSlow(t)
}

// decodeSlow decodes a code of any length by walking maxCode.
func (br *bitReader) decodeSlow(t *huffTable) (int32, error) {
	for l := uint(1); l <= 16; l++ {
		c := int32(br.acc >> (64 - l))
		if c <= t.maxCode[l] {
			i := t.valPtr[l] + c
			if i < 0 || int(i) >= t.nvals {
				break
			}
			br.acc <<= l
			br.n -= l
			return int32(t.vals[i]), nil
		}
	}
	return 0, fmt.Errorf("%w: invalid Huffman code", codec.ErrFormat)
}

// receiveExtend reads s additional bits and returns the signed value
// (T.81 F.2.2.1); n >= s is assumed.
func (br *bitReader) receiveExtend(s uint) int32 {
	if s == 0 {
		return 0
	}
	return extend(br.bits(s), s)
}
