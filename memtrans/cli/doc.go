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
//	radgen convert  -model model_best.pth -vocab annotation.json [-corpus iu_xray] [-threshold 3] [-max-seq-length 60] [-heads 8] [-memory-heads 8] -out model.radgen
//	radgen eval     -ann annotation.json -reports reports.json [-split test] [-corpus iu_xray] [-threshold 3] [-max-seq-length 60]
//	radgen watch    -pacs http://host:8042/dicom-web -model model.radgen [-once] [-mllp host:port]
//	radgen serve    [-model model.radgen] [-addr 127.0.0.1:8080] [-pacs http://host:8042/dicom-web]
//	radgen version  (or -version: prints "radgen" and radgen.Version)
//
// -model reads a radgen checkpoint (.radgen, written by train, convert or
// memtrans.Model.SaveFile), which carries its configuration and
// vocabulary, or R2Gen's own weights: the model_best.pth its trainer saves
// (DataParallel's "module." names included), a bare state_dict, or a
// safetensors file of the same names. The kind is recognised from the
// file's bytes, not its name.
//
// R2Gen's weights hold the encoder–decoder's sizes in their shapes and
// nothing else; the rest was R2Gen's command line, and a flag stands for
// each argument:
//
//   - -vocab (--ann_path): the annotation.json they were trained on, whose
//     train split R2Gen's tokenizer is rebuilt from, as R2Gen does at every
//     start. generate takes -ann when -vocab is not given, and logs that it
//     does;
//   - -corpus (--dataset_name): iu_xray or mimic_cxr, the report cleaner,
//     the views and the defaults below;
//   - -threshold (--threshold): the fewest occurrences of a word for it to
//     enter the vocabulary (run_iu_xray.sh 3, run_mimic_cxr.sh 10);
//   - -max-seq-length (--max_seq_length): the longest report, in tokens
//     (60, 100);
//   - -heads and -memory-heads (--num_heads, --rm_num_heads; 8 each) and
//     -views (2 for iu_xray, 1 for mimic_cxr).
//
// Each is checked against what the shapes tell before the weights are
// read: the vocabulary rebuilt must have as many ids as the logit layer
// (the error names -vocab, -threshold and -corpus, both sizes, and the
// threshold that would fit when one does), -max-seq-length must fit the
// positional table, and the head counts must divide d_model. The shapes
// cannot tell the head counts or the views: a wrong value that passes
// these checks writes other reports. The settings used are therefore
// logged, in R2Gen's argument names, with every one that differs from the
// corpus's run script (main.py's model defaults, the script's threshold
// and max_seq_length, beam search of width 3) named with where it came
// from. These flags given with a radgen checkpoint are logged as ignored.
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
