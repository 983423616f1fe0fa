package pth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// The Python classes a checkpoint names are resolved here. Tensors and
// storages become descriptors (nothing is read until a tensor is asked for);
// numpy scalars become float64 or int64; every other class becomes an
// [Opaque] value, so an optimizer state, an argparse.Namespace or a
// scheduler in the checkpoint never stops the weights from loading.

// storageClass is torch.FloatStorage and its siblings.
type storageClass struct{ dtype Dtype }

// storageRef is a storage named by a persistent id: its data is the archive
// record key (zip) or the bytes at a file offset (legacy format).
type storageRef struct {
	dtype Dtype
	key   string
	numel int64
	base  int64 // first element in the record (legacy storage views)
}

// tensorRef is a tensor rebuilt by torch._utils._rebuild_tensor_v2: a view
// of a storage.
type tensorRef struct {
	storage *storageRef
	offset  int64
	shape   []int
	stride  []int64
}

// Opaque stands for an object of a class this package does not model: its
// module and name, the arguments it was built with and the state given to
// it, kept only so that the rest of the checkpoint can be read.
type Opaque struct {
	Module, Name string
	Args         []any
	State        any
}

// PySetState implements gopickle's types.PyStateSettable.
func (o *Opaque) PySetState(state any) error { o.State = state; return nil }

type opaqueClass struct{ module, name string }

func (c *opaqueClass) Call(args ...any) (any, error) {
	return &Opaque{Module: c.module, Name: c.name, Args: args}, nil
}

func (c *opaqueClass) PyNew(args ...any) (any, error) { return c.Call(args...) }

// callFunc adapts a Go function to gopickle's types.Callable.
type callFunc func(args ...any) (any, error)

func (f callFunc) Call(args ...any) (any, error) { return f(args...) }

var storageDtypes = map[string]Dtype{
	"FloatStorage":    Float32,
	"HalfStorage":     Float16,
	"BFloat16Storage": BFloat16,
	"DoubleStorage":   Float64,
	"LongStorage":     Int64,
	"IntStorage":      Int32,
	"ShortStorage":    Int16,
	"CharStorage":     Int8,
	"ByteStorage":     Uint8,
	"BoolStorage":     Bool,
	"UntypedStorage":  Uint8,
}

// findClass resolves the GLOBAL and STACK_GLOBAL opcodes (gopickle has
// already handled collections.OrderedDict and the builtin containers).
func findClass(module, name string) (any, error) {
	switch module {
	case "torch":
		if dt, ok := storageDtypes[name]; ok {
			return &storageClass{dt}, nil
		}
	case "torch._utils":
		switch name {
		case "_rebuild_tensor_v2", "_rebuild_tensor":
			return callFunc(rebuildTensor), nil
		case "_rebuild_parameter", "_rebuild_parameter_with_state":
			return callFunc(rebuildParameter), nil
		}
	case "_codecs":
		if name == "encode" {
			return callFunc(codecsEncode), nil
		}
	case "numpy.core.multiarray", "numpy._core.multiarray":
		if name == "scalar" {
			return callFunc(numpyScalar), nil
		}
	case "numpy":
		if name == "dtype" {
			return callFunc(newNumpyDtype), nil
		}
	}
	return &opaqueClass{module, name}, nil
}

// rebuildTensor is torch._utils._rebuild_tensor_v2(storage, storage_offset,
// size, stride, requires_grad, backward_hooks[, metadata]) and the older
// _rebuild_tensor(storage, storage_offset, size, stride).
func rebuildTensor(args ...any) (any, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("%w: _rebuild_tensor with %d arguments", ErrFormat, len(args))
	}
	st, ok := args[0].(*storageRef)
	if !ok {
		return nil, fmt.Errorf("%w: tensor over a %T, not a storage", ErrFormat, args[0])
	}
	off, err := asInt64(args[1])
	if err != nil || off < 0 {
		return nil, fmt.Errorf("%w: storage offset %v", ErrFormat, args[1])
	}
	size, err := intTuple(args[2])
	if err != nil {
		return nil, fmt.Errorf("%w: tensor size: %v", ErrFormat, err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, fmt.Errorf("%w: tensor stride: %v", ErrFormat, err)
	}
	if len(size) != len(stride) {
		return nil, fmt.Errorf("%w: tensor of %d dimensions with %d strides", ErrFormat, len(size), len(stride))
	}
	t := &tensorRef{storage: st, offset: off, shape: make([]int, len(size)), stride: stride}
	for i, s := range size {
		if s < 0 || s > math.MaxInt32 {
			return nil, fmt.Errorf("%w: tensor size %v", ErrFormat, size)
		}
		t.shape[i] = int(s)
	}
	for _, s := range stride {
		if s < 0 {
			return nil, fmt.Errorf("%w: negative stride %v", ErrFormat, stride)
		}
	}
	return t, nil
}

