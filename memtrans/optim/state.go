package optim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/radgen/radgen"
)

// AdamState is the resumable state of an [Adam] optimiser as plain data
// (torch's optimizer.state_dict(), keyed by parameter name rather than by
// position). Slices are owned by the AdamState: State returns copies and
// SetState copies from them.
type AdamState struct {
	Beta1, Beta2 float64
	Eps          float64
	AMSGrad      bool
	// Decoupled is true for AdamW.
	Decoupled bool
	Groups    []GroupState
}

// GroupState is one parameter group's hyperparameters and parameters.
type GroupState struct {
	LR, WeightDecay float64
	Params          []ParamState
}

// ParamState is one parameter's optimiser state.
type ParamState struct {
	// Name and Shape identify the parameter; SetState checks both.
	Name  string
	Shape []int
	// Step counts the updates applied to this parameter.
	Step int64
	// ExpAvg and ExpAvgSq are the first and second moment averages,
	// MaxExpAvgSq the running maximum of ExpAvgSq (AMSGrad only). They are
	// nil before the parameter's first step, otherwise as long as the
	// parameter.
	ExpAvg, ExpAvgSq, MaxExpAvgSq []float32
}

// State returns a deep copy of the optimiser's state.
func (a *Adam) State() *AdamState {
	s := &AdamState{
		Beta1: a.cfg.beta1, Beta2: a.cfg.beta2, Eps: a.cfg.eps,
		AMSGrad: a.cfg.amsgrad, Decoupled: a.cfg.decoupled,
	}
	for _, g := range a.groups {
		gs := GroupState{LR: g.lr, WeightDecay: g.wd}
		for _, p := range g.params {
			gs.Params = append(gs.Params, ParamState{
				Name:        p.name,
				Shape:       slices.Clone(p.t.Shape()),
				Step:        p.step,
				ExpAvg:      momentOf(p.m),
				ExpAvgSq:    momentOf(p.v),
				MaxExpAvgSq: momentOf(p.vmax),
			})
		}
		s.Groups = append(s.Groups, gs)
	}
	return s
}

// momentOf returns a copy of a moment's values (nil for none), on any
// device.
func momentOf(t *radgen.Tensor) []float32 {
	switch {
	case t == nil:
		return nil
	case t.Device() == radgen.CPU:
		return slices.Clone(t.Data())
	}
	return t.To(radgen.CPU).Data()
}

// SetState restores a state returned by State (possibly of another Adam
// over tensors with the same names and shapes, as when resuming from a
// checkpoint). Like torch's load_state_dict it restores the hyperparameters
// too: betas, eps, AMSGrad, decoupling and each group's learning rate and
// weight decay. The groups must hold the same parameter names, in the same
// order, with the same shapes; otherwise SetState returns an error wrapping
// ErrStateMismatch and leaves the optimiser unchanged.
func (a *Adam) SetState(s *AdamState) error {
	if s == nil {
		return fmt.Errorf("%w: nil Adam state", ErrStateMismatch)
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrStateMismatch, err)
	}
	if len(s.Groups) != len(a.groups) {
		return fmt.Errorf("%w: state has %d parameter groups, the optimiser %d", ErrStateMismatch, len(s.Groups), len(a.groups))
	}
	for gi, gs := range s.Groups {
		g := a.groups[gi]
		if len(gs.Params) != len(g.params) {
			return fmt.Errorf("%w: group %d: state has %d parameters, the optimiser %d", ErrStateMismatch, gi, len(gs.Params), len(g.params))
		}
		for pi, ps := range gs.Params {
			p := g.params[pi]
			if ps.Name != p.name {
				return fmt.Errorf("%w: group %d parameter %d: state has %q, the optimiser %q", ErrStateMismatch, gi, pi, ps.Name, p.name)
			}
			if !slices.Equal(ps.Shape, p.t.Shape()) {
				return fmt.Errorf("%w: parameter %q: state has shape %v, the tensor %v", ErrStateMismatch, ps.Name, ps.Shape, p.t.Shape())
			}
		}
	}
	a.cfg.beta1, a.cfg.beta2, a.cfg.eps = s.Beta1, s.Beta2, s.Eps
	a.cfg.amsgrad, a.cfg.decoupled = s.AMSGrad, s.Decoupled
	a.bcStep = 0 // the cached bias corrections belong to the old betas
	for gi, gs := range s.Groups {
		g := &a.groups[gi]
		g.lr, g.wd = gs.LR, gs.WeightDecay
		for pi, ps := range gs.Params {
			p := g.params[pi]
			p.step = ps.Step
			// On the CPU; a device parameter's next Step moves them there.
			p.m, p.v, p.vmax = hostMoment(ps.ExpAvg, ps.Shape), hostMoment(ps.ExpAvgSq, ps.Shape), hostMoment(ps.MaxExpAvgSq, ps.Shape)
		}
	}
	return nil
}

