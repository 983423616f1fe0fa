package pth

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"path"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
	"github.com/radgen/radgen"
)

// Errors returned by [Open] and [File.Float32]. They are wrapped with the
// detail; test for them with errors.Is.
var (
	// ErrFormat is returned for bytes that are not a PyTorch checkpoint or
	// contradict themselves (a tensor past the end of its storage, a
	// storage with no record, a malformed pickle).
	ErrFormat = errors.New("pth: malformed checkpoint")
	// ErrUnsupported is returned for checkpoints in a format this package
	// does not read: TorchScript archives and the legacy tar format.
	ErrUnsupported = errors.New("pth: unsupported checkpoint format")
	// ErrLimit is returned when a checkpoint exceeds a limit set by
	// [WithMaxBytes] or [WithMaxPickleBytes], or a fixed bound on the
	// pickle's shape; nothing beyond the limit has been allocated then.
	ErrLimit = errors.New("pth: checkpoint exceeds a limit")
)

// Defaults of the limits.
const (
	// DefaultMaxBytes bounds the float32 size of the state_dict's tensors
	// (4 GiB; R2Gen with a ResNet-101 needs about 0.4 GiB).
	DefaultMaxBytes = 4 << 30
	// DefaultMaxPickleBytes bounds the pickle that describes the
	// checkpoint (64 MiB; an R2Gen checkpoint with its optimizer state has
	// a pickle of a few hundred kilobytes).
	DefaultMaxPickleBytes = 64 << 20
	// maxDims bounds a tensor's rank.
	maxDims = 64
)

// Option configures [Open]. A bad value makes Open return an error.
type Option func(*options) error

type options struct {
	maxBytes, maxPickle int64
}

// WithMaxBytes bounds the total size, as float32, of the state_dict's
// tensors; a checkpoint declaring more is refused by Open before any tensor
// data is read. n must be positive; the default is [DefaultMaxBytes].
func WithMaxBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("pth: WithMaxBytes(%d): the limit must be positive", n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithMaxPickleBytes bounds the size of the checkpoint's pickle (the
// description of its objects, not the tensor data). n must be positive; the
// default is [DefaultMaxPickleBytes].
func WithMaxPickleBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("pth: WithMaxPickleBytes(%d): the limit must be positive", n)
		}
		o.maxPickle = n
		return nil
	}
}

// Info describes one tensor of the state_dict.
type Info struct {
	Dtype  Dtype
	Shape  []int
	Stride []int64 // in elements, as PyTorch reports it
	Offset int64   // storage offset, in elements
}

// Len returns the number of elements.
func (i Info) Len() int {
	n := 1
	for _, s := range i.Shape {
		n *= s
	}
	return n
}

// Contiguous reports whether the tensor is laid out row-major without gaps.
func (i Info) Contiguous() bool {
	want := int64(1)
	for d := len(i.Shape) - 1; d >= 0; d-- {
		if i.Shape[d] != 1 && i.Stride[d] != want {
			return false
		}
		want *= int64(i.Shape[d])
	}
	return true
}

// File is an open checkpoint: the tensors of its state_dict, read on demand,
// and its metadata. It is safe for concurrent use when the underlying
// io.ReaderAt is (an *os.File is).
type File struct {
	names     []string
	tensors   map[string]*tensorRef
	storages  map[*storageRef]span
	bigEndian bool
	keys      []string
	epoch     int64
	hasEpoch  bool
	best      float64
	hasBest   bool
}

// span locates a storage's bytes: stored ones are read from r at off;
// compressed ones through open.
type span struct {
	r    io.ReaderAt
	off  int64
	n    int64
	open func() (io.ReadCloser, error) // nil for stored data
}

