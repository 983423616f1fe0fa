package pth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/big"

	"github.com/nlpodyssey/gopickle/types"
)

// The legacy format (torch.save with _use_new_zipfile_serialization=False,
// and every PyTorch before 1.6) is five pickles in a row — the magic number,
// the protocol version, a sys_info dict, the object, the list of storage
// keys — followed by each storage's data: its element count as a
// little-endian int64, then its bytes.

// legacyMagic is torch.serialization's MAGIC_NUMBER.
var legacyMagic, _ = new(big.Int).SetString("1950a86a20f9469cfc6c", 16)

const legacyProtocol = 1001

func openLegacy(r io.ReaderAt, size int64, o options) (*File, error) {
	off := int64(0)
	budget := o.maxPickle
	// next scans and reads the pickle at off.
	next := func() ([]byte, error) {
		end, err := scan(r, off, size, budget)
		if err != nil {
			return nil, err
		}
		p := make([]byte, end-off)
		if _, err := r.ReadAt(p, off); err != nil {
			return nil, fmt.Errorf("pth: %w", err)
		}
		budget -= end - off
		off = end
		return p, nil
	}
	plain := func() (any, error) {
		p, err := next()
		if err != nil {
			return nil, err
		}
		return unpickle(p, nil)
	}
	magic, err := plain()
	if err != nil {
		return nil, err
	}
	if m, ok := magic.(*big.Int); !ok || m.Cmp(legacyMagic) != 0 {
		return nil, fmt.Errorf("%w: a pickle, not a PyTorch checkpoint (magic %v)", ErrFormat, magic)
	}
	if proto, err := plain(); err != nil {
		return nil, err
	} else if n, err := asInt64(proto); err != nil || n != legacyProtocol {
		return nil, fmt.Errorf("%w: legacy protocol version %v", ErrUnsupported, proto)
	}
	if _, err := plain(); err != nil { // sys_info: byte order, type sizes
		return nil, err
	}
	p, err := next()
	if err != nil {
		return nil, err
	}
	refs := map[string]*storageRef{}
	roots := map[string]Dtype{}
	v, err := unpickle(p, func(id any) (any, error) { return legacyStorage(id, refs, roots) })
	if err != nil {
		return nil, err
	}
	keysV, err := plain()
	if err != nil {
		return nil, err
	}
	keyList, ok := keysV.(*types.List)
	if !ok {
		return nil, fmt.Errorf("%w: storage key list is a %T", ErrFormat, keysV)
	}
	// Walk the data section: each record is its count, then its bytes.
	rootSpans := map[string]span{}
	for _, k := range *keyList {
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("%w: storage key %v", ErrFormat, k)
		}
		dt, ok := roots[key]
		if !ok {
			return nil, fmt.Errorf("%w: data for storage %q, which no object uses", ErrFormat, key)
		}
		if _, dup := rootSpans[key]; dup {
			return nil, fmt.Errorf("%w: storage %q listed twice", ErrFormat, key)
		}
		var nb [8]byte
		if off+8 > size {
			return nil, fmt.Errorf("%w: data of storage %q missing", ErrFormat, key)
		}
		if _, err := r.ReadAt(nb[:], off); err != nil {
			return nil, fmt.Errorf("pth: %w", err)
		}
		count := binary.LittleEndian.Uint64(nb[:])
		es := uint64(dt.Size())
		avail := uint64(size - off - 8)
		if count > avail/es {
			return nil, fmt.Errorf("%w: storage %q of %d elements overruns the file", ErrFormat, key, count)
		}
		rootSpans[key] = span{r: r, off: off + 8, n: int64(count * es)}
		off += 8 + int64(count*es)
	}
	f := &File{storages: map[*storageRef]span{}}
	for _, ref := range refs {
		if sp, ok := rootSpans[ref.key]; ok {
			f.storages[ref] = sp
		}
	}
	if err := f.resolve(v, o); err != nil {
		return nil, err
	}
	return f, nil
}

// legacyStorage decodes a legacy persistent id: ('storage', storage_type,
// root_key, location, numel, view_metadata), where view_metadata is None or
// (view_key, offset, view_size). ('module', ...) ids (whole pickled
// modules) become opaque.
func legacyStorage(id any, refs map[string]*storageRef, roots map[string]Dtype) (any, error) {
	t, ok := id.(*types.Tuple)
	if !ok || t.Len() < 1 {
		return nil, fmt.Errorf("%w: persistent id %T", ErrFormat, id)
	}
	if s, _ := t.Get(0).(string); s == "module" {
		return &Opaque{Module: "torch.serialization", Name: "module", Args: *t}, nil
	}
	if t.Len() < 6 {
		return nil, fmt.Errorf("%w: legacy persistent id of %d items", ErrFormat, t.Len())
	}
	root, err := persistentStorage(types.NewTupleFromSlice((*t)[:5]), refs)
	if err != nil {
		return nil, err
	}
	if dt, ok := roots[root.key]; ok && dt != root.dtype {
		return nil, fmt.Errorf("%w: storage %q of two dtypes", ErrFormat, root.key)
	}
	roots[root.key] = root.dtype
	view, ok := t.Get(5).(*types.Tuple)
	if t.Get(5) == nil {
		return root, nil
	}
	if !ok || view.Len() != 3 {
		return nil, fmt.Errorf("%w: storage view %v", ErrFormat, t.Get(5))
	}
	vkey, ok := view.Get(0).(string)
	voff, err1 := asInt64(view.Get(1))
	vsize, err2 := asInt64(view.Get(2))
	if !ok || err1 != nil || err2 != nil || voff < 0 || vsize < 0 || voff > root.numel || vsize > root.numel-voff {
		return nil, fmt.Errorf("%w: storage view %v of a storage of %d elements", ErrFormat, t.Get(5), root.numel)
	}
	vk := root.key + "\x00view\x00" + vkey
	if ref, ok := refs[vk]; ok {
		return ref, nil
	}
	ref := &storageRef{dtype: root.dtype, key: root.key, numel: vsize, base: voff}
	refs[vk] = ref
	return ref, nil
}
