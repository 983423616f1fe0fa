package main

import (
	"context"
	"testing"
)

// The example runs end to end: it trains the variant, checks its decoding
// against teacher forcing, saves, loads, generates and asks the service.
func TestRun(t *testing.T) {
	if err := run(context.Background(), 4, 16, ""); err != nil {
		t.Fatal(err)
	}
}