// Open reads the structure of a PyTorch checkpoint of the given size: the
// zip format of torch.save (PyTorch ≥ 1.6) or the legacy non-tar format.
// Only the pickle is read; tensor data is read by [File.Float32].
//
// The state_dict is found as the checkpoint's "state_dict" entry (R2Gen's
// {'epoch', 'state_dict', 'optimizer', 'monitor_best'}), its "model" entry,
// or the checkpoint itself when it is a dictionary of tensors. Every tensor
// of the state_dict is checked against its storage, and its storage against
// the archive, before Open returns; tensors elsewhere (the optimizer's) are
// never read.
func Open(r io.ReaderAt, size int64, opts ...Option) (*File, error) {
	o := options{maxBytes: DefaultMaxBytes, maxPickle: DefaultMaxPickleBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var head [4]byte
	if size < int64(len(head)) {
		return nil, fmt.Errorf("%w: %d bytes", ErrFormat, size)
	}
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("pth: %w", err)
	}
	switch {
	case string(head[:]) == "PK\x03\x04":
		return openZip(r, size, o)
	case head[0] == 0x80:
		return openLegacy(r, size, o)
	}
	if size >= 512 && isTar(r) {
		return nil, fmt.Errorf("%w: legacy tar checkpoint (PyTorch < 0.4)", ErrUnsupported)
	}
	return nil, fmt.Errorf("%w: neither a zip nor a pickle", ErrFormat)
}

func isTar(r io.ReaderAt) bool {
	var b [5]byte
	_, err := r.ReadAt(b[:], 257)
	return err == nil && string(b[:]) == "ustar"
}

func openZip(r io.ReaderAt, size int64, o options) (*File, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	// torch.save writes <archive>/data.pkl, <archive>/data/<key> and,
	// since PyTorch 2.1, <archive>/byteorder.
	var pkl *zip.File
	records := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		records[f.Name] = f
		dir, base := path.Split(f.Name)
		if base == "constants.pkl" {
			return nil, fmt.Errorf("%w: TorchScript archive (save the state_dict with torch.save instead)", ErrUnsupported)
		}
		if base == "data.pkl" && strings.Count(dir, "/") <= 1 && (pkl == nil || len(f.Name) < len(pkl.Name)) {
			pkl = f
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("%w: zip without data.pkl", ErrFormat)
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	if pkl.UncompressedSize64 > uint64(o.maxPickle) {
		return nil, fmt.Errorf("%w: pickle of %d bytes, limit %d", ErrLimit, pkl.UncompressedSize64, o.maxPickle)
	}
	p, err := readRecord(pkl, int64(pkl.UncompressedSize64))
	if err != nil {
		return nil, err
	}
	f := &File{storages: map[*storageRef]span{}}
	if bo, ok := records[prefix+"byteorder"]; ok {
		b, err := readRecord(bo, 16)
		if err != nil {
			return nil, err
		}
		switch strings.TrimSpace(string(b)) {
		case "little":
		case "big":
			f.bigEndian = true
		default:
			return nil, fmt.Errorf("%w: byte order %q", ErrFormat, b)
		}
	}
	if end, err := scan(bytes.NewReader(p), 0, int64(len(p)), int64(len(p))); err != nil {
		return nil, err
	} else if end != int64(len(p)) {
		return nil, fmt.Errorf("%w: %d bytes after the pickle", ErrFormat, int64(len(p))-end)
	}
	refs := map[string]*storageRef{}
	v, err := unpickle(p, func(id any) (any, error) {
		ref, err := persistentStorage(id, refs)
		if err != nil {
			return nil, err
		}
		if _, ok := f.storages[ref]; !ok {
			rec, ok := records[prefix+"data/"+ref.key]
			if !ok {
				// Only an error if a state_dict tensor uses it (see resolve).
				return ref, nil
			}
			f.storages[ref] = zipSpan(r, size, rec)
		}
		return ref, nil
	})
	if err != nil {
		return nil, err
	}
	if err := f.resolve(v, o); err != nil {
		return nil, err
	}
	return f, nil
}

// zipSpan locates a record's bytes: stored records (what torch.save
// writes) are read in place, others through their decompressor.
func zipSpan(r io.ReaderAt, size int64, rec *zip.File) span {
	n := int64(rec.UncompressedSize64)
	if n < 0 {
		n = math.MaxInt64
	}
	if rec.Method == zip.Store {
		if off, err := rec.DataOffset(); err == nil && rec.CompressedSize64 == rec.UncompressedSize64 && off <= size {
			// A record claiming more than the file holds is cut to what
			// is there, so that check refuses tensors past the end.
			return span{r: r, off: off, n: min(n, size-off)}
		}
	}
	return span{n: n, open: rec.Open}
}

// readRecord reads a whole zip record of at most limit bytes, trusting
// neither its declared size nor its compressed stream.
func readRecord(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, f.Name, err)
	}
	defer rc.Close()
	want := int64(f.UncompressedSize64)
	if want < 0 || want > limit {
		want = limit
	}
	b := make([]byte, 0, want)
	buf := bytes.NewBuffer(b)
	if _, err := io.Copy(buf, io.LimitReader(rc, limit+1)); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, f.Name, err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("%w: %s exceeds %d bytes", ErrLimit, f.Name, limit)
	}
	return buf.Bytes(), nil
}

