// Command beam runs radgen over an archive on Apache Beam: the same
// pipelines run embedded on one machine (the Prism runner, the default) or
// on Flink, Spark or Dataflow.
//
//	beam generate -manifest studies.jsonl -model model.radgen -out dir [-beam 3] [-batch 16] [-shards 1]
//	beam score    -reports 'dir/reports-*.jsonl' -ann annotation.json -out dir [-split test] [-refs r2gen]
//	beam features -manifest studies.jsonl -model model.radgen -out cachedir [-batch 16] [-shards 1]
//
// followed by Beam's own flags (--runner, --endpoint, --environment_type,
// --project, ...). A manifest is JSON Lines of {"id": "<study>", "images":
// ["<path or URL>", ...]}. Files may be local paths, gs:// or s3:// URLs;
// models and images also http(s) URLs. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/radgen/radgen/memtrans/metrics"
)

func init() {
	register.DoFn4x1[context.Context, []byte, func(string, Study), func(string), error](&ReadManifestFn{})
	register.DoFn5x1[context.Context, string, func(*Study) bool, func(string), func(string), error](&GenerateFn{})
	register.DoFn5x1[context.Context, string, func(*Study) bool, func(string), func(string), error](&FeaturesFn{})
	register.DoFn1x2[string, int, string](&KeyShardFn{})
	register.DoFn2x0[[]byte, func(int, string)](&EmptyShardsFn{})
	register.DoFn3x1[context.Context, int, func(*string) bool, error](&WriteShardFn{})
	register.DoFn4x1[context.Context, string, func(metrics.SampleStats), func(string), error](&StatsFn{})
	register.Combiner2[metrics.Partial, metrics.SampleStats](&PartialFn{})
	register.DoFn3x0[metrics.SampleStats, metrics.Partial, func(float64)](&CIDErFn{})
	register.DoFn4x1[context.Context, []byte, func(*metrics.Partial) bool, func(*float64) bool, error](&ScoresFn{})
	register.Emitter2[string, Study]()
	register.Iter1[Study]()
	register.Emitter1[string]()
	register.Emitter1[metrics.SampleStats]()
	register.Emitter1[float64]()
	register.Emitter2[int, string]()
	register.Iter1[string]()
	register.Iter1[metrics.Partial]()
	register.Iter1[float64]()
	beam.RegisterCoder(reflect.TypeFor[Study](), encStudy, decStudy)
	beam.RegisterCoder(reflect.TypeFor[metrics.SampleStats](), encSampleStats, decSampleStats)
	beam.RegisterCoder(reflect.TypeFor[metrics.Partial](), encPartial, decPartial)
}

// Coders: JSON (exact for float64; maps and fixed-size arrays included).
// Each type has its own named functions, which a worker resolves by name.

func encStudy(v Study) ([]byte, error) { return json.Marshal(v) }
func decStudy(b []byte) (Study, error) {
	var v Study
	err := json.Unmarshal(b, &v)
	return v, err
}

func encSampleStats(v metrics.SampleStats) ([]byte, error) { return json.Marshal(v) }
func decSampleStats(b []byte) (metrics.SampleStats, error) {
	var v metrics.SampleStats
	err := json.Unmarshal(b, &v)
	return v, err
}

func encPartial(v metrics.Partial) ([]byte, error) { return json.Marshal(v) }
func decPartial(b []byte) (metrics.Partial, error) {
	var v metrics.Partial
	err := json.Unmarshal(b, &v)
	return v, err
}

func main() {
	log.SetFlags(0)
	// A worker binary is started with Beam's flags only; a launch names a
	// pipeline first.
	var build func(beam.Scope) error
	if len(os.Args) > 1 && (os.Args[1] == "generate" || os.Args[1] == "score" || os.Args[1] == "features") {
		cmd := os.Args[1]
		os.Args = append(os.Args[:1], os.Args[2:]...)
		build = pipelineFlags(cmd, flag.CommandLine)
	}
	flag.Parse()
	beam.Init() // a worker runs its harness here and does not return
	if build == nil {
		fmt.Fprintln(os.Stderr, "usage: beam generate|score|features [flags] (see -help)")
		os.Exit(2)
	}
	p, s := beam.NewPipelineWithRoot()
	if err := build(s); err != nil {
		log.Fatal(err)
	}
	res, err := beamx.RunWithMetrics(context.Background(), p)
	if err != nil {
		log.Fatalf("beam: %v", err)
	}
	if res != nil {
		for _, c := range res.Metrics().AllMetrics().Counters() {
			if c.Namespace() == "radgen" {
				log.Printf("%s/%s: %d", c.Transform(), c.Name(), c.Result())
			}
		}
	}
}

