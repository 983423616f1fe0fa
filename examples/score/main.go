// Command score scores generated reports against the references of one split
// of an R2Gen annotation.json with every radgen metric: BLEU-1..4, ROUGE-L
// and CIDEr-D (equal to coco-caption), METEOR (the METEOR 1.5 jar's
// algorithm and English data, named by its modules: coco-caption's jar adds
// a paraphrase module that radgen does not have) and CheXpert-style
// clinical efficacy.
//
// Usage:
//
//	score -ann annotation.json -gen generated.jsonl [-split test] [-refs r2gen] [-meteor-modules "exact stem synonym"]
//
// The generated reports are a JSON or JSON Lines file of records
// {"id": "<study id>", "report": "<generated text>"}: a JSON array of such
// records, a JSON object mapping id to text, or one record per line.
// Generated text is scored as it is (a model's decoded output is already in
// R2Gen's cleaned form).
//
// References (-refs) are made from each study's "report":
//
//	r2gen  R2Gen's ground truth (default): the corpus's cleaner, then ids of
//	       the tokenizer built from the train split (threshold 3 for IU X-Ray,
//	       10 for MIMIC-CXR; unknown words become <unk>), truncated to
//	       max_seq_length, decoded again. This is what R2Gen scores against.
//	clean  the corpus's cleaner only (no vocabulary, no truncation).
//	as-is  the report text unchanged, for annotations whose reports are
//	       already cleaned.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "score:", err)
		}
		os.Exit(2)
	}
}

type options struct {
	ann, gen, split, refs, corpus, modules string
	noMeteor, noCE, skipMissing, asJSON    bool
	workers                                int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ann, "ann", "", "R2Gen annotation.json (required)")
	fs.StringVar(&o.gen, "gen", "", "generated reports, JSON or JSONL of {id, report} (required)")
	fs.StringVar(&o.split, "split", "test", "split of the annotation to score")
	fs.StringVar(&o.refs, "refs", "r2gen", "references: r2gen, clean or as-is")
	fs.StringVar(&o.corpus, "corpus", string(data.IUXray), "corpus for cleaning and the tokenizer: iu_xray or mimic_cxr")
	fs.StringVar(&o.modules, "meteor-modules", "exact stem synonym", "METEOR's modules, as the jar's -m option (exact, stem, synonym; no paraphrase)")
	fs.BoolVar(&o.noMeteor, "no-meteor", false, "leave METEOR out")
	fs.BoolVar(&o.noCE, "no-ce", false, "leave the CheXpert-style clinical efficacy out")
	fs.BoolVar(&o.skipMissing, "skip-missing", false, "score only the studies that have a generated report")
	fs.BoolVar(&o.asJSON, "json", false, "print the scores as JSON")
	fs.IntVar(&o.workers, "workers", 0, "goroutines (default: GOMAXPROCS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.ann == "" || o.gen == "" {
		fs.Usage()
		return errors.New("-ann and -gen are required")
	}

	ann, err := data.LoadAnnotation(o.ann)
	if err != nil {
		return err
	}
	studies, err := ann.Split(o.split)
	if err != nil {
		return err
	}
	refOf, err := ann.ReferenceFunc(o.refs, data.Corpus(o.corpus))
	if err != nil {
		return err
	}
	gen, err := readGenerated(o.gen)
	if err != nil {
		return err
	}

	var refs [][]string
	var hyps, ids []string
	missing := 0
	for _, s := range studies {
		h, ok := gen[s.ID]
		if !ok {
			missing++
			continue
		}
		refs = append(refs, []string{refOf(s.Report)})
		hyps = append(hyps, h)
		ids = append(ids, s.ID)
	}
	if missing > 0 && !o.skipMissing {
		return fmt.Errorf("%d of %d studies of split %q have no generated report (use -skip-missing to score the rest)", missing, len(studies), o.split)
	}

	var evOpts []metrics.Option
	if o.workers > 0 {
		evOpts = append(evOpts, metrics.WithConcurrency(o.workers))
	}
	if o.noMeteor {
		evOpts = append(evOpts, metrics.WithoutMETEOR())
	} else {
		mods, err := meteor.ParseModules(o.modules)
		if err != nil {
			return err
		}
		m, err := meteor.New(meteor.WithModules(mods...))
		if err != nil {
			return err
		}
		evOpts = append(evOpts, metrics.WithMETEOR(m))
	}
	if o.noCE {
		evOpts = append(evOpts, metrics.WithoutClinicalEfficacy())
	}
	ev, err := metrics.NewEvaluator(evOpts...)
	if err != nil {
		return err
	}
	sc, err := ev.Evaluate(ctx, refs, hyps)
	if err != nil {
		return err
	}
	if o.asJSON {
		return writeJSON(stdout, o, sc, missing)
	}
	return writeTable(stdout, o, sc, missing)
}