// persistentStorage decodes a zip-format persistent id
// ('storage', storage_type, key, location, numel).
func persistentStorage(id any, refs map[string]*storageRef) (*storageRef, error) {
	t, ok := id.(*types.Tuple)
	if !ok || t.Len() < 5 {
		return nil, fmt.Errorf("%w: persistent id %T", ErrFormat, id)
	}
	if s, _ := t.Get(0).(string); s != "storage" {
		return nil, fmt.Errorf("%w: persistent id of kind %v", ErrFormat, t.Get(0))
	}
	cls, ok := t.Get(1).(*storageClass)
	if !ok {
		return nil, fmt.Errorf("%w: storage of class %v", ErrFormat, t.Get(1))
	}
	key, ok := t.Get(2).(string)
	if !ok {
		return nil, fmt.Errorf("%w: storage key %v", ErrFormat, t.Get(2))
	}
	numel, err := asInt64(t.Get(4))
	if err != nil || numel < 0 {
		return nil, fmt.Errorf("%w: storage size %v", ErrFormat, t.Get(4))
	}
	if ref, ok := refs[key]; ok {
		if ref.dtype != cls.dtype || ref.numel != numel {
			return nil, fmt.Errorf("%w: storage %q declared twice differently", ErrFormat, key)
		}
		return ref, nil
	}
	ref := &storageRef{dtype: cls.dtype, key: key, numel: numel}
	refs[key] = ref
	return ref, nil
}

// resolve finds the state_dict and the metadata in the unpickled value and
// checks every tensor of the state_dict against its storage.
func (f *File) resolve(v any, o options) error {
	sd := v
	if top, ok := entries(v); ok {
		for _, e := range top {
			k, ok := e.Key.(string)
			if !ok {
				continue
			}
			f.keys = append(f.keys, k)
			switch k {
			case "state_dict":
				sd = e.Value
			case "model":
				if _, isTensor := e.Value.(*tensorRef); !isTensor {
					if _, ok := entries(e.Value); ok && sd == v {
						sd = e.Value
					}
				}
			case "epoch":
				if n, err := asInt64(e.Value); err == nil {
					f.epoch, f.hasEpoch = n, true
				}
			case "monitor_best":
				if x, ok := asFloat(e.Value); ok {
					f.best, f.hasBest = x, true
				}
			}
		}
	}
	items, ok := entries(sd)
	if !ok {
		return fmt.Errorf("%w: no state_dict (the checkpoint holds a %T)", ErrFormat, v)
	}
	f.tensors = make(map[string]*tensorRef, len(items))
	var total int64
	for _, e := range items {
		name, ok := e.Key.(string)
		if !ok {
			return fmt.Errorf("%w: state_dict key %v is not a string", ErrFormat, e.Key)
		}
		t, ok := e.Value.(*tensorRef)
		if !ok {
			if o, isOpaque := e.Value.(*Opaque); isOpaque && strings.HasPrefix(o.Name, "_rebuild") {
				// A tensor this package cannot rebuild (quantized, sparse,
				// a subclass): refuse rather than drop a weight silently.
				return fmt.Errorf("%w: tensor %q is rebuilt by %s.%s", ErrUnsupported, name, o.Module, o.Name)
			}
			continue // _extra_state and the like
		}
		if _, dup := f.tensors[name]; dup {
			return fmt.Errorf("%w: tensor %q twice", ErrFormat, name)
		}
		sp, ok := f.storages[t.storage]
		if !ok {
			return fmt.Errorf("%w: tensor %q: storage %q has no data record", ErrFormat, name, t.storage.key)
		}
		n, err := f.check(t, sp, o.maxBytes)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if total += 4 * n; total > o.maxBytes {
			return fmt.Errorf("%w: the state_dict needs over %d bytes as float32", ErrLimit, o.maxBytes)
		}
		f.tensors[name] = t
		f.names = append(f.names, name)
	}
	if len(f.names) == 0 {
		return fmt.Errorf("%w: no tensors in the state_dict", ErrFormat)
	}
	if sd == v {
		f.keys = nil // the checkpoint is the state_dict itself
	}
	return nil
}

