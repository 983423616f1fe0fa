package arch

import (
	"testing"

	"github.com/radgen/radgen"
)

// A released workspace keeps its start arena, grown to a start's size, for
// the next decoding, but never past maxKeptStart: a larger start makes its
// results past that on the heap.
func TestReleaseKeepsSmallStartArenas(t *testing.T) {
	defer func(n int) { maxKeptStart = n }(maxKeptStart)
	maxKeptStart = 1 << 20
	// start runs two starts of a result of floats values on a workspace
	// and returns the bytes its start arena holds before and after the
	// workspace is released.
	start := func(floats int) (during, kept int) {
		ws := TakeWorkspace()
		g := radgen.NoGrad()
		for range 2 { // the first start grows the arena, the second fits in it
			ws.Start(g)
			x := radgen.Zeros(floats)
			g.Add(x, x).Data()
		}
		during = ws.start.Bytes()
		ws.Release(g)
		return during, ws.start.Bytes()
	}
	if _, kept := start(1000); kept < 4000 || kept > maxKeptStart {
		t.Fatalf("a released workspace keeps a start arena of %d bytes, want its start's (4000 and more)", kept)
	}
	during, kept := start(maxKeptStart) // 4 bytes a value
	if during > maxKeptStart || kept > maxKeptStart {
		t.Fatalf("a start of %d bytes holds a start arena of %d bytes, and leaves %d, over the %d a workspace keeps", 4*maxKeptStart, during, kept, maxKeptStart)
	}
}
