package optim

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"slices"
	"strings"

	"github.com/radgen/radgen"
)

// Errors returned by this package.
var (
	// ErrConfig is wrapped when a hyperparameter or parameter list is invalid:
	// a negative learning rate, a beta outside [0, 1), a parameter that is
	// not float32, a name used twice.
	ErrConfig = errors.New("optim: invalid configuration")
	// ErrStateMismatch is wrapped by SetState when a saved state does not fit
	// the optimiser or scheduler: other parameter names, shapes or groups.
	ErrStateMismatch = errors.New("optim: state does not match")
	// ErrFormat is wrapped when a state file is malformed.
	ErrFormat = errors.New("optim: malformed state")
	// ErrNonFiniteNorm is returned by ClipGradNorm when the total norm of the
	// gradients is NaN or infinite; the gradients are then left unchanged.
	ErrNonFiniteNorm = errors.New("optim: non-finite gradient norm")
)

// Group is a parameter group: tensors that share a learning rate and a
// weight decay, as in a torch param_group.
type Group struct {
	// Params are the tensors to optimise, with their state_dict names. The
	// names key the saved state, so they must be unique across groups.
	Params []radgen.Named
	// LR is the learning rate (≥ 0). Schedulers change it through SetLR.
	LR float64
	// WeightDecay is the L2 penalty coefficient (≥ 0), added to the gradient
	// (or applied to the parameter with WithDecoupledWeightDecay).
	WeightDecay float64
}

// R2GenGroups splits params into R2Gen's two parameter groups
// (modules/optimizers.py in the R2Gen code): group 0 holds the visual
// extractor (names starting with "visual_extractor.") at lrVE, group 1
// everything else at lrED; both use weightDecay. R2Gen's defaults are
// lrVE 5e-5, lrED 1e-4 and weightDecay 5e-5.
func R2GenGroups(params []radgen.Named, lrVE, lrED, weightDecay float64) []Group {
	ve := Group{LR: lrVE, WeightDecay: weightDecay}
	ed := Group{LR: lrED, WeightDecay: weightDecay}
	for _, p := range params {
		if strings.HasPrefix(p.Name, "visual_extractor.") {
			ve.Params = append(ve.Params, p)
		} else {
			ed.Params = append(ed.Params, p)
		}
	}
	return []Group{ve, ed}
}

// AdamOption configures an Adam optimiser; an option with an invalid value
// makes NewAdam return an error wrapping ErrConfig.
type AdamOption func(*adamConfig) error

type adamConfig struct {
	beta1, beta2 float64
	eps          float64
	amsgrad      bool
	decoupled    bool
	workers      int
}

// WithBetas sets the decay rates of the first and second moment averages.
// Both must lie in [0, 1). The default is (0.9, 0.999).
func WithBetas(beta1, beta2 float64) AdamOption {
	return func(c *adamConfig) error {
		if !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) {
			return fmt.Errorf("%w: betas (%v, %v) outside [0, 1)", ErrConfig, beta1, beta2)
		}
		c.beta1, c.beta2 = beta1, beta2
		return nil
	}
}

// WithEps sets the term added to the denominator (≥ 0). The default is 1e-8.
func WithEps(eps float64) AdamOption {
	return func(c *adamConfig) error {
		if !(eps >= 0) || math.IsInf(eps, 0) {
			return fmt.Errorf("%w: eps %v", ErrConfig, eps)
		}
		c.eps = eps
		return nil
	}
}

// WithAMSGrad turns the AMSGrad variant on or off (default off): the
// denominator uses the running maximum of the second moment average.
func WithAMSGrad(on bool) AdamOption {
	return func(c *adamConfig) error { c.amsgrad = on; return nil }
}

// WithDecoupledWeightDecay selects AdamW (default off): instead of adding
// weightDecay·θ to the gradient, each step first multiplies θ by
// 1 − lr·weightDecay, as torch.optim.AdamW does.
func WithDecoupledWeightDecay(on bool) AdamOption {
	return func(c *adamConfig) error { c.decoupled = on; return nil }
}

// WithWorkers bounds the goroutines one Step uses (default
// runtime.GOMAXPROCS(0); 1 runs the step on the caller's goroutine). The
// result does not depend on it.
func WithWorkers(n int) AdamOption {
	return func(c *adamConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: %d workers", ErrConfig, n)
		}
		c.workers = n
		return nil
	}
}

