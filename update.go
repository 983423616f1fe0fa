package radgen

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/radgen/radgen/internal/kernels"
)

// In-place updates of tensors, for code outside a Graph that owns tensors
// and changes their values: optimisers (memtrans/optim) and running
// statistics (vision's batch norm). Each is written once for every device:
// on the CPU it runs on the tensors' slices, on any other device it calls
// the primitive of the device's engine, which computes the same values.
// None records anything in a Graph or touches gradients.

// AdamConsts are the scalars of one Adam step of one parameter θ with
// gradient g at its step count t, rounded to float32 where ATen rounds a
// Python scalar to the parameter's dtype (memtrans/optim's Adam.Step
// computes them from its hyperparameters and states the update). The step
// is
//
//	g ← g + WD·θ                     (with Decoupled instead θ ← θ·Decay)
//	m ← Beta1·m + OneMinusB1·g       (one rounding, as a fused multiply-add)
//	v ← Beta2·v + OneMinusB2·g²
//	v̂ ← max(v̂, v)                    (with AMSGrad; otherwise v̂ = v)
//	θ ← θ + NegStepLen·m / (√v̂/BC2Sqrt + Eps)
type AdamConsts struct {
	// WD is the L2 penalty λ, added to the gradient as g + λ·θ with one
	// rounding (torch's grad.add(param, alpha=weight_decay)); 0 for none.
	// It is ignored when Decoupled is set.
	WD float32
	// Decay is AdamW's factor 1 − lr·λ, by which θ is multiplied before the
	// rest of the step when Decoupled is set.
	Decay float32
	// Decoupled selects AdamW's decoupled weight decay (Decay) instead of
	// the L2 penalty (WD).
	Decoupled bool
	// Beta1 is β1, the decay rate of the first moment average m.
	Beta1 float32
	// OneMinusB1 is 1 − β1, computed in float64 and then rounded (it may
	// differ from 1 − Beta1 computed in float32).
	OneMinusB1 float32
	// Beta2 is β2, the decay rate of the second moment average v.
	Beta2 float32
	// OneMinusB2 is 1 − β2, computed in float64 and then rounded.
	OneMinusB2 float32
	// BC2Sqrt is √(1 − β2ᵗ), the square root of the second moment's bias
	// correction at step t.
	BC2Sqrt float32
	// Eps is ε, added to the denominator after the bias correction.
	Eps float32
	// NegStepLen is −lr/(1 − β1ᵗ): minus the learning rate over the first
	// moment's bias correction at step t.
	NegStepLen float32
	// AMSGrad selects AMSGrad: the denominator uses v̂, the running maximum
	// of v, which the update keeps in its vmax tensor.
	AMSGrad bool
}

// AdamUpdate applies one Adam step with the scalars k to the parameter t in
// place, given its gradient grad and its moment averages m and v (exp_avg
// and exp_avg_sq), which it updates too, and with k.AMSGrad the running
// maximum vmax of v (max_exp_avg_sq; nil without AMSGrad). See
// [AdamConsts] for the update; its arithmetic is torch.optim.Adam's
// (PyTorch 1.13, single-tensor path) bit for bit on every device.
//
// The tensors are float32, of one shape and on one device. On the
// CPU the step runs on the calling goroutine; on any other device the
// device's engine runs it. [UpdateAdam] steps many parameters at once,
// spread over the engine's cores. AdamUpdate panics, with a message
// starting "radgen: ", when a tensor is nil, float64 or half precision, when
// the shapes or devices differ, or when vmax is given without k.AMSGrad or
// missing with it.
func (t *Tensor) AdamUpdate(grad, m, v, vmax *Tensor, k AdamConsts) {
	n := 0
	if t != nil {
		n = t.Len()
	}
	t.adamRange(0, n, grad, m, v, vmax, k)
}

// AdamStep is one parameter's part of [UpdateAdam]: the arguments of
// [Tensor.AdamUpdate].
type AdamStep struct {
	Param, Grad, M, V *Tensor
	VMax              *Tensor // with K.AMSGrad only
	K                 AdamConsts
}

// adamChunk is the number of elements one goroutine updates at a time:
// small enough to balance a few large tensors over the cores, large enough
// that scheduling costs nothing next to the arithmetic.
const adamChunk = 1 << 16

// UpdateAdam applies every step of steps, each as [Tensor.AdamUpdate]
// would, and panics as it does. The engine schedules them: on the CPU,
// ranges of every parameter are spread over at most workers goroutines
// (0 means GOMAXPROCS), each element updated by exactly one with the same
// arithmetic, so the results do not depend on the schedule; on any other
// device, its engine runs one update per parameter.
func UpdateAdam(steps []AdamStep, workers int) {
	type job struct {
		s      *AdamStep
		lo, hi int
	}
	var jobs []job
	total := 0
	for i := range steps {
		s := &steps[i]
		if s.Param == nil || s.Param.device != CPU {
			s.Param.AdamUpdate(s.Grad, s.M, s.V, s.VMax, s.K) // panics on nil, as documented
			continue
		}
		for lo, n := 0, s.Param.Len(); lo < n; lo += adamChunk {
			jobs = append(jobs, job{s: s, lo: lo, hi: min(lo+adamChunk, n)})
		}
		total += s.Param.Len()
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	do := func(j job) { j.s.Param.adamRange(j.lo, j.hi, j.s.Grad, j.s.M, j.s.V, j.s.VMax, j.s.K) }
	workers = min(workers, len(jobs), (total+adamChunk-1)/adamChunk)
	if workers <= 1 {
		for _, j := range jobs {
			do(j)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				do(jobs[i])
			}
		})
	}
	wg.Wait()
}

