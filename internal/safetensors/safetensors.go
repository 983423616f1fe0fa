// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header mapping tensor names to
// {dtype, shape, data_offsets} (plus an optional "__metadata__" map of
// strings), then the raw little-endian tensor bytes.
//
// The reader works over an io.ReaderAt and checks every length and offset
// against the file size before it allocates, so a truncated or hostile file
// yields an error, never a panic or a huge allocation.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// MaxHeaderBytes bounds the JSON header a Reader accepts.
const MaxHeaderBytes = 100 << 20

// ErrFormat is wrapped by every error about malformed file contents.
var ErrFormat = errors.New("safetensors: malformed file")

// ErrNotFound is returned when a named tensor is absent.
var ErrNotFound = errors.New("safetensors: tensor not found")

// Dtype is a safetensors element type name such as "F32".
type Dtype string

// Element types understood by this package.
const (
	F64  Dtype = "F64"
	F32  Dtype = "F32"
	F16  Dtype = "F16"
	BF16 Dtype = "BF16"
	I64  Dtype = "I64"
	I32  Dtype = "I32"
	I16  Dtype = "I16"
	I8   Dtype = "I8"
	U8   Dtype = "U8"
	Bool Dtype = "BOOL"
)

// Size returns the bytes per element, or 0 for an unknown type.
func (d Dtype) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// Info describes one tensor of a file.
type Info struct {
	Name  string
	Dtype Dtype
	Shape []int
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// Len returns the number of elements.
func (i Info) Len() int {
	n := 1
	for _, s := range i.Shape {
		n *= s
	}
	return n
}

// File is an open safetensors file. It is safe for concurrent use.
type File struct {
	r        io.ReaderAt
	closer   io.Closer // set by OpenFile
	dataOff  int64
	tensors  map[string]Info
	names    []string
	metadata map[string]string
}

type rawInfo struct {
	Dtype       Dtype   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Open parses the header of a safetensors file of the given size.
func Open(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a header", ErrFormat, size)
	}
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading header length: %w", err)
	}
	hl := binary.LittleEndian.Uint64(lb[:])
	if hl > MaxHeaderBytes || int64(hl) > size-8 {
		return nil, fmt.Errorf("%w: header length %d exceeds file size %d or limit", ErrFormat, hl, size)
	}
	hdr := make([]byte, hl)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: reading header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("%w: header JSON: %v", ErrFormat, err)
	}
	f := &File{r: r, dataOff: 8 + int64(hl), tensors: make(map[string]Info, len(raw))}
	dataSize := size - f.dataOff
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__ must map strings to strings: %v", ErrFormat, err)
			}
			continue
		}
		var ri rawInfo
		if err := json.Unmarshal(msg, &ri); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrFormat, name, err)
		}
		info, err := checkInfo(name, ri, dataSize)
		if err != nil {
			return nil, err
		}
		f.tensors[name] = info
		f.names = append(f.names, name)
	}
	sort.Strings(f.names)
	return f, nil
}

func checkInfo(name string, ri rawInfo, dataSize int64) (Info, error) {
	es := ri.Dtype.Size()
	if es == 0 {
		return Info{}, fmt.Errorf("%w: tensor %q has unknown dtype %q", ErrFormat, name, ri.Dtype)
	}
	if len(ri.DataOffsets) != 2 {
		return Info{}, fmt.Errorf("%w: tensor %q needs two data offsets", ErrFormat, name)
	}
	if len(ri.Shape) > 16 {
		return Info{}, fmt.Errorf("%w: tensor %q has %d dimensions", ErrFormat, name, len(ri.Shape))
	}
	n := int64(1)
	shape := make([]int, len(ri.Shape))
	for i, s := range ri.Shape {
		if s < 0 || (s > 0 && n > math.MaxInt64/8/s) {
			return Info{}, fmt.Errorf("%w: tensor %q has bad shape %v", ErrFormat, name, ri.Shape)
		}
		n *= s
		shape[i] = int(s)
	}
	b, e := ri.DataOffsets[0], ri.DataOffsets[1]
	if b < 0 || e < b || e > dataSize {
		return Info{}, fmt.Errorf("%w: tensor %q offsets [%d,%d) outside the %d data bytes", ErrFormat, name, b, e, dataSize)
	}
	if e-b != n*int64(es) {
		return Info{}, fmt.Errorf("%w: tensor %q: %d bytes for shape %v of %s", ErrFormat, name, e-b, shape, ri.Dtype)
	}
	return Info{Name: name, Dtype: ri.Dtype, Shape: shape, Begin: b, End: e}, nil
}

