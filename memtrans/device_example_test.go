package memtrans_test

import (
	"context"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// A model runs on the first GPU when one can be used, and on the CPU
// otherwise; radgen.Reference() runs the device code path on the CPU and
// writes what the CPU writes.
func ExampleWithDevice() {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"The heart is normal in size.", "No effusion."})
	if err != nil {
		panic(err)
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	dev := radgen.CUDA(0)
	if dev.Check() != nil {
		dev = radgen.CPU // no GPU here
	}
	m, err := memtrans.New(cfg, tok, 1, memtrans.WithDevice(dev))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ref, err := memtrans.New(cfg, tok, 1, memtrans.WithDevice(radgen.Reference()))
	if err != nil {
		panic(err)
	}
	defer ref.Close()
	feats := radgen.Zeros(1, cfg.PatchesPerStudy(), cfg.Vision.OutChannels())
	a, err := m.GenerateFeatures(context.Background(), []string{"s1"}, feats, memtrans.WithMaxLength(8))
	if err != nil {
		panic(err)
	}
	b, err := ref.GenerateFeatures(context.Background(), []string{"s1"}, feats, memtrans.WithMaxLength(8))
	if err != nil {
		panic(err)
	}
	fmt.Println(ref.Device(), a[0].Text == b[0].Text)
	// Output: reference true
}