// adamRange is AdamUpdate on the elements lo ≤ i < hi of the tensors only
// (row-major order); calls on disjoint ranges of the same tensors may run
// concurrently on the CPU.
func (t *Tensor) adamRange(lo, hi int, grad, m, v, vmax *Tensor, k AdamConsts) {
	const op = "AdamUpdate"
	if t == nil || grad == nil || m == nil || v == nil {
		panic("radgen: AdamUpdate of nil tensors (the parameter, its gradient and both moments are needed)")
	}
	if k.AMSGrad != (vmax != nil) {
		panic(fmt.Sprintf("radgen: AdamUpdate with AMSGrad %v and vmax %v (vmax is needed with AMSGrad, and only then)", k.AMSGrad, vmax))
	}
	ts := [...]*Tensor{t, grad, m, v, vmax}
	for i, x := range ts {
		if x == nil {
			continue
		}
		checkFloat32(op, x)
		if i > 0 && (!slices.Equal(x.shape, t.shape) || x.device != t.device) {
			panic(fmt.Sprintf("radgen: AdamUpdate of %v on %v with %v on %v (one shape and one device for the parameter, its gradient and its moments)", t, t.device, x, x.device))
		}
	}
	if !(0 <= lo && lo <= hi && hi <= t.Len()) {
		panic(fmt.Sprintf("radgen: AdamUpdate of elements [%d, %d) of %v", lo, hi, t))
	}
	// The engines take their own copy of the scalars' type; the conversion
	// compiles only while the two have the same fields, so they cannot drift
	// apart.
	kk := kernels.AdamConsts(k)
	var vm buffer
	if vmax != nil {
		vm = vmax.at(lo)
	}
	primsOf(op, t).adam(t.at(lo), grad.at(lo), m.at(lo), v.at(lo), vm, hi-lo, kk)
	t.changed()
	keep(ts[:]...)
}

// CopyFrom sets t's values to src's in place. The two tensors are on the
// same device, of the same element type, and hold as many elements (their
// shapes may differ; the values are copied in row-major order). It panics,
// with a message starting "radgen: ", otherwise, and for a nil or half
// precision tensor.
func (t *Tensor) CopyFrom(src *Tensor) {
	if t == nil || src == nil {
		panic("radgen: CopyFrom with a nil tensor")
	}
	if t.IsHalf() || src.IsHalf() {
		panic("radgen: CopyFrom of a half-precision tensor (To32 widens it)")
	}
	if t.device != src.device || t.Is64() != src.Is64() || t.Len() != src.Len() {
		panic(fmt.Sprintf("radgen: CopyFrom of %v on %v into %v on %v (one device, one element type, as many elements)", src, src.device, t, t.device))
	}
	n := t.Len()
	primsOf("CopyFrom", t, src).copyStrided(t.at(0), n, src.at(0), n, 1, n, false)
	t.changed()
	keep(t, src)
}

// ClampInPlace sets every element x of t to min(max(x, −c), c) in place, as
// torch.nn.utils.clip_grad_value_ does (for a float32 tensor c is rounded
// to float32; NaN stays NaN). It panics, with a message starting
// "radgen: ", when c is negative or NaN, and for a nil or half-precision
// tensor.
func (t *Tensor) ClampInPlace(c float64) {
	if !(c >= 0) {
		panic(fmt.Sprintf("radgen: ClampInPlace with bound %v", c))
	}
	checkInPlace("ClampInPlace", t)
	primsOf("ClampInPlace", t).clamp(t.at(0), c, t.Len())
	t.changed()
	keep(t)
}

// ScaleInPlace multiplies every element of t by s in place (for a float32
// tensor s is rounded to float32 and each product rounded once). It panics,
// with a message starting "radgen: ", for a nil or half-precision tensor.
func (t *Tensor) ScaleInPlace(s float64) {
	checkInPlace("ScaleInPlace", t)
	primsOf("ScaleInPlace", t).scale(t.at(0), t.at(0), s, t.Len())
	t.changed()
	keep(t)
}

// checkInPlace panics when t cannot be updated in place.
func checkInPlace(op string, t *Tensor) {
	if t == nil {
		panic("radgen: " + op + " of a nil tensor")
	}
	if t.IsHalf() {
		panic("radgen: " + op + " of a half-precision tensor (To32 widens it)")
	}
}

// checkFloat32 panics unless t is a float32 tensor that can be updated in
// place.
func checkFloat32(op string, t *Tensor) {
	checkInPlace(op, t)
	if t.Is64() {
		panic(fmt.Sprintf("radgen: %s of float64 %v (float32 only)", op, t))
	}
}

// LiveBytes returns the bytes of tensor storage allocated on d and not yet
// freed: the engine's own count where it keeps one (the reference
// engine's), otherwise the bytes of the device buffers of tensors not yet
// collected or released. It is 0 for the CPU, whose tensors live in Go's
// heap, and for a device that cannot be used.
func (d Device) LiveBytes() int64 { return liveBytes(d) }
