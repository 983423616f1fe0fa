package optim_test

import (
	"bytes"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/optim"
)

// Example fits θ to minimise (θ − 3)² with R2Gen's optimiser settings
// (Adam, amsgrad, L2 weight decay, gradient clipping by value), then saves
// and restores the optimiser's state.
func Example() {
	theta := radgen.NewParam(1)
	target := radgen.FromFloat32([]float32{3}, 1)
	params := []radgen.Named{{Name: "theta", Tensor: theta}}

	opt, err := optim.NewAdam([]optim.Group{{Params: params, LR: 0.05, WeightDecay: 5e-5}}, optim.WithAMSGrad(true))
	if err != nil {
		panic(err)
	}
	for range 500 {
		g := radgen.NewGraph()
		d := g.Sub(theta, target)
		opt.ZeroGrad()
		if err := g.Backward(g.Sum(g.Mul(d, d))); err != nil {
			panic(err)
		}
		optim.ClipGradValue(opt.Params(), 0.1)
		opt.Step()
	}
	fmt.Printf("θ = %.2f\n", theta.Data()[0])

	var file bytes.Buffer
	if _, err := (&optim.State{Adam: opt.State()}).WriteTo(&file); err != nil {
		panic(err)
	}
	st, err := optim.ReadState(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		panic(err)
	}
	fmt.Println("steps taken:", st.Adam.Groups[0].Params[0].Step)
	fmt.Println("restored:", opt.SetState(st.Adam) == nil)
	// Output:
	// θ = 3.00
	// steps taken: 500
	// restored: true
}

// ExampleNewStepLR shows R2Gen's IU X-Ray schedule: the learning rates of
// both parameter groups fall tenfold every 50 epochs.
func ExampleNewStepLR() {
	ve := radgen.NewParam(2)
	ed := radgen.NewParam(2)
	groups := optim.R2GenGroups([]radgen.Named{{Name: "visual_extractor.w", Tensor: ve}, {Name: "encoder.w", Tensor: ed}}, 5e-5, 1e-4, 5e-5)
	opt, err := optim.NewAdam(groups, optim.WithAMSGrad(true))
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewStepLR(opt, 50, 0.1)
	if err != nil {
		panic(err)
	}
	for epoch := 1; epoch <= 100; epoch++ {
		// ... train one epoch, validate ...
		sched.Step()
		if epoch%50 == 49 || epoch%50 == 0 {
			fmt.Printf("after epoch %d: %.0e %.0e\n", epoch, opt.LR(0), opt.LR(1))
		}
	}
	// Output:
	// after epoch 49: 5e-05 1e-04
	// after epoch 50: 5e-06 1e-05
	// after epoch 99: 5e-06 1e-05
	// after epoch 100: 5e-07 1e-06
}

// ExampleNewWarmupLR prints the Meshed-Memory Transformer's rate (d_model
// 512, 10000 warm-up iterations) at a few iterations.
func ExampleNewWarmupLR() {
	opt, err := optim.NewAdam([]optim.Group{{Params: []radgen.Named{{Name: "w", Tensor: radgen.NewParam(1)}}, LR: 1}},
		optim.WithBetas(0.9, 0.98))
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewWarmupLR(opt, 512, 10000)
	if err != nil {
		panic(err)
	}
	for it := 0; it <= 40000; it++ {
		if it > 0 {
			sched.Step()
		}
		if it == 0 || it == 4999 || it == 9999 || it == 39999 {
			fmt.Printf("iteration %d: %.3e\n", it, opt.LR(0))
		}
	}
	// Output:
	// iteration 0: 4.419e-08
	// iteration 4999: 2.210e-04
	// iteration 9999: 4.419e-04
	// iteration 39999: 2.210e-04
}
