package optim

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
)

// tinyNet is a two-layer model with a visual-extractor-named layer, so
// that it trains in R2Gen's two parameter groups.
type tinyNet struct {
	ve, ed *radgen.Linear
}

func newTinyNet(seed uint64) *tinyNet {
	rng := rand.New(rand.NewPCG(seed, 1))
	return &tinyNet{ve: radgen.NewLinear(6, 5, true, rng), ed: radgen.NewLinear(5, 3, true, rng)}
}

func (n *tinyNet) VisitParams(visit func(string, *radgen.Tensor)) {
	n.ve.VisitParams(radgen.Prefixed("visual_extractor.fc.", visit))
	n.ed.VisitParams(radgen.Prefixed("encoder.fc.", visit))
}

// trainStep runs forward and backward on the batch of step k (a function
// of k alone, so that a resumed run sees the same data), clips like R2Gen
// and steps the optimiser.
func trainStep(t *testing.T, n *tinyNet, opt *Adam, k int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(k), 99))
	x := make([]float32, 4*6)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	g := radgen.NewGraph()
	h := g.Tanh(n.ve.Forward(g, radgen.FromFloat32(x, 4, 6)))
	y := n.ed.Forward(g, h)
	loss := g.Sum(g.Mul(y, y))
	opt.ZeroGrad()
	if err := g.Backward(loss); err != nil {
		t.Fatal(err)
	}
	ClipGradValue(opt.Params(), 0.1)
	opt.Step()
}

