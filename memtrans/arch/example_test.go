package arch_test

import (
	"fmt"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/arch"
)

// The library's own architectures are registered as any other: a
// configuration's type names its architecture, and a checkpoint records the
// name.
func ExampleRegistered() {
	cfg := memtrans.M2Tiny(100)
	name, err := arch.Name(cfg.EncoderDecoder)
	fmt.Println(arch.Registered(), name, err)
	d := cfg.EncoderDecoder.Dims()
	fmt.Println(d.Words, d.Vocab, d.BOS, d.Semantics)
	// Output:
	// [m2 metransformer r2gen] m2 <nil>
	// 100 102 100 m2
}