type record struct {
	ID     string `json:"id"`
	Report string `json:"report"`
}

// readGenerated reads {id → report} from a JSON array of records, a JSON
// object mapping ids to reports, or JSON Lines of records.
func readGenerated(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
		return nil, fmt.Errorf("%s: empty", path)
	case trimmed[0] == '[':
		var recs []record
		if err := json.Unmarshal(trimmed, &recs); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, r := range recs {
			if err := add(out, r); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		return out, nil
	case trimmed[0] == '{' && json.Valid(trimmed):
		// One JSON object: an id → report map, unless it is a single record.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, isRecord := m["report"]; !isRecord {
			for id, raw := range m {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					return nil, fmt.Errorf("%s: value of %q is not a string", path, id)
				}
				out[id] = s
			}
			return out, nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(l, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := add(out, r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return out, sc.Err()
}

func add(out map[string]string, r record) error {
	if r.ID == "" {
		return errors.New("record without id")
	}
	if _, dup := out[r.ID]; dup {
		return fmt.Errorf("duplicate id %q", r.ID)
	}
	out[r.ID] = r.Report
	return nil
}

func writeTable(w io.Writer, o options, sc *metrics.Scores, missing int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "split\t%s (%d studies scored, references: %s)\n", o.split, sc.N, o.refs)
	if missing > 0 {
		fmt.Fprintf(tw, "skipped\t%d studies without a generated report\n", missing)
	}
	for k, v := range sc.BLEU {
		fmt.Fprintf(tw, "BLEU-%d\t%.4f\n", k+1, v)
	}
	if sc.METEORName != "" {
		fmt.Fprintf(tw, "%s\t%.4f\n", sc.METEORName, sc.METEOR)
	}
	fmt.Fprintf(tw, "ROUGE-L\t%.4f\n", sc.ROUGEL)
	fmt.Fprintf(tw, "CIDEr-D\t%.4f\n", sc.CIDErD)
	if sc.CE != nil {
		fmt.Fprintf(tw, "CE micro P/R/F1 (CheXpert-style surface rules)\t%.4f / %.4f / %.4f\n", sc.CE.Micro.Precision, sc.CE.Micro.Recall, sc.CE.Micro.F1)
		fmt.Fprintf(tw, "CE macro P/R/F1 (CheXpert-style surface rules)\t%.4f / %.4f / %.4f\n", sc.CE.Macro.Precision, sc.CE.Macro.Recall, sc.CE.Macro.F1)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, o options, sc *metrics.Scores, missing int) error {
	out := map[string]any{
		"split": o.split, "references": o.refs, "n": sc.N, "skipped": missing,
		"BLEU_1": sc.BLEU[0], "BLEU_2": sc.BLEU[1], "BLEU_3": sc.BLEU[2], "BLEU_4": sc.BLEU[3],
		"ROUGE_L": sc.ROUGEL, "CIDEr": sc.CIDErD,
	}
	if sc.METEORName != "" {
		out["METEOR"] = sc.METEOR
		out["METEOR_name"] = sc.METEORName
	}
	if sc.CE != nil {
		per := map[string]chexpert.PRF{}
		for i, p := range sc.CE.PerObservation {
			per[chexpert.Observation(i).String()] = p
		}
		out["CE"] = map[string]any{
			"labeler": "radgen CheXpert-style surface rules",
			"micro":   sc.CE.Micro, "macro": sc.CE.Macro, "per_observation": per,
		}
	}
	enc := json.NewEncoder(w) // maps encode with sorted keys
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
