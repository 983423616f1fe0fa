package pth

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Bounds of the pickle pre-scan. A pickle is a program for a stack machine;
// gopickle runs it faithfully, so a hostile program could make it allocate
// without limit (a length prefix of 2^62 bytes, a million nested MARKs each
// costing a fresh stack). scan walks the opcodes once, without building any
// object, and refuses such programs before gopickle sees them.
const (
	// maxMarkDepth bounds the MARKs open at once. Python's pickler opens one
	// per container being written, so the depth is the nesting of the
	// checkpoint's containers (under 20 in real checkpoints).
	maxMarkDepth = 1 << 12
	// maxObjects bounds the opcodes that create a container or call a
	// class (about 200 bytes of Go memory each, so 2^21 of them stay under
	// half a gigabyte). An R2Gen checkpoint with its Adam state needs about
	// 10^4.
	maxObjects = 1 << 21
)

// opcode argument kinds, as pickletools names them.
const (
	argNone    = iota
	argFixed   // fixed number of bytes (n)
	argLine    // one newline-terminated line
	argLines2  // two lines (GLOBAL, INST)
	argLen1    // 1-byte length, then that many bytes
	argLen4    // 4-byte little-endian length (signed), then bytes
	argLen4U   // 4-byte little-endian length (unsigned), then bytes
	argLen8    // 8-byte little-endian length, then bytes
	argFrame8  // FRAME: 8-byte length of the frame that follows (inline)
	argInvalid // not an opcode
)

type opInfo struct {
	kind uint8
	n    uint8 // bytes for argFixed
	mark int8  // +1 pushes a mark, -1 pops one
	obj  bool  // creates an object or calls a class
}

var opTable = func() (t [256]opInfo) {
	for i := range t {
		t[i].kind = argInvalid
	}
	set := func(op byte, kind, n uint8, mark int8, obj bool) { t[op] = opInfo{kind, n, mark, obj} }
	// Protocols 0 and 1.
	set('(', argNone, 0, +1, true) // MARK: a fresh stack
	set('.', argNone, 0, 0, false) // STOP
	set('0', argNone, 0, 0, false) // POP
	set('1', argNone, 0, -1, false)
	set('2', argNone, 0, 0, false) // DUP
	set('F', argLine, 0, 0, false)
	set('I', argLine, 0, 0, false)
	set('J', argFixed, 4, 0, false)
	set('K', argFixed, 1, 0, false)
	set('L', argLine, 0, 0, false)
	set('M', argFixed, 2, 0, false)
	set('N', argNone, 0, 0, false)
	set('P', argLine, 0, 0, true)
	set('Q', argNone, 0, 0, true)
	set('R', argNone, 0, 0, true) // REDUCE
	set('S', argLine, 0, 0, false)
	set('T', argLen4, 0, 0, false)
	set('U', argLen1, 0, 0, false)
	set('V', argLine, 0, 0, false)
	set('X', argLen4U, 0, 0, false)
	set('a', argNone, 0, 0, false)
	set('b', argNone, 0, 0, true) // BUILD
	set('c', argLines2, 0, 0, true)
	set('d', argNone, 0, -1, true)
	set('}', argNone, 0, 0, true)
	set('e', argNone, 0, -1, false)
	set('g', argLine, 0, 0, false)
	set('h', argFixed, 1, 0, false)
	set('i', argLines2, 0, -1, true)
	set('j', argFixed, 4, 0, false)
	set('l', argNone, 0, -1, true)
	set(']', argNone, 0, 0, true)
	set('o', argNone, 0, -1, true)
	set('p', argLine, 0, 0, false)
	set('q', argFixed, 1, 0, false)
	set('r', argFixed, 4, 0, false)
	set('s', argNone, 0, 0, false)
	set('t', argNone, 0, -1, true)
	set(')', argNone, 0, 0, true)
	set('u', argNone, 0, -1, false)
	set('G', argFixed, 8, 0, false)
	// Protocol 2.
	set(0x80, argFixed, 1, 0, false) // PROTO
	set(0x81, argNone, 0, 0, true)   // NEWOBJ
	set(0x82, argFixed, 1, 0, true)  // EXT1
	set(0x83, argFixed, 2, 0, true)
	set(0x84, argFixed, 4, 0, true)
	set(0x85, argNone, 0, 0, true) // TUPLE1..3
	set(0x86, argNone, 0, 0, true)
	set(0x87, argNone, 0, 0, true)
	set(0x88, argNone, 0, 0, false)
	set(0x89, argNone, 0, 0, false)
	set(0x8a, argLen1, 0, 0, false) // LONG1
	set(0x8b, argLen4, 0, 0, false) // LONG4
	// Protocol 3.
	set('B', argLen4, 0, 0, false)
	set('C', argLen1, 0, 0, false)
	// Protocol 4.
	set(0x8c, argLen1, 0, 0, false)
	set(0x8d, argLen8, 0, 0, false)
	set(0x8e, argLen8, 0, 0, false)
	set(0x8f, argNone, 0, 0, true)
	set(0x90, argNone, 0, -1, false)
	set(0x91, argNone, 0, -1, true)
	set(0x92, argNone, 0, 0, true)
	set(0x93, argNone, 0, 0, true)
	set(0x94, argNone, 0, 0, false)
	set(0x95, argFrame8, 0, 0, false)
	// Protocol 5.
	set(0x96, argLen8, 0, 0, false)
	set(0x97, argNone, 0, 0, false)
	set(0x98, argNone, 0, 0, false)
	return t
}()

