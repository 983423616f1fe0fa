package freelist_test

import (
	"fmt"

	"github.com/radgen/radgen/internal/freelist"
)

// A buffer comes from the list when one is idle and goes back after use.
func Example() {
	buffers := freelist.New[[]float32](4)
	get := func() *[]float32 {
		if b := buffers.Get(); b != nil {
			return b
		}
		b := make([]float32, 0, 1024)
		return &b
	}
	b := get()
	buffers.Put(b)
	fmt.Println(get() == b)
	// Output: true
}
