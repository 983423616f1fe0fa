package m2_test

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/m2"
)

// The Meshed-Memory Transformer over a report vocabulary of 10 ids: M²'s
// <bos> and <pad> are ids 10 and 11, past the report's words.
func ExampleReportModel() {
	c := m2.Tiny(10, 8).ForReports(10, 5)
	ed, err := c.New(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := radgen.NoGrad()
	lp, err := ed.LogProbs(g, radgen.Zeros(1, 4, 8), []int{0, 3, 4}, 1, 3)
	d := c.Dims()
	fmt.Println(lp.Shape(), d.Words, d.BOS, err)
	// Output: [1 3 12] 10 10 <nil>
}
