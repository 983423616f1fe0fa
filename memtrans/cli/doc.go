// Package cli is the radgen command as a library: [Main] runs it with the
// arguments, the output writers and the context a program gives it, and
// returns its exit status. examples/radgen is a main of a few lines over
// it; [ServerMain] is the report service alone (radgen serve), and
// examples/server a main over that.
//
// Checkpoints name their architecture, and loading one needs the package
// that registered it (arch.Register, in its init function). The stock
// command registers the library's architectures (R2Gen and its variants,
// M², METransformer); a program that also imports an architecture's package
// gets the whole command for that architecture — training aside, which
// builds the library's — with nothing copied:
//
//	package main
//
//	import (
//		"context"
//		"os"
//		"os/signal"
//
//		_ "example.com/mymodel" // registers its architecture
//		"github.com/radgen/radgen/memtrans/cli"
//	)
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
//		stop()
//		os.Exit(code)
//	}
//
// examples/variant/radgen is one. The stock command, given a checkpoint of
// an architecture it lacks, fails with an error wrapping
// arch.ErrUnregistered that says so.
//
// The subcommands, on data in R2Gen's layout (an annotation.json {"train",
// "val", "test": [{id, report, image_path, split}]} and a folder of
// images):
//
//	radgen train    -ann annotation.json -images dir -out dir [-config tiny|iu|mimic] [-arch r2gen|m2|metransformer] [-epochs n] [-freeze] [-resume last.radgen]
//	radgen generate -model model.radgen (-ann annotation.json -images dir [-split test] | -manifest studies.jsonl | image files... | DICOM folders...) [-beam 3] [-o reports.json]
//	radgen convert  -model model_best.pth -vocab annotation.json [-corpus iu_xray] [-heads 8] [-memory-heads 8] -out model.radgen
//	radgen eval     -ann annotation.json -reports reports.json [-split test] [-corpus iu_xray]
//	radgen watch    -pacs http://host:8042/dicom-web -model model.radgen [-once] [-mllp host:port]
//	radgen serve    [-model model.radgen] [-addr 127.0.0.1:8080] [-pacs http://host:8042/dicom-web]
//
// -model reads a radgen checkpoint (.radgen, written by train, convert or
// memtrans.Model.SaveFile) or R2Gen's own weights: the model_best.pth its
// trainer saves (DataParallel's "module." names included) or a safetensors
// file of the same state_dict names. The kind is recognised from the
// file's bytes, not its name. R2Gen's weights carry no vocabulary: -vocab
// names the annotation.json they were trained on, whose train split R2Gen's
// tokenizer is rebuilt from (as R2Gen does at every start), and -heads and
// -memory-heads are R2Gen's num_heads and rm_num_heads.
//
// serve runs the memtrans/serve handler over a native checkpoint (or, with
// no -model, the quickstart's tiny model, trained on synthetic films on
// first use and cached), with a graceful shutdown: on SIGINT or SIGTERM the
// uploads still arriving are cut and the generations in flight finish.
//
// Input files are read with size limits (flags of every subcommand), and
// anything but a regular file is refused unless -allow-nonregular; output
// files are written atomically. The command writes its output to the
// stdout given to [Main], its progress bars, logs and errors to stderr, and
// nothing anywhere else.
package cli