// OpenFile opens the safetensors file at path; Close releases it.
func OpenFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return OpenOwned(fh)
}

// OpenOwned reads the safetensors file fh, opened by the caller, which it
// owns from then on: Close closes fh, and fh is closed on error.
func OpenOwned(fh *os.File) (*File, error) {
	path := fh.Name()
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := Open(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.closer = fh
	return f, nil
}

// Close releases the file opened by OpenFile or OpenOwned; for a File made by Open it
// does nothing (the caller owns the reader).
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Metadata returns the "__metadata__" map (nil if absent).
func (f *File) Metadata() map[string]string { return f.metadata }

// Shape returns the shape of the tensor name without reading it, and
// whether it exists.
func (f *File) Shape(name string) ([]int, bool) {
	info, ok := f.Info(name)
	return info.Shape, ok
}

func (f *File) Info(name string) (Info, bool) {
	i, ok := f.tensors[name]
	return i, ok
}

// Bytes returns a tensor's raw bytes.
func (f *File) Bytes(name string) (Info, []byte, error) {
	info, ok := f.tensors[name]
	if !ok {
		return Info{}, nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	buf := make([]byte, info.End-info.Begin)
	if _, err := f.r.ReadAt(buf, f.dataOff+info.Begin); err != nil {
		return Info{}, nil, fmt.Errorf("safetensors: reading %q: %w", name, err)
	}
	return info, buf, nil
}

// Float32 returns a tensor converted to float32 (from F32, F64, F16, BF16 or
// an integer type) with its shape.
func (f *File) Float32(name string) ([]float32, []int, error) {
	info, b, err := f.Bytes(name)
	if err != nil {
		return nil, nil, err
	}
	n := info.Len()
	out := make([]float32, n)
	le := binary.LittleEndian
	es := info.Dtype.Size()
	for i := range out {
		p := b[i*es:]
		switch info.Dtype {
		case F32:
			out[i] = math.Float32frombits(le.Uint32(p))
		case F64:
			out[i] = float32(math.Float64frombits(le.Uint64(p)))
		case F16:
			out[i] = halfToFloat(le.Uint16(p))
		case BF16:
			out[i] = math.Float32frombits(uint32(le.Uint16(p)) << 16)
		case I64:
			out[i] = float32(int64(le.Uint64(p)))
		case I32:
			out[i] = float32(int32(le.Uint32(p)))
		case I16:
			out[i] = float32(int16(le.Uint16(p)))
		case I8:
			out[i] = float32(int8(p[0]))
		case U8, Bool:
			out[i] = float32(p[0])
		}
	}
	return out, info.Shape, nil
}

// Int64 returns an integer tensor (I64, I32, I16, I8, U8, BOOL) as int64s.
func (f *File) Int64(name string) ([]int64, []int, error) {
	info, b, err := f.Bytes(name)
	if err != nil {
		return nil, nil, err
	}
	le := binary.LittleEndian
	out := make([]int64, info.Len())
	es := info.Dtype.Size()
	for i := range out {
		p := b[i*es:]
		switch info.Dtype {
		case I64:
			out[i] = int64(le.Uint64(p))
		case I32:
			out[i] = int64(int32(le.Uint32(p)))
		case I16:
			out[i] = int64(int16(le.Uint16(p)))
		case I8:
			out[i] = int64(int8(p[0]))
		case U8, Bool:
			out[i] = int64(p[0])
		default:
			return nil, nil, fmt.Errorf("safetensors: tensor %q is %s, not an integer type", name, info.Dtype)
		}
	}
	return out, info.Shape, nil
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(frac) / 1024 / 16384
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
