package radgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

func randFloats(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// sameBits fails unless got (on any device) holds want's bits.
func sameBits(t *testing.T, what string, got *Tensor, want []float32) {
	t.Helper()
	g := got.To(CPU).Data()
	if len(g) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(g), len(want))
	}
	for i := range g {
		if math.Float32bits(g[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s [%d]: %g (%#x), want %g (%#x)", what, i, g[i], math.Float32bits(g[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// mustPanic fails unless f panics with a message starting "radgen: " and
// containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg, _ := r.(string)
		if r == nil || !strings.HasPrefix(msg, "radgen: ") || !strings.Contains(msg, want) {
			t.Fatalf("panic %v, want a radgen: message with %q", r, want)
		}
	}()
	f()
}

func adamTestConsts() map[string]AdamConsts {
	const lr, step = 1e-3, 3
	bc1, bc2 := 1-math.Pow(0.9, step), 1-math.Pow(0.999, step)
	base := AdamConsts{Beta1: 0.9, OneMinusB1: float32(1 - 0.9), Beta2: 0.999, OneMinusB2: float32(1 - 0.999),
		BC2Sqrt: float32(math.Sqrt(bc2)), Eps: 1e-8, NegStepLen: float32(-lr / bc1)}
	l2, ams, adamw := base, base, base
	l2.WD, l2.AMSGrad = 5e-4, true
	ams.AMSGrad = true
	adamw.Decoupled, adamw.Decay = true, float32(1-lr*0.01)
	return map[string]AdamConsts{"Adam": base, "AMSGrad": ams, "AdamW": adamw, "L2+AMSGrad": l2}
}

// AdamUpdate on the reference engine (the device path) equals the CPU's,
// bit for bit, for parameter, moments and running maximum, whole and by
// ranges.
func TestAdamUpdateMatchesReference(t *testing.T) {
	dev := Reference()
	rng := rand.New(rand.NewPCG(1, 2))
	shape := []int{7, 1301}
	n := shape[0] * shape[1]
	p, g, m := randFloats(rng, n, 0.1), randFloats(rng, n, 0.01), randFloats(rng, n, 0.01)
	v, vm := randFloats(rng, n, 1e-3), randFloats(rng, n, 1e-3)
	for i := range v {
		v[i], vm[i] = float32(math.Abs(float64(v[i]))), float32(math.Abs(float64(vm[i])))
	}
	for name, k := range adamTestConsts() {
		for _, ranged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ranged=%v", name, ranged), func(t *testing.T) {
				mk := func(x []float32) *Tensor { return FromFloat32(append([]float32(nil), x...), shape...) }
				cp, cg, cm, cv := mk(p), mk(g), mk(m), mk(v)
				dp, dg, dm, dv := cp.To(dev), cg.To(dev), cm.To(dev), cv.To(dev)
				var cvm, dvm *Tensor
				if k.AMSGrad {
					cvm = mk(vm)
					dvm = cvm.To(dev)
				}
				for range 3 {
					cp.AdamUpdate(cg, cm, cv, cvm, k)
					if !ranged {
						dp.AdamUpdate(dg, dm, dv, dvm, k)
						continue
					}
					for lo := 0; lo < n; lo += 1000 {
						dp.adamRange(lo, min(lo+1000, n), dg, dm, dv, dvm, k)
					}
				}
				if cp.Data()[0] == p[0] {
					t.Fatal("the CPU update left the parameter unchanged")
				}
				sameBits(t, "param", dp, cp.Data())
				sameBits(t, "exp_avg", dm, cm.Data())
				sameBits(t, "exp_avg_sq", dv, cv.Data())
				sameBits(t, "grad", dg, g)
				if k.AMSGrad {
					sameBits(t, "max_exp_avg_sq", dvm, cvm.Data())
				}
			})
		}
	}
}