// Adam is the Adam optimiser with torch.optim.Adam's semantics (PyTorch
// 1.13, single-tensor path). A parameter whose gradient is nil at a Step is
// skipped, and its step count does not advance, as in torch. The moment
// buffers are allocated at a parameter's first step.
//
// Make one with NewAdam or NewAdamW; the zero value optimises no
// parameters. An Adam is not safe for concurrent use.
type Adam struct {
	cfg    adamConfig
	groups []group

	// Reused by Step: the work list, and the bias corrections of the last
	// step count seen (parameters usually share their step count).
	steps    []radgen.AdamStep
	bcStep   int64
	bc1, bc2 float64
}

type group struct {
	lr, wd float64
	params []*slot
}

// slot is one parameter and its optimiser state.
type slot struct {
	name string
	t    *radgen.Tensor
	step int64
	// m, v and vmax are exp_avg, exp_avg_sq and max_exp_avg_sq, on the
	// parameter's device; nil before the first step (vmax stays nil
	// without AMSGrad). A state set by SetState is on the CPU until the
	// next Step moves it to the parameter's device.
	m, v, vmax *radgen.Tensor
}

// Compile-time check that Adam can be driven by schedulers.
var _ LRGroups = (*Adam)(nil)

// NewAdam returns an Adam optimiser over the given parameter groups. Every
// parameter must be a float32 tensor, named uniquely, and appear in one
// group only. A parameter on a device ([radgen.Device]) keeps its moments
// on that device and is updated there by the device's engine with the
// arithmetic of the CPU step.
func NewAdam(groups []Group, opts ...AdamOption) (*Adam, error) {
	cfg := adamConfig{beta1: 0.9, beta2: 0.999, eps: 1e-8, workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	a := &Adam{cfg: cfg}
	names := map[string]bool{}
	tensors := map[*radgen.Tensor]string{}
	for gi, g := range groups {
		if err := checkRate("learning rate", g.LR); err != nil {
			return nil, fmt.Errorf("group %d: %w", gi, err)
		}
		if err := checkRate("weight decay", g.WeightDecay); err != nil {
			return nil, fmt.Errorf("group %d: %w", gi, err)
		}
		ng := group{lr: g.LR, wd: g.WeightDecay}
		for _, p := range g.Params {
			switch {
			case p.Tensor == nil:
				return nil, fmt.Errorf("%w: parameter %q is nil", ErrConfig, p.Name)
			case names[p.Name]:
				return nil, fmt.Errorf("%w: parameter name %q appears twice", ErrConfig, p.Name)
			case tensors[p.Tensor] != "":
				return nil, fmt.Errorf("%w: parameter %q is the same tensor as %q", ErrConfig, p.Name, tensors[p.Tensor])
			case p.Tensor.Is64():
				return nil, fmt.Errorf("%w: parameter %q is float64; Adam works on float32", ErrConfig, p.Name)
			}
			names[p.Name] = true
			tensors[p.Tensor] = p.Name
			ng.params = append(ng.params, &slot{name: p.Name, t: p.Tensor})
		}
		a.groups = append(a.groups, ng)
	}
	return a, nil
}

// NewAdamW is NewAdam with WithDecoupledWeightDecay(true) (torch.optim.AdamW;
// note that torch's AdamW defaults to weight decay 1e-2, which a Group states
// explicitly here).
func NewAdamW(groups []Group, opts ...AdamOption) (*Adam, error) {
	return NewAdam(groups, append([]AdamOption{WithDecoupledWeightDecay(true)}, opts...)...)
}

func checkRate(what string, r float64) error {
	if !(r >= 0) || math.IsInf(r, 0) {
		return fmt.Errorf("%w: %s %v", ErrConfig, what, r)
	}
	return nil
}

// NumGroups returns the number of parameter groups.
func (a *Adam) NumGroups() int { return len(a.groups) }

// LR returns the learning rate of group i.
func (a *Adam) LR(i int) float64 { return a.groups[i].lr }

// SetLR sets the learning rate of group i. It panics if lr is negative or
// not finite.
func (a *Adam) SetLR(i int, lr float64) {
	if err := checkRate("learning rate", lr); err != nil {
		panic("optim: SetLR: " + err.Error())
	}
	a.groups[i].lr = lr
}

// WeightDecay returns the weight decay of group i.
func (a *Adam) WeightDecay(i int) float64 { return a.groups[i].wd }

// Params returns every parameter, group by group, in the order given to
// NewAdam (the form ClipGradValue and ClipGradNorm take).
func (a *Adam) Params() []radgen.Named {
	var out []radgen.Named
	for _, g := range a.groups {
		for _, s := range g.params {
			out = append(out, radgen.Named{Name: s.name, Tensor: s.t})
		}
	}
	return out
}

// ZeroGrad drops the gradient of every parameter (torch's
// zero_grad(set_to_none=True)).
func (a *Adam) ZeroGrad() {
	for _, g := range a.groups {
		for _, s := range g.params {
			s.t.ZeroGrad()
		}
	}
}

// Step applies one Adam update to every parameter that has a gradient. For
// a parameter θ with gradient g at its step t (Kingma & Ba 2015, Alg. 1;
// Reddi et al. 2018 for AMSGrad), as torch 1.13 computes it:
//
//	g  ← g + λθ                     (L2; with AdamW instead θ ← θ·(1 − lr·λ))
//	m  ← β1·m + (1−β1)·g
//	v  ← β2·v + (1−β2)·g²
//	v̂  ← max(v̂, v)                  (AMSGrad; otherwise v̂ = v)
//	θ  ← θ − (lr/(1−β1ᵗ)) · m / (√v̂/√(1−β2ᵗ) + ε)
//
// The gradients are not modified.
func (a *Adam) Step() {
	steps := a.steps[:0]
	for gi := range a.groups {
		g := &a.groups[gi]
		for _, s := range g.params {
			grad := s.t.Grad()
			if grad == nil {
				continue
			}
			if grad.Is64() || !slices.Equal(grad.Shape(), s.t.Shape()) {
				panic(fmt.Sprintf("optim: gradient %v of parameter %q does not match %v", grad, s.name, s.t))
			}
			if grad.Device() != s.t.Device() {
				panic(fmt.Sprintf("optim: gradient of parameter %q on %v, the parameter on %v", s.name, grad.Device(), s.t.Device()))
			}
			s.moments(a.cfg.amsgrad)
			s.step++
			st := radgen.AdamStep{Param: s.t, Grad: grad, M: s.m, V: s.v, K: a.consts(g.lr, g.wd, s.step)}
			if a.cfg.amsgrad {
				st.VMax = s.vmax
			}
			steps = append(steps, st)
		}
	}
	radgen.UpdateAdam(steps, a.cfg.workers)
	clear(steps) // drop the references to the tensors until the next step
	a.steps = steps[:0]
}

// moments allocates the moments of s at its first step, and moves them to
// the parameter's device when they are elsewhere (a state set by SetState,
// or a parameter moved since).
func (s *slot) moments(amsgrad bool) {
	dev := s.t.Device()
	moment := func(t *radgen.Tensor) *radgen.Tensor {
		if t == nil {
			t = radgen.Zeros(s.t.Shape()...)
		}
		return t.To(dev)
	}
	if s.m == nil || s.m.Device() != dev || s.v.Device() != dev {
		s.m, s.v = moment(s.m), moment(s.v)
	}
	if amsgrad && (s.vmax == nil || s.vmax.Device() != dev) {
		s.vmax = moment(s.vmax)
	}
}

func (a *Adam) consts(lr, wd float64, step int64) radgen.AdamConsts {
	c := a.cfg
	// Python floats: beta**step, 1 - …, lr / …, math.sqrt(…), all in float64,
	// rounded to float32 where ATen rounds a Python scalar to the tensor's
	// dtype.
	if step != a.bcStep {
		a.bcStep = step
		a.bc1 = 1 - powInt(c.beta1, step)
		a.bc2 = 1 - powInt(c.beta2, step)
	}
	bc1, bc2 := a.bc1, a.bc2
	k := radgen.AdamConsts{
		Beta1:      float32(c.beta1),     // exp_avg.mul_(beta1)
		OneMinusB1: float32(1 - c.beta1), // .add_(grad, alpha=1-beta1)
		Beta2:      float32(c.beta2),     // exp_avg_sq.mul_(beta2)
		OneMinusB2: float32(1 - c.beta2), // .addcmul_(grad, grad, value=1-beta2)
		BC2Sqrt:    float32(math.Sqrt(bc2)),
		Eps:        float32(c.eps),
		NegStepLen: float32(-(lr / bc1)), // param.addcdiv_(exp_avg, denom, value=-step_size)
		Decoupled:  c.decoupled,
		AMSGrad:    c.amsgrad,
	}
	if c.decoupled {
		k.Decay = float32(1 - lr*wd) // param.mul_(1 - lr*weight_decay)
	} else {
		k.WD = float32(wd) // grad.add(param, alpha=weight_decay)
	}
	return k
}

// powInt returns x^n for n ≥ 1 correctly rounded to float64 (256-bit
// big.Float arithmetic). Python's beta**step calls the C library's pow,
// which is correctly rounded in all but rare cases (glibc 2.36 promises
// 0.52 ULP); math.Pow differs from it for most step counts.
func powInt(x float64, n int64) float64 {
	const prec = 256
	r := new(big.Float).SetPrec(prec).SetInt64(1)
	b := new(big.Float).SetPrec(prec).SetFloat64(x)
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r.Mul(r, b)
		}
		b.Mul(b, b)
	}
	f, _ := r.Float64()
	return f
}
