// Command server runs radgen's report service: the memtrans/serve handler
// over a model, on one port, with structured logs and a graceful shutdown
// that cuts the uploads still arriving and lets the generations in flight
// finish. It is memtrans/cli's ServerMain, radgen serve as a program of its
// own.
//
//	go run ./examples/server -model model.radgen [-addr 127.0.0.1:8080]
//
// Without -model it loads the quickstart's tiny model from its cache
// directory, and trains it first on synthetic films when it is not there
// (a few minutes on a laptop), so it runs on a fresh machine. Open the
// address in a browser and drop a study's films on the page, or post them:
//
//	curl -F view=@0.png -F view=@1.png -F beam_size=3 http://127.0.0.1:8080/v1/reports
//
// A PACS or a router may push studies to http://ADDR/dicomweb/studies by
// STOW-RS; with -pacs the SR of each is stored into the study there. A
// program that also imports an architecture's package serves that
// architecture's checkpoints the same way.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/radgen/radgen/memtrans/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.ServerMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