func newRun(t *testing.T, seed uint64) (*tinyNet, *Adam, *StepLR) {
	t.Helper()
	n := newTinyNet(seed)
	opt := newAdam(t, R2GenGroups(radgen.Trainable(n), 5e-3, 1e-2, 5e-5), WithAMSGrad(true))
	s, err := NewStepLR(opt, 2, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	return n, opt, s
}

// TestResumeEqualsUninterrupted trains 8 steps straight, and 8 steps with
// a save after step 3 and a restore into a fresh model, optimiser and
// scheduler (through the bytes of a safetensors file); the parameters and
// optimiser states must be equal bit for bit.
func TestResumeEqualsUninterrupted(t *testing.T) {
	const total, cut = 8, 3
	straight, so, ss := newRun(t, 5)
	for k := range total {
		trainStep(t, straight, so, k)
		ss.Step()
	}

	first, fo, fs := newRun(t, 5)
	for k := range cut {
		trainStep(t, first, fo, k)
		fs.Step()
	}
	file, err := (&State{Adam: fo.State(), Scheduler: fs.State()}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	weights := radgen.StateDict(first, "")

	// A fresh process: other initial weights, default optimiser settings.
	resumed, ro, rs := newRun(t, 77)
	if err := radgen.LoadParams(resumed, weights, ""); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.SetState(st.Adam); err != nil {
		t.Fatal(err)
	}
	if err := rs.SetState(st.Scheduler); err != nil {
		t.Fatal(err)
	}
	for k := cut; k < total; k++ {
		trainStep(t, resumed, ro, k)
		rs.Step()
	}

	want, got := radgen.Params(straight), radgen.Params(resumed)
	for i := range want {
		if !slices.Equal(want[i].Tensor.Data(), got[i].Tensor.Data()) {
			t.Errorf("%s differs after resuming", want[i].Name)
		}
	}
	if !reflect.DeepEqual(so.State(), ro.State()) {
		t.Errorf("optimiser states differ after resuming")
	}
	if !reflect.DeepEqual(ss.State(), rs.State()) {
		t.Errorf("scheduler states differ: %+v vs %+v", ss.State(), rs.State())
	}
	// The run did train: the straight run moved away from its start.
	if init := radgen.Params(newTinyNet(5)); slices.Equal(init[0].Tensor.Data(), want[0].Tensor.Data()) {
		t.Errorf("training did not change the weights")
	}
}

func TestStateFileRoundTripIsExact(t *testing.T) {
	n, opt, s := newRun(t, 1)
	for k := range 3 {
		trainStep(t, n, opt, k)
		s.Step()
	}
	opt.SetLR(1, 0.1+0.2) // a rate with a long decimal expansion
	st := &State{Adam: opt.State(), Scheduler: s.State()}
	var buf bytes.Buffer
	nw, err := st.WriteTo(&buf)
	if err != nil || nw != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d, %v (buffer %d)", nw, err, buf.Len())
	}
	back, err := ReadState(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, back) {
		t.Fatalf("round trip changed the state:\n%+v\n%+v", st.Adam.Groups[1], back.Adam.Groups[1])
	}
	if back.Adam.Groups[1].LR != 0.1+0.2 {
		t.Errorf("lr %v, want %v", back.Adam.Groups[1].LR, 0.1+0.2)
	}
}

// TestEncodeBesideWeights stores the state with a prefix in the same file
// as the model's weights, as a checkpoint writer does.
func TestEncodeBesideWeights(t *testing.T) {
	n, opt, _ := newRun(t, 2)
	trainStep(t, n, opt, 0)
	moments, meta, err := (&State{Adam: opt.State()}).Encode("optim.")
	if err != nil {
		t.Fatal(err)
	}
	meta["config"] = "{}"
	var buf bytes.Buffer
	if err := radgen.SaveWeights(&buf, joined{n, moments}, meta); err != nil {
		t.Fatal(err)
	}
	f, err := radgen.OpenWeights(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(f, "optim.")
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduler != nil || !reflect.DeepEqual(st.Adam, opt.State()) {
		t.Errorf("decoded state differs")
	}
	if _, err := DecodeState(f, "other."); !errors.Is(err, ErrFormat) {
		t.Errorf("wrong prefix: %v", err)
	}
}

func TestSetStateMismatch(t *testing.T) {
	n, opt, _ := newRun(t, 3)
	trainStep(t, n, opt, 0)
	good := opt.State()
	before := opt.State()

	mutate := map[string]func(s *AdamState){
		"group count": func(s *AdamState) { s.Groups = s.Groups[:1] },
		"param count": func(s *AdamState) { s.Groups[1].Params = s.Groups[1].Params[1:] },
		"name":        func(s *AdamState) { s.Groups[1].Params[0].Name = "decoder.fc.weight" },
		"order":       func(s *AdamState) { ps := s.Groups[1].Params; ps[0], ps[1] = ps[1], ps[0] },
		"shape":       func(s *AdamState) { s.Groups[0].Params[1].Shape = []int{4} },
		"moment len":  func(s *AdamState) { s.Groups[0].Params[0].ExpAvg = s.Groups[0].Params[0].ExpAvg[1:] },
		"no max":      func(s *AdamState) { s.Groups[0].Params[0].MaxExpAvgSq = nil },
		"no moments":  func(s *AdamState) { s.Groups[0].Params[0].ExpAvg = nil },
		"negative":    func(s *AdamState) { s.Groups[0].Params[0].Step = -1 },
		"beta":        func(s *AdamState) { s.Beta2 = 1 },
		"lr":          func(s *AdamState) { s.Groups[0].LR = -1 },
		"duplicate":   func(s *AdamState) { s.Groups[0].Params[1].Name = s.Groups[0].Params[0].Name },
		"max, no ams": func(s *AdamState) { s.AMSGrad = false },
	}
	for name, f := range mutate {
		s := opt.State()
		f(s)
		if err := opt.SetState(s); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("%s: error %v, want ErrStateMismatch", name, err)
		}
		if !reflect.DeepEqual(opt.State(), before) {
			t.Fatalf("%s: a failed SetState changed the optimiser", name)
		}
	}
	if err := opt.SetState(good); err != nil {
		t.Errorf("the optimiser's own state: %v", err)
	}
	if err := opt.SetState(nil); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("nil state: %v", err)
	}
}

