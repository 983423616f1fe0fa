package memtrans_test

import (
	"errors"
	"fmt"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// A model decodes on the first GPU when one is there, and on the CPU
// otherwise. ReferenceDevice runs the GPU's code path on the CPU.
func ExampleWithDevice() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal in size.", "No effusion."})
	if err != nil {
		panic(err)
	}
	cfg := memtrans.TinyConfig(tok.Len() + 1)
	m, err := memtrans.New(cfg, tok, 1, memtrans.WithDevice(memtrans.CUDA(0)))
	if errors.Is(err, memtrans.ErrDevice) {
		m, err = memtrans.New(cfg, tok, 1) // no GPU here
	}
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ref, err := memtrans.New(cfg, tok, 1, memtrans.WithDevice(memtrans.ReferenceDevice()))
	if err != nil {
		panic(err)
	}
	defer ref.Close()
	fmt.Println(ref.Device())
	// Output: reference
}
