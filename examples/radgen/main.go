// Command radgen trains, runs, converts and evaluates radgen report
// generators on data in R2Gen's layout, and reports on a PACS's studies:
// the command of package memtrans/cli, whose documentation describes it.
//
//	go install github.com/radgen/radgen/examples/radgen@latest
//	radgen train|generate|convert|eval|watch -h
//
// It runs the architectures the library registers. A program that also
// imports an architecture's package, which registers it, is a radgen for
// that architecture too: examples/variant/radgen is one.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/radgen/radgen/memtrans/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
