package metrans_test

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/metrans"
)

// A tiny METransformer's teacher-forced log-probabilities: one stream per
// study and expert.
func ExampleModel_LogProbs() {
	c := metrans.Tiny(10, 8, 4) // 10 ids, 8-wide features, 4 visual tokens
	m, err := metrans.New(c, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := radgen.NoGrad()
	lp, err := m.LogProbs(g, radgen.Zeros(2, 4, 8), []int{0, 3, 4, 0, 5, 6}, 2, 3)
	fmt.Println(lp.Shape(), c.Experts, err)
	// Output: [6 3 10] 3 <nil>
}
