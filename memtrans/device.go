package memtrans

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/accel"
	"github.com/radgen/radgen/mcln"
	"github.com/radgen/radgen/mesh"
)

// Device selects where a Model runs its decoder steps: the CPU (the zero
// value), a CUDA GPU, or the reference device. See [WithDevice].
type Device struct {
	kind    deviceKind
	ordinal int
}

type deviceKind int

const (
	deviceCPU deviceKind = iota
	deviceCUDA
	deviceReference
)

// CPU is the default device: every computation in Go on the CPU.
var CPU = Device{}

// CUDA returns GPU ordinal (0 is the first). It needs a build with the cuda
// tag and an NVIDIA driver; WithDevice reports otherwise.
func CUDA(ordinal int) Device { return Device{kind: deviceCUDA, ordinal: ordinal} }

// ReferenceDevice runs the device code path on the CPU with the host
// reference engine (internal/accel.Host): the same operations, in the same
// order, as on a GPU. It is for testing device support anywhere; it is
// slower than CPU.
func ReferenceDevice() Device { return Device{kind: deviceReference} }

// String returns "cpu", "cuda:N" or "reference".
func (d Device) String() string {
	switch d.kind {
	case deviceCUDA:
		return fmt.Sprintf("cuda:%d", d.ordinal)
	case deviceReference:
		return "reference"
	}
	return "cpu"
}

// ErrDevice is wrapped by errors about a device: none available, or a model
// the device path does not support.
var ErrDevice = errors.New("memtrans: device")

// WithDevice runs the model's decoder steps on d. The extractor and the
// encoder run on the CPU once per study; every decoding step — embeddings,
// relational memory, MCLN, self- and cross-attention with a key/value
// cache, feed-forward, logits — runs on the device, and only the
// log-probabilities come back for the decode strategy. Supported: R2Gen's
// Transformer in every configuration (Variant, multi-view Routing, the
// relational memory or Mem2Mem) and the Meshed-Memory Transformer (meshed
// or routed; without region padding, as the facade configures it);
// METransformer is refused with ErrDevice.
//
// The weights are copied to the device at the first generation, again
// after Trainer steps, and by SyncDevice; Close releases the device.
func WithDevice(d Device) Option {
	return func(m *Model) error {
		if d.kind == deviceCUDA && d.ordinal < 0 {
			return fmt.Errorf("%w: GPU ordinal %d", ErrDevice, d.ordinal)
		}
		m.device = d
		return nil
	}
}

// Device returns the device the model decodes on.
func (m *Model) Device() Device { return m.device }

// openDevice opens the model's device and copies the weights to it.
func (m *Model) openDevice() error {
	if m.device.kind == deviceCPU {
		return nil
	}
	var upload func(accel.Engine) (deviceWeights, error)
	switch {
	case m.transformer != nil:
		tr := m.transformer
		upload = func(e accel.Engine) (deviceWeights, error) { return uploadWeights(e, tr) }
	case m.M2() != nil && m.cfg.M2.Padding == mesh.PadNone:
		m2 := m.M2()
		upload = func(e accel.Engine) (deviceWeights, error) { return uploadM2Weights(e, m2) }
	default:
		return fmt.Errorf("%w: %s decodes on the CPU only", ErrDevice, m.cfg.Architecture())
	}
	e, err := openEngine(m.device)
	if err != nil {
		return err
	}
	// The weights are copied at the first generation: loaders fill them
	// in after the model is built.
	m.dev = &deviceState{engine: e, upload: upload, stale: true}
	m.logger.Info("decoding on a device", "device", m.device.String(), "engine", e.Name())
	return nil
}

// openEngine opens the engine of a device other than the CPU.
func openEngine(d Device) (accel.Engine, error) {
	switch d.kind {
	case deviceReference:
		return accel.NewHost(), nil
	case deviceCUDA:
		e, err := accel.OpenCUDA(d.ordinal)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDevice, d, err)
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w: %s has no engine", ErrDevice, d)
}

// deviceState is a model's engine and its copy of the weights.
type deviceState struct {
	engine accel.Engine
	upload func(accel.Engine) (deviceWeights, error)

	mu      sync.Mutex // guards weights and stale
	weights deviceWeights
	stale   bool // the host weights changed since the copy
}

// deviceWeights is an architecture's weights on a device.
type deviceWeights interface {
	refresh() error // copy the host tensors again
	free()
}

// current returns the device weights, copying the host weights first if
// they changed. The caller holds the model for reading.
func (d *deviceState) current() (deviceWeights, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.weights == nil:
		w, err := d.upload(d.engine)
		if err != nil {
			return nil, fmt.Errorf("%w: copying the weights: %w", ErrDevice, err)
		}
		d.weights, d.stale = w, false
	case d.stale:
		if err := d.weights.refresh(); err != nil {
			return nil, err
		}
		d.stale = false
	}
	return d.weights, nil
}

func (d *deviceState) markStale() {
	d.mu.Lock()
	d.stale = true
	d.mu.Unlock()
}

func (d *deviceState) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.engine.Close()
}

// SyncDevice copies the model's weights again to where generation reads
// them: the device of WithDevice and the snapshot of WithHalfWeights. Call
// it after changing the weights other than through a Trainer or a loader
// (which see to it). It is a no-op for a model without either.
//
// It takes the model exclusively, waiting for generations in flight.
func (m *Model) SyncDevice() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.half != nil && m.transformer != nil {
		m.half.markStale()
		m.half.current(m.transformer)
	}
	if m.dev == nil {
		return nil
	}
	m.dev.markStale()
	_, err := m.dev.current()
	return err
}

// ---- weights on the device ---------------------------------------------------------

// devLinear is a linear map on a device: w (out, in), b (out) or 0.
type devLinear struct {
	w, b    accel.Ptr
	in, out int
}

