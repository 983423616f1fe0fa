package radgen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// Module is anything that owns named tensors: parameters (which require
// gradients) and buffers (which do not, such as a positional table or batch
// norm statistics). Names equal the PyTorch state_dict names of the reference
// implementation, so one list serves loading, saving and optimisers.
type Module interface {
	// VisitParams calls visit for every parameter and buffer, in a fixed order.
	VisitParams(visit func(name string, t *Tensor))
}

// Prefixed returns a visitor that prepends prefix to every name before
// calling visit; modules use it to name their children.
func Prefixed(prefix string, visit func(string, *Tensor)) func(string, *Tensor) {
	return func(name string, t *Tensor) { visit(prefix+name, t) }
}

// Named is a tensor with its state_dict name.
type Named struct {
	Name   string
	Tensor *Tensor
}

// Params returns every parameter and buffer of m in visiting order.
func Params(m Module) []Named {
	var out []Named
	m.VisitParams(func(name string, t *Tensor) { out = append(out, Named{name, t}) })
	return out
}

// Trainable returns the tensors of m that require gradients.
func Trainable(m Module) []Named {
	var out []Named
	m.VisitParams(func(name string, t *Tensor) {
		if t.requiresGrad {
			out = append(out, Named{name, t})
		}
	})
	return out
}

// NewParam returns a zero float32 parameter (it requires gradients).
func NewParam(shape ...int) *Tensor { return Zeros(shape...).SetRequiresGrad(true) }

// TensorSource supplies float32 tensors by name: a safetensors file, a
// PyTorch checkpoint, a map in tests.
type TensorSource interface {
	Float32(name string) (data []float32, shape []int, err error)
}

// ErrMissingTensor is wrapped by LoadParams when the source lacks a tensor.
var ErrMissingTensor = errors.New("missing tensor")

// ErrShapeMismatch is wrapped by LoadParams when a tensor has the wrong shape.
var ErrShapeMismatch = errors.New("tensor shape mismatch")

// LoadParams copies every parameter and buffer of m from src, reading the
// name prefix+name. Every tensor is checked (shape, finiteness) before m is
// modified, so on error m is unchanged; the error names the tensor.
func LoadParams(m Module, src TensorSource, prefix string) error {
	type pending struct {
		dst  *Tensor
		data []float32
	}
	var todo []pending
	var err error
	m.VisitParams(func(name string, t *Tensor) {
		if err != nil {
			return
		}
		full := prefix + name
		data, shape, e := src.Float32(full)
		if e != nil {
			err = fmt.Errorf("radgen: loading %q: %w: %w", full, ErrMissingTensor, e)
			return
		}
		if !slices.Equal(shape, t.shape) && !(len(t.shape) == 0 && len(shape) == 1 && shape[0] == 1) {
			err = fmt.Errorf("radgen: loading %q: %w: file has %v, model wants %v", full, ErrShapeMismatch, shape, t.shape)
			return
		}
		for i, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				err = fmt.Errorf("radgen: loading %q: non-finite value %v at element %d", full, v, i)
				return
			}
		}
		todo = append(todo, pending{t, data})
	})
	if err != nil {
		return err
	}
	for _, p := range todo {
		if p.dst.device != CPU {
			p.dst.writeHost(p.data)
			continue
		}
		if p.dst.Is64() {
			d := p.dst.Data64()
			for i, v := range p.data {
				d[i] = float64(v)
			}
		} else {
			copy(p.dst.Data(), p.data)
		}
	}
	return nil
}

// MapSource is a TensorSource over an in-memory map, keyed by name.
type MapSource map[string]*Tensor

// Float32 implements TensorSource.
func (m MapSource) Float32(name string) ([]float32, []int, error) {
	t, ok := m[name]
	if !ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			if strings.HasPrefix(k, name[:len(name)/2]) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		return nil, nil, fmt.Errorf("not in map (similar: %v)", keys)
	}
	if t.device != CPU {
		return t.hostCopy(), t.shape, nil
	}
	if t.Is64() {
		return t.To32().Data(), t.shape, nil
	}
	return t.Data(), t.shape, nil
}

// StateDict returns m's tensors as a MapSource keyed by prefix+name.
func StateDict(m Module, prefix string) MapSource {
	out := MapSource{}
	m.VisitParams(func(name string, t *Tensor) { out[prefix+name] = t })
	return out
}

// XavierUniform fills t with U(−a, a), a = sqrt(6/(fan_in+fan_out)), with
// PyTorch's fan convention (fan_in = size(1)·receptive, fan_out =
// size(0)·receptive).
func XavierUniform(t *Tensor, rng *rand.Rand) {
	if t.Rank() < 2 {
		panic("radgen: XavierUniform of a tensor with fewer than 2 dimensions")
	}
	recept := numel(t.shape[2:])
	fanIn, fanOut := t.shape[1]*recept, t.shape[0]*recept
	Uniform(t, rng, math.Sqrt(6/float64(fanIn+fanOut)))
}

// KaimingUniformLinear fills a Linear weight and bias as torch.nn.Linear
// does by default: weight U(±1/sqrt(fan_in)) (kaiming_uniform with a=√5),
// bias U(±1/sqrt(fan_in)).
func KaimingUniformLinear(w, b *Tensor, rng *rand.Rand) {
	bound := 1 / math.Sqrt(float64(w.shape[1]))
	Uniform(w, rng, bound)
	if b != nil {
		Uniform(b, rng, bound)
	}
}

// Uniform fills t with values drawn from U(−a, a).
func Uniform(t *Tensor, rng *rand.Rand, a float64) {
	if t.device != CPU {
		d := make([]float32, t.Len())
		for i := range d {
			d[i] = float32((2*rng.Float64() - 1) * a)
		}
		t.writeHost(d)
		return
	}
	if t.Is64() {
		d := t.Data64()
		for i := range d {
			d[i] = (2*rng.Float64() - 1) * a
		}
		return
	}
	d := t.Data()
	for i := range d {
		d[i] = float32((2*rng.Float64() - 1) * a)
	}
}

// Fill sets every element of t to v.
func Fill(t *Tensor, v float64) {
	setAll(t, v)
	t.changed()
}

// Promote64 converts every parameter and buffer of m to float64 in place
// (values are widened exactly). Gradient checks by finite differences use it
// to run a whole module in double precision. float64 lives on the CPU only:
// tensors on other devices move there.
func Promote64(m Module) {
	m.VisitParams(func(_ string, t *Tensor) {
		if t.Is64() {
			return
		}
		w := t.To64()
		t.dense, t.host, t.buf, t.device = w.dense, w.host, nil, CPU
		t.grad = nil
		t.changed()
	})
}
