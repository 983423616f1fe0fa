package r2gen_test

import (
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// R2Gen's encoder–decoder on its own: teacher forcing over two reports of
// three positions for two studies of five patches.
func ExampleModel_TeacherForce() {
	c := r2gen.Tiny(12, 16)
	c.DModel, c.DFF, c.Layers = 16, 16, 1
	m, err := r2gen.New(c, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	feats := radgen.Zeros(2, 5, 16)
	g := radgen.NoGrad()
	f, err := m.TeacherForce(g, feats, []int{0, 3, 4, 0, 5, 6}, 2, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.LogProbs.Shape(), f.Memory.Shape())
	// Output: [2 3 12] [2 3 48]
}
