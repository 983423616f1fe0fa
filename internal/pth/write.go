package pth

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Tensor is one entry of a state_dict to write: float32 data, row-major in
// Shape.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Meta is the training state R2Gen stores beside its state_dict.
type Meta struct {
	Epoch       int64
	MonitorBest float64
}

// Write writes tensors as a PyTorch checkpoint in the zip format of
// torch.save (pickle protocol 2, stored records, little-endian), which
// torch.load reads. With meta nil the checkpoint is the state_dict itself,
// an OrderedDict (torch.save(model.state_dict())); otherwise it is R2Gen's
// {'epoch', 'state_dict', 'monitor_best'} without the optimizer state.
func Write(w io.Writer, tensors []Tensor, meta *Meta) error {
	b := newBuilder()
	sd := make([]builtTensor, len(tensors))
	for i, t := range tensors {
		n := 1
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("pth: tensor %q: shape %v", t.Name, t.Shape)
			}
			n *= s
		}
		if n != len(t.Data) {
			return fmt.Errorf("pth: tensor %q: shape %v holds %d values, data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		raw := make([]byte, 4*n)
		for j, v := range t.Data {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(v))
		}
		st := b.storage(Float32, raw)
		sd[i] = builtTensor{name: t.Name, storage: st, shape: t.Shape, stride: contiguousStrides(t.Shape)}
	}
	p := &b.p
	p.proto()
	if meta != nil {
		p.op('}')
		p.op('(')
		p.str("epoch")
		p.int(meta.Epoch)
		p.str("state_dict")
	}
	b.stateDict(sd)
	if meta != nil {
		p.str("monitor_best")
		p.float(meta.MonitorBest)
		p.op('u') // SETITEMS
	}
	p.op('.')
	return b.writeZip(w, "archive")
}

func contiguousStrides(shape []int) []int64 {
	st := make([]int64, len(shape))
	acc := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= int64(shape[d])
	}
	return st
}

// builder assembles a checkpoint: a pickle and the storages it names.
type builder struct {
	p        pickler
	storages []builtStorage
}

type builtStorage struct {
	key   string
	dtype Dtype
	data  []byte // little-endian
}

type builtTensor struct {
	name    string
	storage int
	offset  int64
	shape   []int
	stride  []int64
}

func newBuilder() *builder { return &builder{} }

// storage adds a storage of raw little-endian bytes and returns its index.
func (b *builder) storage(dt Dtype, raw []byte) int {
	b.storages = append(b.storages, builtStorage{key: strconv.Itoa(len(b.storages)), dtype: dt, data: raw})
	return len(b.storages) - 1
}

var storageClassNames = map[Dtype]string{
	Float32: "FloatStorage", Float16: "HalfStorage", BFloat16: "BFloat16Storage", Float64: "DoubleStorage",
	Int64: "LongStorage", Int32: "IntStorage", Int16: "ShortStorage", Int8: "CharStorage",
	Uint8: "ByteStorage", Bool: "BoolStorage",
}

// tensor emits torch._utils._rebuild_tensor_v2(storage, offset, size,
// stride, False, OrderedDict()).
func (b *builder) tensor(t builtTensor) {
	p := &b.p
	st := b.storages[t.storage]
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op('(')
	p.op('(')
	p.str("storage")
	p.global("torch", storageClassNames[st.dtype])
	p.str(st.key)
	p.str("cpu")
	p.int(int64(len(st.data) / st.dtype.Size()))
	p.op('t')
	p.op('Q') // BINPERSID
	p.int(t.offset)
	p.op('(')
	for _, s := range t.shape {
		p.int(int64(s))
	}
	p.op('t')
	p.op('(')
	for _, s := range t.stride {
		p.int(s)
	}
	p.op('t')
	p.op(0x89) // NEWFALSE: requires_grad
	p.orderedDict()
	p.op('t')
	p.op('R')
}

// stateDict emits an OrderedDict of the tensors.
func (b *builder) stateDict(ts []builtTensor) {
	p := &b.p
	p.orderedDict()
	if len(ts) == 0 {
		return
	}
	p.op('(')
	for _, t := range ts {
		p.str(t.name)
		b.tensor(t)
	}
	p.op('u')
}

// writeZip writes the archive torch.save writes: the pickle, the byte
// order, each storage as a stored record, and the format version.
func (b *builder) writeZip(w io.Writer, prefix string) error {
	zw := zip.NewWriter(w)
	put := func(name string, data []byte) error {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: prefix + "/" + name, Method: zip.Store})
		if err != nil {
			return err
		}
		_, err = fw.Write(data)
		return err
	}
	if err := put("data.pkl", b.p.buf.Bytes()); err != nil {
		return fmt.Errorf("pth: writing: %w", err)
	}
	if err := put("byteorder", []byte("little")); err != nil {
		return fmt.Errorf("pth: writing: %w", err)
	}
	for _, s := range b.storages {
		if err := put("data/"+s.key, s.data); err != nil {
			return fmt.Errorf("pth: writing: %w", err)
		}
	}
	if err := put("version", []byte("3\n")); err != nil {
		return fmt.Errorf("pth: writing: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("pth: writing: %w", err)
	}
	return nil
}

// pickler emits protocol-2 pickle opcodes.
type pickler struct{ buf bytes.Buffer }

func (p *pickler) op(c byte) { p.buf.WriteByte(c) }

func (p *pickler) proto() { p.buf.Write([]byte{0x80, 2}) }

func (p *pickler) str(s string) {
	p.op('X') // BINUNICODE
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
	p.buf.Write(n[:])
	p.buf.WriteString(s)
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		p.buf.Write([]byte{'K', byte(v)})
	case v >= 0 && v < 1<<16:
		p.buf.Write([]byte{'M', byte(v), byte(v >> 8)})
	case v >= math.MinInt32 && v <= math.MaxInt32:
		var b [5]byte
		b[0] = 'J'
		binary.LittleEndian.PutUint32(b[1:], uint32(int32(v)))
		p.buf.Write(b[:])
	default: // LONG1: 8 bytes two's complement, little-endian
		var b [10]byte
		b[0], b[1] = 0x8a, 8
		binary.LittleEndian.PutUint64(b[2:], uint64(v))
		p.buf.Write(b[:])
	}
}

func (p *pickler) float(v float64) {
	var b [9]byte
	b[0] = 'G'
	binary.BigEndian.PutUint64(b[1:], math.Float64bits(v))
	p.buf.Write(b[:])
}

func (p *pickler) global(module, name string) {
	p.op('c')
	p.buf.WriteString(module + "\n" + name + "\n")
}

// orderedDict emits collections.OrderedDict().
func (p *pickler) orderedDict() {
	p.global("collections", "OrderedDict")
	p.op(')')
	p.op('R')
}
