package arch

import (
	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/freelist"
	"github.com/radgen/radgen/mesh"
)

// Workspace is what an incremental decoding writes into between
// decodings: the arenas of its start's and its steps' results and its
// self-attention caches, grown to a report's length. A model that writes
// report after report takes a workspace when a decoding starts
// ([TakeWorkspace]) and
// gives it back when the decoding is released ([Workspace.Release]), so
// that it neither grows new buffers for each report nor leaves the
// collector their garbage. The built-in architectures and any other share
// one pool.
//
// A Workspace belongs to one decoding at a time.
type Workspace struct {
	// Arena holds the results of the decoding's steps on the CPU: set it
	// on the decoding's graph (radgen.Graph.SetArena) and call its Next at
	// the start of every step; a step's results then stay valid through
	// the next step.
	Arena *radgen.Arena
	start *radgen.Arena // the results of the decoding's start (see Start)
	self  []*mesh.KVCache
}

// workspaces keeps the workspaces of up to four finished decodings for
// the next ones; four because an arena holds two steps' results of a
// whole batch.
var workspaces = freelist.New[Workspace](4)

// TakeWorkspace returns an idle workspace from the pool, or a new one.
func TakeWorkspace() *Workspace {
	if ws := workspaces.Get(); ws != nil {
		return ws
	}
	return &Workspace{Arena: radgen.NewArena(), start: radgen.NewArena()}
}

// Start makes the decoding's graph g take the results of its start on the
// CPU from the workspace: the encoder's, the sources' projections, all
// that the steps read until the decoding ends. Call it before the start,
// and set Arena on g after it, before the first step. A decoding that
// takes the workspace later overwrites them. The workspace keeps up to
// maxKeptStart bytes of a start's results (one study's start at the
// paper's size); a larger start, a batch's, makes its results past that on
// the heap, where its encoder's intermediate results are freed while the
// decoding runs instead of being held, with every other result of the
// arena, until it ends.
func (ws *Workspace) Start(g *radgen.Graph) {
	ws.start.Reset()
	ws.start.SetLimit(maxKeptStart)
	g.SetArena(ws.start)
}

// Caches returns n empty self-attention caches (one per decoder layer) for
// rows decoding rows: the workspace's own, reset, or new ones where it has
// fewer.
func (ws *Workspace) Caches(n, rows int) []*mesh.KVCache {
	for len(ws.self) < n {
		ws.self = append(ws.self, mesh.NewKVCache(rows))
	}
	for _, c := range ws.self[:n] {
		c.Reset(rows)
	}
	return ws.self[:n]
}

// Release gives ws back to the pool for later decodings, once the
// decoding whose steps g ran steps no more; it takes the arena off g.
// Neither ws nor its caches may be used after it.
func (ws *Workspace) Release(g *radgen.Graph) {
	g.SetArena(nil)
	workspaces.Put(ws)
}

// maxKeptStart is the most bytes of a start's results that a workspace
// keeps: one study's start of the paper's R2Gen (98 patches, about 24 MB),
// with room to spare. It is no more because the results a workspace keeps
// live as long as the decoding, intermediate ones included: a batch of 16
// studies held 300 MB through its decoding, and the collector, pacing
// itself on the live heap, let the heap grow by as much again, which the
// next decodings paid for in page faults (10% of their time).
var maxKeptStart = 32 << 20 // a variable for the tests
