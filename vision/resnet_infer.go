package vision

// The inference path of ResNet: the folded network, each convolution with
// its batch norm folded in and prepared once (radgen.PreparedConv2d), run
// on channels-last activations (B, H, W, C) on a graph that records
// nothing. On the CPU in float32 every convolution is then one fused
// product with packed weights, its bias and ReLU applied in registers and a
// residual block's last one starting from the shortcut, 3×3, stride-1 ones
// by Winograd's F(2×2, 3×3) (see radgen's ops_prepared.go); in float64 the
// same ops run their plain equivalents.
//
// The graph takes its results from an arena (radgen.Arena) drawn from a
// free list, so that concurrent forwards never share one and a steady
// stream of them allocates only its result, the feature map copied out.
// Each residual block is a step of the arena: a block reads only the
// output of the one before, so the arena's two halves hold every buffer
// the network needs.

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/freelist"
)

// arenas keeps idle arenas: a stack of up to one per core, shared by all
// cores, which a garbage collection does not empty and which gives back the
// arena used last (the warmest), and the rest in a sync.Pool.
var arenas = struct {
	stack *freelist.Stack[radgen.Arena]
	pool  sync.Pool
}{stack: freelist.NewStack[radgen.Arena](runtime.GOMAXPROCS(0))}

func getArena() *radgen.Arena {
	if a := arenas.stack.Get(); a != nil {
		return a
	}
	if a, ok := arenas.pool.Get().(*radgen.Arena); ok {
		return a
	}
	return radgen.NewArena()
}

func putArena(a *radgen.Arena) {
	if !arenas.stack.Put(a) {
		arenas.pool.Put(a)
	}
}

// forward runs the folded network on images x [B, 3, H, W] and returns the
// feature map [B, C, h, w], in storage of its own.
func (f *foldedNet) forward(ctx context.Context, x *radgen.Tensor) (*radgen.Tensor, error) {
	if x.Is64() != f.is64 {
		panic(fmt.Sprintf("vision: ResNet input %v for weights of another element type", x))
	}
	a := getArena()
	ga := radgen.NoGrad()
	ga.SetArena(a)
	defer func() {
		ga.SetArena(nil) // the pooled arena keeps no graph
		putArena(a)
	}()

	// Stem: conv1 + bn1 + ReLU, then the max pool, on the images channels
	// last.
	a.Next()
	y := f.stem.Forward(ga, ga.Permute(x, 0, 2, 3, 1), nil, true)
	y = ga.MaxPool2dNHWC(y, radgen.PoolSquare(3, 2, 1))
	for i := range f.blocks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a.Next()
		y = f.blocks[i].forward(ga, y)
	}
	// The feature map, channels first, copied out of the arena (Permute
	// returns a view where the grid is 1×1).
	return ga.Permute(y, 0, 3, 1, 2).Clone(), nil
}

// forward runs the block on x (B, h, w, C): ReLU(F(x) + shortcut(x)), each
// convolution but the last with its ReLU, the last adding the shortcut.
func (b *foldedBlock) forward(g *radgen.Graph, x *radgen.Tensor) *radgen.Tensor {
	sc := x
	if b.down != nil {
		sc = b.down.Forward(g, x, nil, false)
	}
	y := x
	last := len(b.conv) - 1
	for _, c := range b.conv[:last] {
		y = c.Forward(g, y, nil, true)
	}
	return b.conv[last].Forward(g, y, sc, true)
}
