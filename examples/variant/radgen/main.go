// Command radgen is the radgen command for examples/variant's architecture
// as well as the library's: importing package mclnm2 registers "mcln-m2",
// and a checkpoint of it then generates, converts, evaluates, watches a
// PACS and serves like any other. The whole command is memtrans/cli's; this
// file is all a researcher's own radgen needs.
//
//	go run ./examples/variant/radgen generate -model variant.radgen pa.png lateral.png
//	go run ./examples/variant/radgen serve -model variant.radgen -addr 127.0.0.1:8080
package main

import (
	"context"
	"os"
	"os/signal"

	_ "github.com/radgen/radgen/examples/variant/mclnm2" // registers mcln-m2
	"github.com/radgen/radgen/memtrans/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