// hostMoment returns a copy of a moment's values as a CPU tensor of shape
// (nil for none).
func hostMoment(x []float32, shape []int) *radgen.Tensor {
	if x == nil {
		return nil
	}
	return radgen.FromFloat32(slices.Clone(x), shape...)
}

// validate checks the state's internal consistency.
func (s *AdamState) validate() error {
	if !(s.Beta1 >= 0 && s.Beta1 < 1) || !(s.Beta2 >= 0 && s.Beta2 < 1) {
		return fmt.Errorf("betas (%v, %v) outside [0, 1)", s.Beta1, s.Beta2)
	}
	if !(s.Eps >= 0) || math.IsInf(s.Eps, 0) {
		return fmt.Errorf("eps %v", s.Eps)
	}
	seen := map[string]bool{}
	for gi, g := range s.Groups {
		if checkRate("", g.LR) != nil || checkRate("", g.WeightDecay) != nil {
			return fmt.Errorf("group %d: learning rate %v, weight decay %v", gi, g.LR, g.WeightDecay)
		}
		for _, p := range g.Params {
			if seen[p.Name] {
				return fmt.Errorf("parameter %q appears twice", p.Name)
			}
			seen[p.Name] = true
			n, ok := shapeLen(p.Shape)
			if !ok {
				return fmt.Errorf("parameter %q: bad shape %v", p.Name, p.Shape)
			}
			if p.Step < 0 {
				return fmt.Errorf("parameter %q: negative step %d", p.Name, p.Step)
			}
			check := func(what string, x []float32, want bool) error {
				switch {
				case x == nil && want:
					return fmt.Errorf("parameter %q: step %d without %s", p.Name, p.Step, what)
				case x != nil && len(x) != n:
					return fmt.Errorf("parameter %q: %s has %d values for shape %v", p.Name, what, len(x), p.Shape)
				}
				return nil
			}
			started := p.Step > 0
			if err := check("exp_avg", p.ExpAvg, started); err != nil {
				return err
			}
			if err := check("exp_avg_sq", p.ExpAvgSq, started || p.ExpAvg != nil); err != nil {
				return err
			}
			if p.ExpAvg == nil && p.ExpAvgSq != nil {
				return fmt.Errorf("parameter %q: exp_avg_sq without exp_avg", p.Name)
			}
			if !s.AMSGrad && p.MaxExpAvgSq != nil {
				return fmt.Errorf("parameter %q: max_exp_avg_sq without AMSGrad", p.Name)
			}
			if err := check("max_exp_avg_sq", p.MaxExpAvgSq, s.AMSGrad && started); err != nil {
				return err
			}
		}
	}
	return nil
}

