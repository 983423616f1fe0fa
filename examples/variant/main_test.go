package main

import (
	"context"
	"testing"
)

// The example runs end to end: it trains the variant, checks its decoding
// against teacher forcing, saves, loads, generates and asks the service.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("the example's whole run; examples/variant/mclnm2's tests take the variant through the same steps in -short")
	}
	if err := run(context.Background(), 4, 16, ""); err != nil {
		t.Fatal(err)
	}
}
