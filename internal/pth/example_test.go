package pth_test

import (
	"bytes"
	"fmt"

	"github.com/radgen/radgen/internal/pth"
)

// Example writes an R2Gen-style checkpoint and reads it back, as
// torch.load(path)['state_dict'] would.
func Example() {
	var buf bytes.Buffer
	err := pth.Write(&buf, []pth.Tensor{
		{Name: "encoder_decoder.logit.weight", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "encoder_decoder.logit.bias", Shape: []int{2}, Data: []float32{-1, 1}},
	}, &pth.Meta{Epoch: 15, MonitorBest: 0.165})
	if err != nil {
		panic(err)
	}
	f, err := pth.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		panic(err)
	}
	epoch, _ := f.Epoch()
	best, _ := f.MonitorBest()
	fmt.Println(f.Keys(), epoch, best)
	for _, name := range f.Names() {
		v, shape, err := f.Float32(name)
		if err != nil {
			panic(err)
		}
		fmt.Println(name, shape, v)
	}
	// Output:
	// [epoch state_dict monitor_best] 15 0.165
	// encoder_decoder.logit.weight [2 3] [1 2 3 4 5 6]
	// encoder_decoder.logit.bias [2] [-1 1]
}