type devNorm struct {
	gamma, beta accel.Ptr
	eps         float32
	kind        accel.NormKind
	// MCLN: γ̂ = γ + mlpγ(M), β̂ = β + mlpβ(M) (Chen et al. 2020, Eqs. 11–15)
	cond                         bool
	gamma0, gamma2, beta0, beta2 devLinear
}

type devLayer struct {
	selfQ, selfK, selfV, selfO devLinear
	srcQ, srcO                 devLinear
	ff1, ff2                   devLinear
	norms                      [3]devNorm
	heads                      int
}

type devMemory struct {
	q, k, v, o, mlp0, mlp2, w, u devLinear
	heads, slots                 int
}

// devStore holds the tensors an architecture copied to a device, so that
// they can be copied again (refresh) and freed. The first error of a
// sequence of puts is kept in err.
type devStore struct {
	e       accel.Engine
	tensors []devTensor
	err     error
}

// put copies t to the device (nil: no buffer).
func (s *devStore) put(t *radgen.Tensor) accel.Ptr {
	if s.err != nil || t == nil {
		return 0
	}
	var p accel.Ptr
	if p, s.err = s.e.AllocPtr(int64(4 * t.Len())); s.err != nil {
		return 0
	}
	s.tensors = append(s.tensors, devTensor{p, t})
	s.err = s.e.CopyIn(p, t.Data())
	return p
}

// lin copies a linear map.
func (s *devStore) lin(l *radgen.Linear) devLinear {
	return devLinear{w: s.put(l.Weight), b: s.put(l.Bias), in: l.Weight.Dim(1), out: l.Weight.Dim(0)}
}

// done syncs, and frees everything if a put failed.
func (s *devStore) done() error {
	if s.err == nil {
		s.err = s.e.Sync()
	}
	if s.err != nil {
		s.free()
	}
	return s.err
}

// refresh copies the host tensors again (same shapes: a model's
// architecture does not change).
func (s *devStore) refresh() error {
	for _, t := range s.tensors {
		if err := s.e.CopyIn(t.p, t.t.Data()); err != nil {
			return err
		}
	}
	return s.e.Sync()
}

func (s *devStore) free() {
	for _, t := range s.tensors {
		s.e.FreePtr(t.p)
	}
	s.tensors = nil
}

// linear runs l on rows rows of x into y.
func (s *devStore) linear(y, x accel.Ptr, rows int, l devLinear) error {
	return s.e.Linear(y, x, l.w, l.b, rows, l.in, l.out)
}

// devWeights is a Transformer's decoder on a device.
type devWeights struct {
	devStore
	table, pos accel.Ptr
	layers     []devLayer
	final      devNorm
	logit      devLinear
	memory     *devMemory
	m2m        *devMem2Mem
}

type devTensor struct {
	p accel.Ptr
	t *radgen.Tensor
}

// uploadWeights copies tr's decoder weights to e.
func uploadWeights(e accel.Engine, tr *Transformer) (*devWeights, error) {
	w := &devWeights{devStore: devStore{e: e}}
	put, lin := w.put, w.lin
	w.table, w.pos = put(tr.Embed.Table), put(tr.Embed.Position)
	for _, l := range tr.Decoder.Layers {
		dl := devLayer{
			selfQ: lin(l.SelfAttn.Linears[0]), selfK: lin(l.SelfAttn.Linears[1]), selfV: lin(l.SelfAttn.Linears[2]), selfO: lin(l.SelfAttn.Linears[3]),
			srcQ: lin(l.SrcAttn.Linears[0]), srcO: lin(l.SrcAttn.Linears[3]),
			ff1: lin(l.FeedForward.W1), ff2: lin(l.FeedForward.W2), heads: l.SelfAttn.Heads,
		}
		for i, n := range l.norms {
			if n.cond != nil {
				dl.norms[i] = devNorm{gamma: put(n.cond.Gamma), beta: put(n.cond.Beta), eps: float32(n.cond.Eps), cond: true,
					gamma0: lin(n.cond.MLPGamma.L0), gamma2: lin(n.cond.MLPGamma.L2), beta0: lin(n.cond.MLPBeta.L0), beta2: lin(n.cond.MLPBeta.L2)}
			} else {
				dl.norms[i] = plainDevNorm(n.plain, put)
			}
		}
		w.layers = append(w.layers, dl)
	}
	w.final = plainDevNorm(tr.Decoder.Norm, put)
	w.logit = lin(tr.Logit)
	if rm := tr.Memory; rm != nil {
		a := rm.Attn.Linears
		w.memory = &devMemory{q: lin(a[0]), k: lin(a[1]), v: lin(a[2]), o: lin(a[3]), mlp0: lin(rm.MLP0), mlp2: lin(rm.MLP2),
			w: lin(rm.W), u: lin(rm.U), heads: rm.Attn.Heads, slots: rm.Slots}
	}
	if tr.Mem2Mem != nil {
		w.m2m = uploadMem2Mem(tr.Mem2Mem, lin)
	}
	if err := w.done(); err != nil {
		return nil, err
	}
	return w, nil
}

// plainDevNorm copies a LayerNorm with shared γ, β.
func plainDevNorm(n *mcln.LayerNorm, put func(*radgen.Tensor) accel.Ptr) devNorm {
	k := accel.NormR2Gen
	if n.Kind == radgen.NormStandard {
		k = accel.NormStandard
	}
	return devNorm{gamma: put(n.Gamma), beta: put(n.Beta), eps: float32(n.Eps), kind: k}
}

// f32Bytes is the size of n float32s.
func f32Bytes(n int) int64 { return 4 * int64(n) }

func sqrtOf(n int) float32 { return float32(math.Sqrt(float64(n))) }
