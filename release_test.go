package radgen

import (
	"github.com/radgen/radgen/internal/testutil"
	"math/rand/v2"
	"testing"
)

// Release gives a module's device memory back at once, whatever the
// garbage collector does, and leaves its CPU tensors alone.
func TestReleaseFreesDeviceMemory(t *testing.T) {
	dev := Reference()
	// Other tests' device buffers are freed by cleanups after a
	// collection, which may run at any time: start from a settled count.
	before := testutil.Settled(func() int64 { return liveBytes(dev) })
	l := NewLinear(64, 32, true, rand.New(rand.NewPCG(1, 2)))
	if err := ToDevice(l, dev); err != nil {
		t.Fatal(err)
	}
	moved := liveBytes(dev) - before
	if want := int64(4 * (64*32 + 32)); moved < want {
		t.Fatalf("moving the layer added %d live bytes, want at least %d", moved, want)
	}
	cpu := NewLinear(4, 4, false, rand.New(rand.NewPCG(3, 4)))
	Release(l)
	Release(cpu)
	if got := liveBytes(dev) - before; got != 0 {
		t.Errorf("%d live bytes left on %v after Release", got, dev)
	}
	if l.Weight.Device() != CPU || l.Weight.Len() != 0 {
		t.Errorf("released weight is %v of %d values, want an empty CPU tensor", l.Weight.Device(), l.Weight.Len())
	}
	if cpu.Weight.Len() != 16 {
		t.Errorf("Release changed a CPU tensor: %d values", cpu.Weight.Len())
	}
	Release(l) // twice is harmless
	t.Logf("moved %d bytes to %v; Release gave them back", moved, dev)
}