func TestAdamUpdatePanics(t *testing.T) {
	k := AdamConsts{Beta1: 0.9, OneMinusB1: 0.1, Beta2: 0.999, OneMinusB2: 0.001, BC2Sqrt: 1, Eps: 1e-8, NegStepLen: -1e-3}
	ams := k
	ams.AMSGrad = true
	z := func(shape ...int) *Tensor { return Zeros(shape...) }
	p := z(2, 3)
	mustPanic(t, "nil", func() { p.AdamUpdate(nil, z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "nil", func() { (*Tensor)(nil).AdamUpdate(z(2, 3), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "one shape", func() { p.AdamUpdate(z(3, 2), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "one shape", func() { p.AdamUpdate(z(2, 3), z(6), z(2, 3), nil, k) })
	mustPanic(t, "one shape", func() { p.AdamUpdate(z(2, 3), z(2, 3), z(2, 3), z(2, 4), ams) })
	mustPanic(t, "vmax", func() { p.AdamUpdate(z(2, 3), z(2, 3), z(2, 3), nil, ams) })
	mustPanic(t, "vmax", func() { p.AdamUpdate(z(2, 3), z(2, 3), z(2, 3), z(2, 3), k) })
	mustPanic(t, "one device", func() { p.AdamUpdate(z(2, 3).To(Reference()), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "float64", func() { p.AdamUpdate(Zeros64(2, 3), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "float64", func() { Zeros64(2, 3).AdamUpdate(Zeros64(2, 3), Zeros64(2, 3), Zeros64(2, 3), nil, k) })
	mustPanic(t, "[4, 7)", func() { p.adamRange(4, 7, z(2, 3), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "[3, 2)", func() { p.adamRange(3, 2, z(2, 3), z(2, 3), z(2, 3), nil, k) })
	mustPanic(t, "[-1, 2)", func() { p.adamRange(-1, 2, z(2, 3), z(2, 3), z(2, 3), nil, k) })
	p.adamRange(6, 6, z(2, 3), z(2, 3), z(2, 3), nil, k) // an empty range is no error
}

// CopyFrom, ClampInPlace and ScaleInPlace on the reference engine equal
// the CPU's, bit for bit; float64 works on the CPU.
func TestInPlaceOpsMatchReference(t *testing.T) {
	dev := Reference()
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := randFloats(rng, 1000, 1), randFloats(rng, 1000, 1)
	x[7], x[8] = float32(math.NaN()), float32(math.Inf(-1))
	mk := func(v []float32, shape ...int) *Tensor { return FromFloat32(append([]float32(nil), v...), shape...) }

	c, d := mk(x, 1000), mk(x, 1000).To(dev)
	c.ClampInPlace(0.1)
	d.ClampInPlace(0.1)
	sameBits(t, "clamp", d, c.Data())
	if got := c.Data(); got[8] != -0.1 || got[7] == got[7] || max(got[0], -got[0]) > 0.1 {
		t.Fatalf("clamped %v", got[:9])
	}
	c.ScaleInPlace(1.7)
	d.ScaleInPlace(1.7)
	sameBits(t, "scale", d, c.Data())
	if want := float32(x[0]) * float32(1.7); math.Abs(float64(x[0])) < 0.1 && c.Data()[0] != want {
		t.Fatalf("scaled %g, want %g", c.Data()[0], want)
	}
	// CopyFrom between shapes of one length.
	c.CopyFrom(mk(y, 10, 100))
	d.CopyFrom(mk(y, 10, 100).To(dev))
	sameBits(t, "copy", c, y)
	sameBits(t, "copy", d, y)

	a := FromFloat64([]float64{-3, 0.5, math.NaN()}, 3)
	a.ClampInPlace(1)
	a.ScaleInPlace(0.25)
	if got := a.Data64(); got[0] != -0.25 || got[1] != 0.125 || got[2] == got[2] {
		t.Fatalf("float64 clamp and scale: %v", got)
	}
	a.CopyFrom(FromFloat64([]float64{1, 2, 3}, 1, 3))
	if got := a.Data64(); got[2] != 3 {
		t.Fatalf("float64 copy: %v", got)
	}
	Zeros(0).To(dev).CopyFrom(Zeros(0, 4).To(dev)) // empty tensors are no error
}

func TestInPlaceOpsPanic(t *testing.T) {
	mustPanic(t, "as many elements", func() { Zeros(3).CopyFrom(Zeros(4)) })
	mustPanic(t, "one device", func() { Zeros(3).CopyFrom(Zeros(3).To(Reference())) })
	mustPanic(t, "element type", func() { Zeros(3).CopyFrom(Zeros64(3)) })
	mustPanic(t, "nil", func() { Zeros(3).CopyFrom(nil) })
	mustPanic(t, "bound", func() { Zeros(3).ClampInPlace(-1) })
	mustPanic(t, "bound", func() { Zeros(3).ClampInPlace(math.NaN()) })
	mustPanic(t, "nil", func() { (*Tensor)(nil).ScaleInPlace(2) })
}

func TestDeviceLiveBytes(t *testing.T) {
	if got := CPU.LiveBytes(); got != 0 {
		t.Fatalf("CPU.LiveBytes() = %d, want 0", got)
	}
	dev := Reference()
	settle := func() int64 { return testutil.Settled(dev.LiveBytes) } // the cleanups of earlier garbage run
	before := settle()
	func() {
		x := Zeros(250).To(dev)
		if got := dev.LiveBytes() - before; got != 1000 {
			t.Fatalf("a tensor of 250 floats on %v adds %d live bytes, want 1000", dev, got)
		}
		runtime.KeepAlive(x)
	}()
	if got := settle() - before; got != 0 {
		t.Fatalf("%d live bytes once the tensor is collected, want 0", got)
	}
}
