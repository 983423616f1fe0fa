package arch

import (
	"testing"

	"github.com/radgen/radgen"
)

// A released workspace keeps its start arena, grown to a start's size, for
// the next decoding, unless its start took more than maxKeptStart: then
// the next decoding starts from a new arena, which grows no buffer of that
// size.
func TestReleaseKeepsSmallStartArenas(t *testing.T) {
	defer func(n int) { maxKeptStart = n }(maxKeptStart)
	maxKeptStart = 1 << 20
	start := func(floats int) *Workspace {
		ws := TakeWorkspace()
		g := radgen.NoGrad()
		for range 2 { // the first start grows the arena, the second fits in it
			ws.Start(g)
			x := radgen.Zeros(floats)
			g.Add(x, x).Data()
		}
		ws.Release(g)
		return ws
	}
	small := start(1000)
	if got := small.start.Bytes(); got == 0 || got > maxKeptStart {
		t.Fatalf("a released workspace keeps a start arena of %d bytes, want its start's (4000 and more)", got)
	}
	large := start(maxKeptStart) // 4 bytes a value
	if got := large.start.Bytes(); got != 0 {
		t.Fatalf("a released workspace keeps a start arena of %d bytes, over the %d it may keep", got, maxKeptStart)
	}
}