// shapeLen returns the number of elements of shape, or false if a
// dimension is negative or the count overflows the limit a radgen tensor
// accepts.
func shapeLen(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt32*64/d) {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// State bundles what this package contributes to a resumable checkpoint:
// the optimiser's state and, optionally, a scheduler's.
type State struct {
	Adam      *AdamState
	Scheduler *SchedulerState // nil when there is no scheduler
}

// stateFormat versions the JSON in the metadata.
const stateFormat = "radgen.optim/1"

// Metadata and tensor names of an encoded State, after the caller's prefix.
const (
	metaAdam      = "adam"
	metaScheduler = "scheduler"
	tensorM       = "exp_avg."
	tensorV       = "exp_avg_sq."
	tensorVMax    = "max_exp_avg_sq."
)

type adamJSON struct {
	Format    string      `json:"format"`
	Beta1     float64     `json:"beta1"`
	Beta2     float64     `json:"beta2"`
	Eps       float64     `json:"eps"`
	AMSGrad   bool        `json:"amsgrad"`
	Decoupled bool        `json:"decoupled"`
	Groups    []groupJSON `json:"groups"`
}

type groupJSON struct {
	LR          float64     `json:"lr"`
	WeightDecay float64     `json:"weight_decay"`
	Params      []paramJSON `json:"params"`
}

type paramJSON struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	Step  int64  `json:"step"`
}

// Encode returns s as tensors and metadata for a weights file
// (radgen.SaveWeights), every name and key starting with prefix, so that a
// checkpoint writer can store it beside the model's weights (use a prefix
// such as "optim." that no weight has). The moments are the module's
// float32 tensors, named prefix+"exp_avg."+name (and "exp_avg_sq.",
// "max_exp_avg_sq."); the hyperparameters, step counts and the scheduler
// state are JSON under the metadata keys prefix+"adam" and
// prefix+"scheduler". Float64 values are written in their shortest exact
// decimal form, so DecodeState returns them bit for bit.
func (s *State) Encode(prefix string) (radgen.Module, map[string]string, error) {
	if s.Adam == nil {
		return nil, nil, fmt.Errorf("%w: state without an Adam state", ErrConfig)
	}
	if err := s.Adam.validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	aj := adamJSON{Format: stateFormat, Beta1: s.Adam.Beta1, Beta2: s.Adam.Beta2, Eps: s.Adam.Eps,
		AMSGrad: s.Adam.AMSGrad, Decoupled: s.Adam.Decoupled, Groups: []groupJSON{}}
	var tensors moments
	add := func(kind string, p ParamState, x []float32) {
		if x != nil {
			tensors = append(tensors, moment{prefix + kind + p.Name, radgen.FromFloat32(x, slices.Clone(p.Shape)...)})
		}
	}
	for _, g := range s.Adam.Groups {
		gj := groupJSON{LR: g.LR, WeightDecay: g.WeightDecay, Params: []paramJSON{}}
		for _, p := range g.Params {
			shape := p.Shape
			if shape == nil {
				shape = []int{}
			}
			gj.Params = append(gj.Params, paramJSON{Name: p.Name, Shape: shape, Step: p.Step})
			add(tensorM, p, p.ExpAvg)
			add(tensorV, p, p.ExpAvgSq)
			add(tensorVMax, p, p.MaxExpAvgSq)
		}
		aj.Groups = append(aj.Groups, gj)
	}
	js, err := json.Marshal(aj)
	if err != nil {
		return nil, nil, fmt.Errorf("optim: encoding Adam state: %w", err)
	}
	meta := map[string]string{prefix + metaAdam: string(js)}
	if s.Scheduler != nil {
		js, err := json.Marshal(s.Scheduler)
		if err != nil {
			return nil, nil, fmt.Errorf("optim: encoding scheduler state: %w", err)
		}
		meta[prefix+metaScheduler] = string(js)
	}
	return tensors, meta, nil
}

// moments are a State's moment tensors as a radgen.Module.
type moments []moment

type moment struct {
	name string
	t    *radgen.Tensor
}

func (ms moments) VisitParams(visit func(string, *radgen.Tensor)) {
	for _, m := range ms {
		visit(m.name, m.t)
	}
}

