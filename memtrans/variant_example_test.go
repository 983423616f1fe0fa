package memtrans_test

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/mesh"
)

// The other papers' models are configurations of R2Gen's: multi-view GCA
// adds one LayerNorm per decoder layer, Mem2Mem replaces the relational
// memory and weighs its bank penalty into the training loss.
func ExampleConfig_variants() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal in size.", "no pleural effusion."})
	if err != nil {
		panic(err)
	}
	count := func(c memtrans.ModelConfig) int {
		m, err := memtrans.New(c, tok, 1)
		if err != nil {
			panic(err)
		}
		defer m.Close()
		n := 0
		for _, p := range radgen.Trainable(m.EncoderDecoder()) {
			n += p.Tensor.Len()
		}
		return n
	}
	base := memtrans.R2GenTiny(tok.Len() + 1)
	// The variants are fields of R2Gen's configuration.
	r2 := base.EncoderDecoder.(r2gen.Config)
	gca, m2m := base, base
	withGCA, withM2M := r2, r2
	withGCA.Routing = mesh.RoutingGCA
	withM2M.Memory, withM2M.Mem2MemPenalty = r2gen.MemoryMem2Mem, 0.1
	gca.EncoderDecoder, m2m.EncoderDecoder = withGCA, withM2M
	fmt.Println("R2Gen parameters:", count(base))
	fmt.Println("GCA adds:", count(gca)-count(base))
	fmt.Println("Mem2Mem valid:", m2m.Validate() == nil)
	// Output:
	// R2Gen parameters: 408780
	// GCA adds: 256
	// Mem2Mem valid: true
}