func TestReadStateRejectsMalformed(t *testing.T) {
	n, opt, _ := newRun(t, 4)
	trainStep(t, n, opt, 0)
	moments, meta, err := (&State{Adam: opt.State()}).Encode("")
	if err != nil {
		t.Fatal(err)
	}
	var tensors []safetensors.Tensor
	moments.VisitParams(func(name string, x *radgen.Tensor) {
		tensors = append(tensors, safetensors.Tensor{Name: name, Dtype: safetensors.F32, Shape: x.Shape(), Data: safetensors.F32Bytes(x.Data())})
	})
	write := func(ts []safetensors.Tensor, m map[string]string) []byte {
		var b bytes.Buffer
		if err := safetensors.Write(&b, ts, m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	cases := map[string][]byte{
		"empty":       nil,
		"garbage":     []byte("not a safetensors file at all"),
		"no metadata": write(tensors, nil),
		"bad json":    write(tensors, map[string]string{"adam": "{"}),
		"unknown field": write(tensors, map[string]string{
			"adam": `{"format":"radgen.optim/1","beta1":0.9,"beta2":0.999,"eps":1e-8,"groups":[],"extra":1}`}),
		"old format":     write(tensors, map[string]string{"adam": `{"format":"radgen.optim/0","groups":[]}`}),
		"missing moment": write(tensors[1:], meta),
		"stray tensor": write(append(slices.Clone(tensors), safetensors.Tensor{Name: "exp_avg.nobody",
			Dtype: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)}), meta),
		"bad scheduler": write(tensors, map[string]string{"adam": meta["adam"], "scheduler": "[]"}),
	}
	wrongShape := slices.Clone(tensors)
	wrongShape[0].Shape = []int{len(wrongShape[0].Data) / 4}
	cases["moment shape"] = write(wrongShape, meta)
	for name, b := range cases {
		if _, err := ReadState(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v, want ErrFormat", name, err)
		}
	}
	if _, err := ReadState(bytes.NewReader(write(tensors, meta)), int64(len(write(tensors, meta)))); err != nil {
		t.Errorf("the valid file: %v", err)
	}
}

// FuzzReadState feeds arbitrary bytes to ReadState: it must not panic, and
// whatever it accepts must encode and decode to itself.
func FuzzReadState(f *testing.F) {
	n := newTinyNet(1)
	opt, err := NewAdam(R2GenGroups(radgen.Trainable(n), 1e-3, 1e-3, 0), WithAMSGrad(true))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range opt.Params() {
		p.Tensor.SetGrad(radgen.FromFloat32(slices.Repeat([]float32{0.01}, p.Tensor.Len()), p.Tensor.Shape()...))
	}
	opt.Step()
	s, _ := NewStepLR(opt, 1, 0.5)
	for _, st := range []*State{{Adam: opt.State()}, {Adam: opt.State(), Scheduler: s.State()}, {Adam: &AdamState{Beta1: 0.9, Beta2: 0.99}}} {
		b, err := st.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ReadState(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		enc, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("an accepted state does not encode: %v", err)
		}
		back, err := ReadState(bytes.NewReader(enc), int64(len(enc)))
		if err != nil {
			t.Fatalf("a re-encoded state does not decode: %v", err)
		}
		enc2, err := back.MarshalBinary()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %v", err)
		}
	})
}

// TestSetStateNewBetas restores a fresh state with other betas into an
// optimiser that has already stepped: the next step must use the restored
// betas' bias corrections, not cached ones.
func TestSetStateNewBetas(t *testing.T) {
	px := param("w", []float32{1, 2}, []float32{0.3, -0.2})
	py := param("w", []float32{1, 2}, []float32{0.3, -0.2})
	x := newAdam(t, []Group{{Params: []radgen.Named{px}, LR: 0.1}})
	y := newAdam(t, []Group{{Params: []radgen.Named{py}, LR: 0.1}}, WithBetas(0.5, 0.9))
	fresh := y.State()
	x.Step()
	copy(px.Tensor.Data(), []float32{1, 2})
	if err := x.SetState(fresh); err != nil {
		t.Fatal(err)
	}
	x.Step()
	y.Step()
	if !slices.Equal(px.Tensor.Data(), py.Tensor.Data()) {
		t.Errorf("after restoring betas (0.5, 0.9): %v, want %v", px.Tensor.Data(), py.Tensor.Data())
	}
	if st := x.State(); st.Beta1 != 0.5 || st.Beta2 != 0.9 || st.Groups[0].Params[0].Step != 1 {
		t.Errorf("restored state %+v", st)
	}
}

// joined visits the tensors of several modules.
type joined []radgen.Module

func (j joined) VisitParams(visit func(string, *radgen.Tensor)) {
	for _, m := range j {
		m.VisitParams(visit)
	}
}
