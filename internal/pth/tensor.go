package pth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Dtype is the element type of a storage.
type Dtype uint8

// The storage types of torch.save, by their Python class.
const (
	Float32  Dtype = iota + 1 // torch.FloatStorage
	Float16                   // torch.HalfStorage
	BFloat16                  // torch.BFloat16Storage
	Float64                   // torch.DoubleStorage
	Int64                     // torch.LongStorage
	Int32                     // torch.IntStorage
	Int16                     // torch.ShortStorage
	Int8                      // torch.CharStorage
	Uint8                     // torch.ByteStorage
	Bool                      // torch.BoolStorage
)

var dtypeNames = [...]string{"invalid", "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"}

// String returns the PyTorch name of the dtype.
func (d Dtype) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("Dtype(%d)", uint8(d))
}

// Size returns the bytes per element.
func (d Dtype) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case Float16, BFloat16, Int16:
		return 2
	}
	return 1
}

// halfToFloat32 converts an IEEE 754 binary16 value exactly.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant · 2^-24, exact in float32.
	v := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// decoder returns a function reading element i of b as float32.
func decoder(d Dtype, bo binary.ByteOrder) func(b []byte, i int64) float32 {
	switch d {
	case Float32:
		return func(b []byte, i int64) float32 { return math.Float32frombits(bo.Uint32(b[4*i:])) }
	case Float16:
		return func(b []byte, i int64) float32 { return halfToFloat32(bo.Uint16(b[2*i:])) }
	case BFloat16:
		return func(b []byte, i int64) float32 { return math.Float32frombits(uint32(bo.Uint16(b[2*i:])) << 16) }
	case Float64:
		return func(b []byte, i int64) float32 { return float32(math.Float64frombits(bo.Uint64(b[8*i:]))) }
	case Int64:
		return func(b []byte, i int64) float32 { return float32(int64(bo.Uint64(b[8*i:]))) }
	case Int32:
		return func(b []byte, i int64) float32 { return float32(int32(bo.Uint32(b[4*i:]))) }
	case Int16:
		return func(b []byte, i int64) float32 { return float32(int16(bo.Uint16(b[2*i:]))) }
	case Int8:
		return func(b []byte, i int64) float32 { return float32(int8(b[i])) }
	case Bool:
		return func(b []byte, i int64) float32 {
			if b[i] != 0 {
				return 1
			}
			return 0
		}
	}
	return func(b []byte, i int64) float32 { return float32(b[i]) }
}

// materialize reads t's elements in row-major order of its shape.
func (f *File) materialize(t *tensorRef) ([]float32, error) {
	n := 1
	for _, s := range t.shape {
		n *= s
	}
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	es := int64(t.storage.dtype.Size())
	last, _ := lastIndex(t) // checked by Open
	first := t.offset
	raw, err := f.readSpan(t.storage, first*es, (last-first+1)*es)
	if err != nil {
		return nil, err
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if f.bigEndian {
		bo = binary.BigEndian
	}
	contiguous := (Info{Shape: t.shape, Stride: t.stride}).Contiguous()
	if contiguous && t.storage.dtype == Float32 && !f.bigEndian {
		// The common case, without a call per element.
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	}
	dec := decoder(t.storage.dtype, bo)
	if contiguous {
		for i := range out {
			out[i] = dec(raw, int64(i))
		}
		return out, nil
	}
	// Odometer over the shape: idx is the storage index (relative to
	// first) of out[i].
	rank := len(t.shape)
	pos := make([]int, rank)
	idx := int64(0)
	for i := range out {
		out[i] = dec(raw, idx)
		for d := rank - 1; d >= 0; d-- {
			pos[d]++
			idx += t.stride[d]
			if pos[d] < t.shape[d] {
				break
			}
			idx -= int64(pos[d]) * t.stride[d]
			pos[d] = 0
		}
	}
	return out, nil
}

// readSpan reads n bytes at byte offset off of a storage's data.
func (f *File) readSpan(st *storageRef, off, n int64) ([]byte, error) {
	sp := f.storages[st]
	off += st.base * int64(st.dtype.Size())
	buf := make([]byte, n)
	if sp.open == nil {
		if _, err := sp.r.ReadAt(buf, sp.off+off); err != nil {
			return nil, fmt.Errorf("%w: reading storage %q: %v", ErrFormat, st.key, err)
		}
		return buf, nil
	}
	rc, err := sp.open()
	if err != nil {
		return nil, fmt.Errorf("%w: storage %q: %v", ErrFormat, st.key, err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, off); err != nil {
		return nil, fmt.Errorf("%w: storage %q: %v", ErrFormat, st.key, err)
	}
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("%w: storage %q: %v", ErrFormat, st.key, err)
	}
	return buf, nil
}
