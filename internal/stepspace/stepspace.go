// Package stepspace keeps what a model's incremental decoding writes into
// between decodings: the arena of its steps' results and its
// self-attention caches, grown to a report's length, so that a model
// writing report after report neither grows new ones for each nor leaves
// the collector their garbage (whose collection would take the cores that
// the steps' products share). The library's architectures share one pool.
package stepspace

import (
	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/freelist"
	"github.com/radgen/radgen/mesh"
)

// Space is one decoding's arena and self-attention caches.
type Space struct {
	Arena *radgen.Arena
	self  []*mesh.KVCache
}

// spaces keeps the spaces of up to four finished decodings for the next
// ones; four because an arena holds two steps' results of a whole batch.
var spaces = freelist.New[Space](4)

// Get returns an idle space, or a new one.
func Get() *Space {
	if sp := spaces.Get(); sp != nil {
		return sp
	}
	return &Space{Arena: radgen.NewArena()}
}

// Caches returns n empty self-attention caches for rows decoding rows, the
// space's own reset, or new ones where it has fewer.
func (sp *Space) Caches(n, rows int) []*mesh.KVCache {
	for len(sp.self) < n {
		sp.self = append(sp.self, mesh.NewKVCache(rows))
	}
	for _, c := range sp.self[:n] {
		c.Reset(rows)
	}
	return sp.self[:n]
}

// Put gives sp back for later decodings, once the decoding whose steps g
// ran steps no more.
func (sp *Space) Put(g *radgen.Graph) {
	g.SetArena(nil)
	spaces.Put(sp)
}
