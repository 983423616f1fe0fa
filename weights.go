package radgen

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/radgen/radgen/internal/atomicfile"
	"github.com/radgen/radgen/internal/boundedio"
	"github.com/radgen/radgen/internal/safetensors"
)

// Weights files are safetensors files (an 8-byte header length, a JSON
// header of names, dtypes, shapes and offsets with an optional
// "__metadata__" map of strings, then the raw little-endian data), the
// format PyTorch, JAX and candle exchange weights in. Any Module's
// parameters and buffers are written under the names its VisitParams gives,
// as float32, and read back into a module of the same architecture.

// ErrWeights is wrapped by every error about a malformed weights file.
var ErrWeights = safetensors.ErrFormat

// SaveWeights writes every parameter and buffer of m, by the names
// VisitParams gives them, as float32 tensors of a safetensors file, with
// metadata (nil for none) in its header. Tensors on a device are copied to
// the host first; float64 tensors are narrowed. Two tensors of one name are
// an error.
func SaveWeights(w io.Writer, m Module, metadata map[string]string) error {
	var tensors []safetensors.Tensor
	seen := map[string]bool{}
	var dup string
	m.VisitParams(func(name string, t *Tensor) {
		if seen[name] && dup == "" {
			dup = name
		}
		seen[name] = true
		v := t
		if v.Is64() || v.IsHalf() {
			v = v.To32()
		}
		if v.Device() != CPU {
			v = v.To(CPU)
		}
		tensors = append(tensors, safetensors.Tensor{Name: name, Dtype: safetensors.F32, Shape: slices.Clone(t.Shape()), Data: safetensors.F32Bytes(v.Data())})
	})
	if dup != "" {
		return fmt.Errorf("radgen: two tensors named %q", dup)
	}
	return safetensors.Write(w, tensors, metadata)
}

// SaveWeightsFile writes m's weights (see SaveWeights) to path atomically:
// a temporary file in the same directory, fsync, then a rename, so that a
// reader never sees a half-written file.
func SaveWeightsFile(path string, m Module, metadata map[string]string) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return SaveWeights(w, m, metadata) })
}

// Weights is an open safetensors file: tensors by name and the header's
// metadata. Every length and offset in the header is checked against the
// file's size before anything is allocated, the header itself is bounded
// (100 MiB), and a tensor is read only when asked for, so a hostile file
// costs at most what its own size declares. It implements TensorSource and
// is safe for concurrent use.
type Weights struct {
	f *safetensors.File
}

// OpenWeights opens a safetensors file of size bytes read through r.
func OpenWeights(r io.ReaderAt, size int64) (*Weights, error) {
	f, err := safetensors.Open(r, size)
	if err != nil {
		return nil, err
	}
	return &Weights{f: f}, nil
}

// OpenWeightsFile opens the safetensors file at path, which must be a
// regular file (a FIFO or device is refused); Close releases it.
func OpenWeightsFile(path string) (*Weights, error) {
	fh, err := boundedio.Open(path, false)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.OpenOwned(fh)
	if err != nil {
		return nil, err
	}
	return &Weights{f: f}, nil
}

// Close releases a file opened by OpenWeightsFile; for one opened by
// OpenWeights it does nothing (the caller owns the reader).
func (w *Weights) Close() error { return w.f.Close() }

// Names returns the tensors' names, sorted.
func (w *Weights) Names() []string { return w.f.Names() }

// Metadata returns a copy of the header's metadata.
func (w *Weights) Metadata() map[string]string { return maps.Clone(w.f.Metadata()) }

// Shape returns the shape of the tensor name, and whether it exists.
func (w *Weights) Shape(name string) ([]int, bool) {
	info, ok := w.f.Info(name)
	return slices.Clone(info.Shape), ok
}

// Float32 reads the tensor name as float32 values (F32, F16, BF16 and F64
// tensors convert) with its shape. It implements TensorSource.
func (w *Weights) Float32(name string) ([]float32, []int, error) { return w.f.Float32(name) }

// Load copies every parameter and buffer of m from the file, each read
// under prefix + its name: every one must exist with m's shape (checked for
// all before any is read, so that a mismatched file costs nothing). Tensors
// of the file that m does not name are left alone. On error m is
// unchanged.
func (w *Weights) Load(m Module, prefix string) error {
	var err error
	m.VisitParams(func(name string, t *Tensor) {
		if err != nil {
			return
		}
		info, ok := w.f.Info(prefix + name)
		switch {
		case !ok:
			err = fmt.Errorf("radgen: %w: %q", ErrMissingTensor, prefix+name)
		case !slices.Equal(info.Shape, t.Shape()) && !(t.Rank() == 0 && info.Len() == 1):
			err = fmt.Errorf("radgen: %w: %q is %v in the file, %v in the module", ErrShapeMismatch, prefix+name, info.Shape, t.Shape())
		}
	})
	if err != nil {
		return err
	}
	return LoadParams(m, w, prefix)
}

var _ TensorSource = (*Weights)(nil)