// check verifies that t lies inside its storage and the storage inside its
// record, and returns t's element count. The bytes read to gather t (and,
// for a compressed record, the bytes decompressed to reach them) must not
// exceed maxBytes.
func (f *File) check(t *tensorRef, sp span, maxBytes int64) (int64, error) {
	st := t.storage
	es := int64(st.dtype.Size())
	if st.base > sp.n/es || st.numel > sp.n/es-st.base {
		return 0, fmt.Errorf("%w: storage %q declares %d elements of %d bytes at element %d, its record holds %d bytes",
			ErrFormat, st.key, st.numel, es, st.base, sp.n)
	}
	n := int64(1)
	for _, s := range t.shape {
		if s == 0 {
			return 0, nil
		}
		if n > math.MaxInt32/int64(s) {
			return 0, fmt.Errorf("%w: shape %v has over 2^31 elements", ErrLimit, t.shape)
		}
		n *= int64(s)
	}
	last, ok := lastIndex(t)
	if !ok || last >= t.storage.numel {
		return 0, fmt.Errorf("%w: shape %v, stride %v at offset %d overruns a storage of %d elements",
			ErrFormat, t.shape, t.stride, t.offset, t.storage.numel)
	}
	if (last-t.offset+1)*es > maxBytes || (sp.open != nil && (st.base+last+1)*es > maxBytes) {
		return 0, fmt.Errorf("%w: gathering shape %v with stride %v reads over %d bytes", ErrLimit, t.shape, t.stride, maxBytes)
	}
	return n, nil
}

// lastIndex returns the storage index of t's last element, or false on
// overflow. t has no empty dimension.
func lastIndex(t *tensorRef) (int64, bool) {
	last := t.offset
	for d, s := range t.shape {
		st := t.stride[d]
		if st != 0 && int64(s-1) > (math.MaxInt64-last)/st {
			return 0, false
		}
		last += int64(s-1) * st
	}
	return last, true
}

// entries returns the items of a dict or OrderedDict.
func entries(v any) ([]types.DictEntry, bool) {
	switch d := v.(type) {
	case *types.Dict:
		return *d, true
	case *types.OrderedDict:
		out := make([]types.DictEntry, 0, d.Len())
		for e := d.List.Front(); e != nil; e = e.Next() {
			oe := e.Value.(*types.OrderedDictEntry)
			out = append(out, types.DictEntry{Key: oe.Key, Value: oe.Value})
		}
		return out, true
	}
	return nil, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	}
	return 0, false
}

// Names returns the names of the state_dict's tensors in the checkpoint's
// order.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Shape returns the shape of the tensor name without reading it, and
// whether it exists.
func (f *File) Shape(name string) ([]int, bool) {
	info, ok := f.Info(name)
	return info.Shape, ok
}

func (f *File) Info(name string) (Info, bool) {
	t, ok := f.tensors[name]
	if !ok {
		return Info{}, false
	}
	return Info{
		Dtype:  t.storage.dtype,
		Shape:  append([]int(nil), t.shape...),
		Stride: append([]int64(nil), t.stride...),
		Offset: t.offset,
	}, true
}

// Keys returns the top-level keys of the checkpoint when it is a
// dictionary ("epoch", "state_dict", "optimizer", "monitor_best" for R2Gen).
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Epoch returns the checkpoint's "epoch" entry, if it holds an integer.
func (f *File) Epoch() (int64, bool) { return f.epoch, f.hasEpoch }

// MonitorBest returns the checkpoint's "monitor_best" entry (R2Gen: the
// best validation score so far), if it holds a number — a Python float or
// a numpy scalar.
func (f *File) MonitorBest() (float64, bool) { return f.best, f.hasBest }

// Float32 returns the named tensor as float32 in row-major order with its
// shape, converting from its stored dtype (float16, bfloat16 and float64
// round to nearest; integers convert exactly up to 2^24) and gathering
// non-contiguous views by their strides. The error wraps
// radgen.ErrMissingTensor for an unknown name.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("pth: %w: %q", radgen.ErrMissingTensor, name)
	}
	out, err := f.materialize(t)
	if err != nil {
		return nil, nil, fmt.Errorf("pth: tensor %q: %w", name, err)
	}
	return out, append([]int(nil), t.shape...), nil
}
