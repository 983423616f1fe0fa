package memtrans_test

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/mesh"
)

// The other papers' models are configurations of R2Gen's: multi-view GCA
// adds one LayerNorm per decoder layer, Mem2Mem replaces the relational
// memory and weighs its bank penalty into the training loss.
func ExampleConfig_variants() {
	count := func(c memtrans.Config) int {
		m, err := memtrans.NewTransformer(c, 1)
		if err != nil {
			panic(err)
		}
		n := 0
		for _, p := range radgen.Trainable(m) {
			n += p.Tensor.Len()
		}
		return n
	}
	r2gen := memtrans.Tiny(100, 512)
	gca := r2gen
	gca.Routing = mesh.RoutingGCA
	m2m := r2gen
	m2m.Memory, m2m.Mem2MemPenalty = memtrans.MemoryMem2Mem, 0.1
	fmt.Println("R2Gen parameters:", count(r2gen))
	fmt.Println("GCA adds:", count(gca)-count(r2gen))
	fmt.Println("Mem2Mem valid:", m2m.Validate() == nil)
	// Output:
	// R2Gen parameters: 420132
	// GCA adds: 256
	// Mem2Mem valid: true
}
