package testdevice

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/radgen/radgen"
)

// recorder is a testing.TB whose Fatal and Fatalf record the message and
// end the goroutine, as the testing package's do, without failing the
// test that owns it.
type recorder struct {
	testing.TB
	mu    sync.Mutex
	fatal []string
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own, so that a recorded Fatal
// ends only that goroutine, and returns what was recorded.
func (r *recorder) run(f func(testing.TB)) []string {
	var wg sync.WaitGroup
	wg.Go(func() { f(r) })
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.fatal)
}

func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want radgen.Device
	}{
		{"", radgen.CPU},
		{"cpu", radgen.CPU},
		{" Reference ", radgen.Reference()},
	} {
		t.Setenv("RADGEN_DEVICE", tc.env)
		r := &recorder{TB: t}
		var got radgen.Device
		if fatal := r.run(func(tb testing.TB) { got = Selected(tb) }); len(fatal) != 0 {
			t.Errorf("RADGEN_DEVICE=%q: failed: %q", tc.env, fatal)
		}
		if got != tc.want {
			t.Errorf("RADGEN_DEVICE=%q: %v, want %v", tc.env, got, tc.want)
		}
	}
	t.Setenv("RADGEN_DEVICE", "gpu")
	r := &recorder{TB: t}
	reached := false
	fatal := r.run(func(tb testing.TB) { Selected(tb); reached = true })
	if len(fatal) != 1 || !strings.Contains(fatal[0], "gpu") || reached {
		t.Errorf("RADGEN_DEVICE=gpu: failures %q, returned %v; want one failure naming it and no return", fatal, reached)
	}
}

func TestMoveAndHost(t *testing.T) {
	dev := radgen.Reference()
	l := radgen.NewLinear(3, 2, true, rand.New(rand.NewPCG(1, 2)))
	want := slices.Clone(l.Weight.Data())
	Move(t, l, dev)
	l.VisitParams(func(name string, x *radgen.Tensor) {
		if x.Device() != dev {
			t.Errorf("%s on %v after Move to %v", name, x.Device(), dev)
		}
	})
	h := Host(l.Weight)
	if h.Device() != radgen.CPU || !slices.Equal(h.Data(), want) {
		t.Errorf("Host of the moved weight: %v on %v, want %v on the CPU", h.Data(), h.Device(), want)
	}
	if Host(h) != h {
		t.Error("Host copied a tensor already on the CPU")
	}
	if Host(nil) != nil {
		t.Error("Host(nil) is not nil")
	}
}

func TestFailOnPanic(t *testing.T) {
	r := &recorder{TB: t}
	after := false
	fatal := r.run(func(tb testing.TB) {
		defer FailOnPanic(tb)
		panic("mesh: an op without a device kernel")
	})
	if len(fatal) != 1 || !strings.Contains(fatal[0], "mesh: an op without a device kernel") || !strings.Contains(fatal[0], "TestFailOnPanic") {
		t.Errorf("failures %q, want one with the panic's value and stack", fatal)
	}
	r = &recorder{TB: t}
	fatal = r.run(func(tb testing.TB) {
		defer FailOnPanic(tb)
		after = true
	})
	if len(fatal) != 0 || !after {
		t.Errorf("without a panic: failures %q, body ran %v", fatal, after)
	}
}
