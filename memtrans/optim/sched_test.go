package optim

import (
	"errors"
	"testing"

	"github.com/radgen/radgen"
)

func twoGroups(t *testing.T, lr0, lr1 float64) *Adam {
	t.Helper()
	return newAdam(t, []Group{
		{Params: []radgen.Named{param("visual_extractor.w", []float32{1}, nil)}, LR: lr0},
		{Params: []radgen.Named{param("encoder.w", []float32{1}, nil)}, LR: lr1},
	})
}

func TestStepLRIU(t *testing.T) {
	// R2Gen on IU X-Ray: StepLR(step_size=50, gamma=0.1) stepped per epoch.
	a := twoGroups(t, 5e-5, 1e-4)
	s, err := NewStepLR(a, 50, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	// Values as Python computes torch's chainable form: 1e-4*0.1 = 1e-05,
	// 1e-4*0.1*0.1 = 1.0000000000000002e-06.
	want := map[int][2]float64{
		0:   {5e-5, 1e-4},
		49:  {5e-5, 1e-4},
		50:  {5e-06, 1e-05},
		99:  {5e-06, 1e-05},
		100: {5.000000000000001e-07, 1.0000000000000002e-06},
	}
	for epoch := 0; epoch <= 100; epoch++ {
		if epoch > 0 {
			s.Step()
		}
		if s.LastEpoch() != epoch {
			t.Fatalf("position %d, want %d", s.LastEpoch(), epoch)
		}
		if w, ok := want[epoch]; ok {
			if a.LR(0) != w[0] || a.LR(1) != w[1] {
				t.Errorf("epoch %d: lr %v %v, want %v %v", epoch, a.LR(0), a.LR(1), w[0], w[1])
			}
			if lr := s.LastLR(); lr[0] != w[0] || lr[1] != w[1] {
				t.Errorf("epoch %d: LastLR %v", epoch, lr)
			}
		}
	}
}

func TestStepLRMIMIC(t *testing.T) {
	// MIMIC-CXR: StepLR(1, 0.8): 1e-4·0.8^epoch, chained as torch does.
	a := twoGroups(t, 5e-5, 1e-4)
	s, err := NewStepLR(a, 1, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Step()
	}
	if a.LR(1) != 5.120000000000001e-05 { // Python: 1e-4*0.8*0.8*0.8
		t.Errorf("lr after 3 epochs %v, want 5.120000000000001e-05", a.LR(1))
	}
	if _, err := NewStepLR(a, 0, 0.1); !errors.Is(err, ErrConfig) {
		t.Errorf("step size 0: %v", err)
	}
}

func TestWarmupLR(t *testing.T) {
	// M²: d_model 512, warmup 10000, Adam(lr=1). Values from Python:
	// 512**-.5 * min(s**-.5, s*10000**-1.5).
	a := twoGroups(t, 1, 1)
	s, err := NewWarmupLR(a, 512, 10000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{
		0:     4.4194173824159224e-08,
		4999:  0.00022097086912079613,
		9999:  0.00044194173824159226, // the peak, s = warmup
		39999: 0.00022097086912079613,
	}
	f := warmupFactor(512, 10000)
	for epoch := 0; epoch < 40000; epoch++ {
		if epoch > 0 {
			s.Step()
		}
		if w, ok := want[epoch]; ok {
			if a.LR(0) != w || a.LR(1) != a.LR(0) {
				t.Errorf("step %d: lr %v %v, want %v", epoch, a.LR(0), a.LR(1), w)
			}
		}
		if epoch == 5000 && !(f(5000) > f(4999) && f(10000) < f(9999)) {
			t.Errorf("warm-up is not increasing then decreasing")
		}
	}
	if _, err := NewWarmupLR(a, 0, 10); !errors.Is(err, ErrConfig) {
		t.Errorf("d_model 0: %v", err)
	}
}

func TestLambdaLRUsesBaseRates(t *testing.T) {
	a := twoGroups(t, 2, 4)
	s := NewLambdaLR(a, func(e int) float64 { return 1 / float64(e+1) })
	if a.LR(0) != 2 || a.LR(1) != 4 {
		t.Fatalf("initial rates %v %v", a.LR(0), a.LR(1))
	}
	s.Step()
	s.Step()
	if a.LR(0) != 2.0/3 || a.LR(1) != 4.0/3 {
		t.Errorf("rates %v %v, want 2/3 and 4/3", a.LR(0), a.LR(1))
	}
}

func TestSchedulerStateRoundTrip(t *testing.T) {
	a := twoGroups(t, 5e-5, 1e-4)
	s, _ := NewStepLR(a, 2, 0.5)
	for range 5 {
		s.Step()
	}
	st := s.State()

	b := twoGroups(t, 5e-5, 1e-4)
	r, _ := NewStepLR(b, 7, 0.9) // hyperparameters come from the state
	if err := r.SetState(st); err != nil {
		t.Fatal(err)
	}
	if b.LR(0) != a.LR(0) || b.LR(1) != a.LR(1) || r.LastEpoch() != 5 {
		t.Fatalf("restored rates %v %v at %d, want %v %v at 5", b.LR(0), b.LR(1), r.LastEpoch(), a.LR(0), a.LR(1))
	}
	for range 4 {
		s.Step()
		r.Step()
		if a.LR(0) != b.LR(0) || a.LR(1) != b.LR(1) {
			t.Fatalf("resumed schedule diverged at %d: %v vs %v", s.LastEpoch(), b.LR(1), a.LR(1))
		}
	}

	l := NewLambdaLR(b, func(int) float64 { return 1 })
	if err := l.SetState(st); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("StepLR state into LambdaLR: %v", err)
	}
	one := newAdam(t, []Group{{LR: 1}})
	s1, _ := NewStepLR(one, 1, 0.5)
	if err := s1.SetState(st); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("two-group state into one group: %v", err)
	}
	bad := *st
	bad.LastEpoch = -1
	if err := r.SetState(&bad); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("negative position: %v", err)
	}
}