// rebuildParameter is torch._utils._rebuild_parameter(data, requires_grad,
// backward_hooks): a Parameter is its data here.
func rebuildParameter(args ...any) (any, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("%w: _rebuild_parameter without data", ErrFormat)
	}
	return args[0], nil
}

// codecsEncode is _codecs.encode(str, "latin1"), which protocol-2 pickles
// use for Python 3 bytes (numpy scalars in particular).
func codecsEncode(args ...any) (any, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("%w: _codecs.encode without arguments", ErrFormat)
	}
	s, ok := args[0].(string)
	if !ok {
		return &Opaque{Module: "_codecs", Name: "encode", Args: args}, nil
	}
	enc := "utf-8"
	if len(args) > 1 {
		if e, ok := args[1].(string); ok {
			enc = e
		}
	}
	switch enc {
	case "latin1", "latin-1", "iso-8859-1", "iso8859-1":
		b := make([]byte, 0, len(s))
		for _, r := range s {
			if r > 0xff {
				return nil, fmt.Errorf("%w: _codecs.encode: %U is not latin-1", ErrFormat, r)
			}
			b = append(b, byte(r))
		}
		return b, nil
	case "utf-8", "utf8":
		return []byte(s), nil
	}
	return &Opaque{Module: "_codecs", Name: "encode", Args: args}, nil
}

// numpyDtype is numpy.dtype(str, align, copy) with its byte order from
// the BUILD state (version, byteorder, ...).
type numpyDtype struct {
	kind  string // "f8", "i4", ...
	order byte   // '<', '>', '|' or '='
}

func newNumpyDtype(args ...any) (any, error) {
	d := &numpyDtype{order: '<'}
	if len(args) > 0 {
		d.kind, _ = args[0].(string)
	}
	return d, nil
}

func (d *numpyDtype) PySetState(state any) error {
	if t, ok := state.(*types.Tuple); ok && t.Len() > 1 {
		if s, ok := t.Get(1).(string); ok && len(s) == 1 {
			d.order = s[0]
		}
	}
	return nil
}

// numpyScalar is numpy.core.multiarray.scalar(dtype, bytes): numbers come
// back as float64 (floating kinds) or int64 (integer and boolean kinds);
// anything else stays opaque.
func numpyScalar(args ...any) (any, error) {
	opaque := &Opaque{Module: "numpy.core.multiarray", Name: "scalar", Args: args}
	if len(args) < 2 {
		return opaque, nil
	}
	d, ok := args[0].(*numpyDtype)
	if !ok {
		return opaque, nil
	}
	var b []byte
	switch v := args[1].(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return opaque, nil
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if d.order == '>' {
		bo = binary.BigEndian
	}
	switch {
	case d.kind == "f8" && len(b) == 8:
		return math.Float64frombits(bo.Uint64(b)), nil
	case d.kind == "f4" && len(b) == 4:
		return float64(math.Float32frombits(bo.Uint32(b))), nil
	case d.kind == "f2" && len(b) == 2:
		return float64(halfToFloat32(bo.Uint16(b))), nil
	case d.kind == "i8" && len(b) == 8:
		return int64(bo.Uint64(b)), nil
	case d.kind == "u8" && len(b) == 8:
		return bo.Uint64(b), nil
	case d.kind == "i4" && len(b) == 4:
		return int64(int32(bo.Uint32(b))), nil
	case d.kind == "u4" && len(b) == 4:
		return int64(bo.Uint32(b)), nil
	case d.kind == "i2" && len(b) == 2:
		return int64(int16(bo.Uint16(b))), nil
	case d.kind == "u2" && len(b) == 2:
		return int64(bo.Uint16(b)), nil
	case (d.kind == "i1") && len(b) == 1:
		return int64(int8(b[0])), nil
	case (d.kind == "u1" || d.kind == "b1") && len(b) == 1:
		return int64(b[0]), nil
	}
	return opaque, nil
}

func asInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), nil
		}
	}
	return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
}

func intTuple(v any) ([]int64, error) {
	var items []any
	switch x := v.(type) {
	case *types.Tuple:
		items = *x
	case *types.List:
		items = *x
	default:
		// torch.Size pickles as a tuple; anything else is not a size.
		return nil, fmt.Errorf("%T is not a tuple", v)
	}
	if len(items) > maxDims {
		return nil, fmt.Errorf("%d dimensions, at most %d", len(items), maxDims)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, err := asInt64(it)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// unpickle runs gopickle over the scanned pickle p. persistent resolves
// BINPERSID ids. A panic inside gopickle on hostile input (it has a few
// unchecked type assertions and hashes unhashable keys) becomes an error.
func unpickle(p []byte, persistent func(any) (any, error)) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: malformed pickle: %v", ErrFormat, r)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(p))
	u.FindClass = findClass
	u.PersistentLoad = persistent
	v, err = u.Load()
	if err != nil {
		return nil, fmt.Errorf("%w: pickle: %v", ErrFormat, err)
	}
	return v, nil
}