// DecodeState reads a State written by Encode with the same prefix from an
// open weights file. Malformed contents return an error wrapping
// ErrFormat.
func DecodeState(f *radgen.Weights, prefix string) (*State, error) {
	meta := f.Metadata()
	raw, ok := meta[prefix+metaAdam]
	if !ok {
		return nil, fmt.Errorf("%w: no %q metadata", ErrFormat, prefix+metaAdam)
	}
	var aj adamJSON
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aj); err != nil {
		return nil, fmt.Errorf("%w: Adam state JSON: %v", ErrFormat, err)
	}
	if aj.Format != stateFormat {
		return nil, fmt.Errorf("%w: Adam state format %q, want %q", ErrFormat, aj.Format, stateFormat)
	}
	as := &AdamState{Beta1: aj.Beta1, Beta2: aj.Beta2, Eps: aj.Eps, AMSGrad: aj.AMSGrad, Decoupled: aj.Decoupled}
	used := 0
	read := func(kind string, p paramJSON) ([]float32, error) {
		name := prefix + kind + p.Name
		shape, ok := f.Shape(name)
		if !ok {
			return nil, nil
		}
		used++
		if !slices.Equal(shape, p.Shape) {
			return nil, fmt.Errorf("%w: tensor %q is %v, want %v", ErrFormat, name, shape, p.Shape)
		}
		x, _, err := f.Float32(name)
		if err != nil {
			return nil, fmt.Errorf("optim: reading %q: %w", name, err)
		}
		return x, nil
	}
	for _, gj := range aj.Groups {
		gs := GroupState{LR: gj.LR, WeightDecay: gj.WeightDecay}
		for _, pj := range gj.Params {
			if _, ok := shapeLen(pj.Shape); !ok {
				return nil, fmt.Errorf("%w: parameter %q: bad shape %v", ErrFormat, pj.Name, pj.Shape)
			}
			ps := ParamState{Name: pj.Name, Shape: slices.Clone(pj.Shape), Step: pj.Step}
			var err error
			if ps.ExpAvg, err = read(tensorM, pj); err != nil {
				return nil, err
			}
			if ps.ExpAvgSq, err = read(tensorV, pj); err != nil {
				return nil, err
			}
			if ps.MaxExpAvgSq, err = read(tensorVMax, pj); err != nil {
				return nil, err
			}
			gs.Params = append(gs.Params, ps)
		}
		as.Groups = append(as.Groups, gs)
	}
	if err := as.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	for _, name := range f.Names() {
		rest, ok := strings.CutPrefix(name, prefix)
		if ok && (strings.HasPrefix(rest, tensorM) || strings.HasPrefix(rest, tensorV) || strings.HasPrefix(rest, tensorVMax)) {
			used--
		}
	}
	if used != 0 {
		return nil, fmt.Errorf("%w: moment tensors for parameters the Adam state does not list", ErrFormat)
	}
	st := &State{Adam: as}
	if raw, ok := meta[prefix+metaScheduler]; ok {
		var ss SchedulerState
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ss); err != nil {
			return nil, fmt.Errorf("%w: scheduler state JSON: %v", ErrFormat, err)
		}
		st.Scheduler = &ss
	}
	return st, nil
}

// WriteTo writes s as a safetensors file of its own (Encode with an empty
// prefix). It implements io.WriterTo.
func (s *State) WriteTo(w io.Writer) (int64, error) {
	tensors, meta, err := s.Encode("")
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	err = radgen.SaveWeights(cw, tensors, meta)
	return cw.n, err
}

// ReadState reads a State written by WriteTo from r, which holds size
// bytes. A malformed file returns an error (wrapping ErrFormat or
// radgen.ErrWeights), never a panic; allocations are bounded by size.
func ReadState(r io.ReaderAt, size int64) (*State, error) {
	f, err := radgen.OpenWeights(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return DecodeState(f, "")
}

// MarshalBinary returns the bytes WriteTo writes.
func (s *State) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	if _, err := s.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