// scan checks the pickle that starts at off in r and returns the offset
// just past its STOP opcode. It reads at most limit bytes; every length
// prefix must fit in what remains of them, MARKs may nest maxMarkDepth deep
// and at most maxObjects objects may be created. It builds nothing.
func scan(r io.ReaderAt, off, size, limit int64) (end int64, err error) {
	if rem := size - off; rem < limit {
		limit = rem
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: empty pickle", ErrFormat)
	}
	s := scanner{r: r, base: off, lim: limit}
	depth, objects := 0, 0
	for {
		at := s.pos
		op, err := s.byte()
		if err != nil {
			return 0, err
		}
		info := opTable[op]
		switch info.kind {
		case argInvalid:
			return 0, fmt.Errorf("%w: pickle opcode 0x%02x at byte %d", ErrFormat, op, at)
		case argFixed:
			err = s.skip(int64(info.n))
		case argLine:
			err = s.line()
		case argLines2:
			if err = s.line(); err == nil {
				err = s.line()
			}
		case argLen1:
			var b byte
			if b, err = s.byte(); err == nil {
				err = s.skip(int64(b))
			}
		case argLen4, argLen4U:
			var n uint64
			if n, err = s.uint(4); err == nil {
				if info.kind == argLen4 && n >= 1<<31 {
					return 0, fmt.Errorf("%w: negative length at byte %d", ErrFormat, at)
				}
				err = s.skip64(n)
			}
		case argLen8:
			var n uint64
			if n, err = s.uint(8); err == nil {
				err = s.skip64(n)
			}
		case argFrame8:
			// The frame's opcodes follow inline; its length only has to fit.
			var n uint64
			if n, err = s.uint(8); err == nil && n > uint64(s.lim-s.pos) {
				err = fmt.Errorf("%w: frame of %d bytes at byte %d overruns the pickle", ErrFormat, n, at)
			}
		}
		if err != nil {
			return 0, err
		}
		switch info.mark {
		case +1:
			if depth++; depth > maxMarkDepth {
				return 0, fmt.Errorf("%w: pickle nests deeper than %d", ErrLimit, maxMarkDepth)
			}
		case -1:
			if depth == 0 {
				return 0, fmt.Errorf("%w: opcode 0x%02x at byte %d without a MARK", ErrFormat, op, at)
			}
			depth--
		}
		if info.obj {
			if objects++; objects > maxObjects {
				return 0, fmt.Errorf("%w: pickle creates more than %d objects", ErrLimit, maxObjects)
			}
		}
		if op == '.' {
			return off + s.pos, nil
		}
	}
}

// scanner reads a pickle through a small window over an io.ReaderAt.
type scanner struct {
	r         io.ReaderAt
	base, lim int64 // the pickle is r[base : base+lim]
	pos       int64 // relative to base
	buf       [4096]byte
	bufAt     int64 // relative offset of buf[0]
	bufN      int
}

func (s *scanner) errEOF() error {
	return fmt.Errorf("%w: pickle ends without STOP within %d bytes", ErrFormat, s.lim)
}

func (s *scanner) byte() (byte, error) {
	if s.pos >= s.lim {
		return 0, s.errEOF()
	}
	if s.pos < s.bufAt || s.pos >= s.bufAt+int64(s.bufN) {
		n := int64(len(s.buf))
		if rem := s.lim - s.pos; rem < n {
			n = rem
		}
		m, err := s.r.ReadAt(s.buf[:n], s.base+s.pos)
		if m <= 0 {
			if err == nil || err == io.EOF {
				return 0, s.errEOF()
			}
			return 0, fmt.Errorf("pth: reading pickle: %w", err)
		}
		s.bufAt, s.bufN = s.pos, m
	}
	b := s.buf[s.pos-s.bufAt]
	s.pos++
	return b, nil
}

func (s *scanner) skip(n int64) error {
	if n > s.lim-s.pos {
		return fmt.Errorf("%w: argument of %d bytes at byte %d overruns the pickle", ErrFormat, n, s.pos)
	}
	s.pos += n
	return nil
}

func (s *scanner) skip64(n uint64) error {
	if n > uint64(s.lim-s.pos) {
		return fmt.Errorf("%w: argument of %d bytes at byte %d overruns the pickle", ErrFormat, n, s.pos)
	}
	s.pos += int64(n)
	return nil
}

func (s *scanner) uint(n int) (uint64, error) {
	var b [8]byte
	for i := range n {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		b[i] = c
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (s *scanner) line() error {
	for {
		c, err := s.byte()
		if err != nil {
			return err
		}
		if c == '\n' {
			return nil
		}
	}
}