// pipelineFlags defines the flags of a pipeline on fs and returns what
// builds it once they are parsed.
func pipelineFlags(cmd string, fs *flag.FlagSet) func(beam.Scope) error {
	switch cmd {
	case "generate":
		var c GenerateConfig
		fs.StringVar(&c.Manifest, "manifest", "", "JSON Lines of {id, images} (glob allowed)")
		fs.StringVar(&c.Model, "model", "", "model checkpoint: path, gs://, s3:// or http(s) URL")
		fs.StringVar(&c.Out, "out", "", "output folder: studies/ (one report per study), reports-*.jsonl, deadletter-*.jsonl")
		fs.StringVar(&c.Device, "device", "cpu", "where to decode: cpu, cuda:N (a worker built with -tags cuda) or reference")
		fs.IntVar(&c.Beam, "beam", 3, "beam size (1 = greedy)")
		fs.IntVar(&c.Batch, "batch", 16, "studies per Generate call, consecutive in the manifest as radgen groups them (16 gives radgen's reports exactly)")
		fs.IntVar(&c.Shards, "shards", 1, "files of reports")
		return func(s beam.Scope) error {
			if c.Manifest == "" || c.Model == "" || c.Out == "" {
				return errors.New("generate: -manifest, -model and -out are required")
			}
			buildGenerate(s, c)
			return nil
		}
	case "features":
		var c FeaturesConfig
		fs.StringVar(&c.Manifest, "manifest", "", "JSON Lines of {id, images} (glob allowed)")
		fs.StringVar(&c.Model, "model", "", "model checkpoint: path, gs://, s3:// or http(s) URL")
		fs.StringVar(&c.Out, "out", "", "feature cache folder (the Trainer's FeatureCache)")
		fs.StringVar(&c.Device, "device", "cpu", "where to run: cpu, cuda:N (a worker built with -tags cuda) or reference")
		fs.IntVar(&c.Batch, "batch", 16, "studies per extractor call")
		fs.IntVar(&c.Shards, "shards", 1, "files of the index")
		return func(s beam.Scope) error {
			if c.Manifest == "" || c.Model == "" || c.Out == "" {
				return errors.New("features: -manifest, -model and -out are required")
			}
			buildFeatures(s, c)
			return nil
		}
	default:
		var c ScoreConfig
		fs.StringVar(&c.Reports, "reports", "", "generated reports, JSON Lines of {id, report} (glob allowed)")
		fs.StringVar(&c.Ann, "ann", "", "R2Gen annotation.json")
		fs.StringVar(&c.Split, "split", "test", "split of the annotation to score")
		fs.StringVar(&c.Refs, "refs", "r2gen", "references: r2gen, clean or as-is")
		fs.StringVar(&c.Corpus, "corpus", "iu_xray", "corpus for cleaning and the tokenizer: iu_xray or mimic_cxr")
		fs.BoolVar(&c.NoMETEOR, "no-meteor", false, "leave METEOR out")
		fs.StringVar(&c.METEORModules, "meteor-modules", "exact stem synonym", "METEOR's modules, as the jar's -m option (exact, stem, synonym; no paraphrase)")
		fs.BoolVar(&c.NoCE, "no-ce", false, "leave the clinical efficacy out")
		fs.StringVar(&c.Out, "out", "", "output folder: scores.json, deadletter-*.jsonl")
		return func(s beam.Scope) error {
			if c.Reports == "" || c.Ann == "" || c.Out == "" {
				return errors.New("score: -reports, -ann and -out are required")
			}
			buildScore(s, c)
			return nil
		}
	}
}
