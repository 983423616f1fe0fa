package cli_test

import (
	"context"
	"fmt"
	"os"

	"github.com/radgen/radgen/memtrans/cli"
)

// Main returns the exit status and writes its messages to the writers it is
// given; it never exits the process itself.
func ExampleMain() {
	code := cli.Main(context.Background(), []string{"generate", "scan.png"}, os.Stdout, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// radgen generate: -model is required
	// exit status 1
}
