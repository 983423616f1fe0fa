//go:build ignore

// Command mkgolden writes the METEOR goldens of package meteor by running a
// METEOR 1.5 jar as coco-caption runs it: one `-stdio` process per module
// set, one SCORE line per segment (the hypothesis cleaned as coco-caption
// cleans it), then one EVAL line with every segment's statistics, whose
// answer is each segment's score and then the corpus score. See README.md
// beside this file for the jar and the commands.
//
//	go run mkgolden.go -jar meteor-1.5.jar -set synthetic > synthetic.json
//	go run mkgolden.go -jar meteor-1.5.jar -set iu_xray -ann annotation.json > iu_xray.json
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics/meteor"
)

// moduleSets are the jar's -m arguments the goldens are made with.
var moduleSets = []string{"exact", "exact stem", "exact stem synonym", "exact synonym"}

// Segment is one SCORE line: a hypothesis and its references, as text
// (synthetic) or as indices into the annotation's reports (iu_xray).
type Segment struct {
	Hyp  string   `json:"hyp,omitempty"`
	Refs []string `json:"refs,omitempty"`
	HypI int      `json:"hyp_index,omitempty"`
	RefI []int    `json:"ref_indices,omitempty"`
}

// Run is the jar's answer for one module set and one text variant.
type Run struct {
	Variant  string    `json:"variant,omitempty"`
	Modules  string    `json:"modules"`
	Segments []float64 `json:"segment_scores"`
	Stats    []string  `json:"segment_stats,omitempty"`
	Corpus   float64   `json:"corpus"`
}

// Golden is a golden file.
type Golden struct {
	Note           string    `json:"note"`
	Command        string    `json:"command"`
	AnnotationHash string    `json:"annotation_sha256,omitempty"`
	Segments       []Segment `json:"segments"`
	Runs           []Run     `json:"runs"`
}

func main() {
	jar := flag.String("jar", "", "METEOR 1.5 jar whose EVAL prints every segment's score and then the corpus score")
	set := flag.String("set", "synthetic", "synthetic or iu_xray")
	ann := flag.String("ann", "", "IU X-Ray annotation.json (for -set iu_xray)")
	flag.Parse()
	if *jar == "" {
		log.Fatal("-jar is required")
	}
	g := Golden{Command: "java -Xmx2G -jar meteor-1.5.jar - - -stdio -l en -norm -m MODULES"}
	var variants []string
	var texts func(variant string) (hyps []string, refs [][]string)
	switch *set {
	case "synthetic":
		g.Note = "Synthetic reports written by radgen (memtrans/data) and edits of them; scores by the METEOR 1.5 jar (see README.md)."
		g.Segments = synthetic()
		variants = []string{""}
		texts = func(string) ([]string, [][]string) {
			var hyps []string
			var refs [][]string
			for _, s := range g.Segments {
				hyps, refs = append(hyps, s.Hyp), append(refs, s.Refs)
			}
			return hyps, refs
		}
	case "iu_xray":
		b, err := os.ReadFile(*ann)
		if err != nil {
			log.Fatal(err)
		}
		sum := sha256.Sum256(b)
		g.AnnotationHash = hex.EncodeToString(sum[:])
		g.Note = "IU X-Ray reports (annotation.json, splits train, val, test in file order, numbered from 1) paired as hypotheses and references by index; no report text is stored. Scores by the METEOR 1.5 jar (see README.md)."
		a, err := data.ReadAnnotation(strings.NewReader(string(b)))
		if err != nil {
			log.Fatal(err)
		}
		var reports []string
		for _, split := range []string{"train", "val", "test"} {
			studies, err := a.Split(split)
			if err != nil {
				log.Fatal(err)
			}
			for _, s := range studies {
				reports = append(reports, s.Report)
			}
		}
		g.Segments = iuPairs(len(reports))
		variants = []string{"raw", "clean"}
		texts = func(v string) ([]string, [][]string) {
			text := func(i int) string {
				if v == "clean" {
					return data.CleanIUXray(reports[i-1])
				}
				return reports[i-1]
			}
			var hyps []string
			var refs [][]string
			for _, s := range g.Segments {
				var r []string
				for _, j := range s.RefI {
					r = append(r, text(j))
				}
				hyps, refs = append(hyps, text(s.HypI)), append(refs, r)
			}
			return hyps, refs
		}
	default:
		log.Fatalf("unknown set %q", *set)
	}
	for _, v := range variants {
		hyps, refs := texts(v)
		sets := moduleSets
		if *set == "iu_xray" {
			sets = sets[1:3] // the two module sets the issue asks for: the file stays small
		}
		for _, m := range sets {
			r, err := runJar(*jar, m, hyps, refs)
			if err != nil {
				log.Fatal(err)
			}
			r.Variant = v
			if *set == "iu_xray" {
				r.Stats = nil // scores only: the file stays small
			}
			g.Runs = append(g.Runs, r)
			fmt.Fprintf(os.Stderr, "%s %q: corpus %.6f over %d segments\n", v, m, r.Corpus, len(r.Segments))
		}
	}
	enc := json.NewEncoder(os.Stdout)
	if *set == "synthetic" {
		enc.SetIndent("", " ") // readable texts; the iu_xray file is numbers only
	}
	if err := enc.Encode(g); err != nil {
		log.Fatal(err)
	}
}

// runJar scores the segments as coco-caption's Meteor.compute_score does.
func runJar(jar, modules string, hyps []string, refs [][]string) (Run, error) {
	cmd := exec.Command("java", "-Xmx2G", "-jar", jar, "-", "-", "-stdio", "-l", "en", "-norm", "-m", modules)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return Run{}, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return Run{}, err
	}
	if err := cmd.Start(); err != nil {
		return Run{}, err
	}
	out := bufio.NewReader(outPipe)
	readLine := func() (string, error) {
		l, err := out.ReadString('\n')
		return strings.TrimSpace(l), err
	}
	run := Run{Modules: modules}
	eval := "EVAL"
	for i, h := range hyps {
		// coco-caption's _stat: the hypothesis loses "|||" and one round of
		// double spaces; fields are joined with " ||| ".
		line := "SCORE ||| " + strings.Join(refs[i], " ||| ") + " ||| " + meteor.CleanHypothesis(h)
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			return Run{}, err
		}
		stat, err := readLine()
		if err != nil {
			return Run{}, fmt.Errorf("segment %d: %v", i, err)
		}
		run.Stats = append(run.Stats, stat)
		eval += " ||| " + stat
	}
	if _, err := io.WriteString(in, eval+"\n"); err != nil {
		return Run{}, err
	}
	for i := 0; i <= len(hyps); i++ {
		l, err := readLine()
		if err != nil {
			return Run{}, err
		}
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			return Run{}, fmt.Errorf("EVAL answer %d: %q", i, l)
		}
		if i < len(hyps) {
			run.Segments = append(run.Segments, v)
		} else {
			run.Corpus = v
		}
	}
	in.Close()
	return run, cmd.Wait()
}

// iuPairs pairs the n reports: each report as the hypothesis of another
// (a fixed random permutation), every 50th against itself, and every 7th
// against two or three references.
func iuPairs(n int) []Segment {
	rng := rand.New(rand.NewPCG(33, 2))
	perm := rng.Perm(n)
	var segs []Segment
	for i := 1; i <= n; i++ {
		s := Segment{HypI: i, RefI: []int{perm[i-1] + 1}}
		switch {
		case i%50 == 0:
			s.RefI = []int{i}
		case i%7 == 0:
			for k := rng.IntN(2) + 1; k > 0; k-- {
				s.RefI = append(s.RefI, rng.IntN(n)+1)
			}
		}
		segs = append(segs, s)
	}
	return segs
}

// synthetic returns segments made from radgen's synthetic reports: other
// studies' reports, the same report, and edits of it (words dropped,
// swapped, repeated or replaced by inflections and synonyms, sentences
// reordered, R2Gen's cleaned form, punctuation and casing), some with
// several references, and a few edge cases.
func synthetic() []Segment {
	rng := rand.New(rand.NewPCG(33, 1))
	var reports []string
	for range 120 {
		reports = append(reports, data.SampleFindings(rng).Report())
	}
	pick := func() string { return reports[rng.IntN(len(reports))] }
	var segs []Segment
	add := func(hyp string, refs ...string) { segs = append(segs, Segment{Hyp: hyp, Refs: refs}) }

	// Edge cases.
	add("", "The heart is normal in size.")
	add("the heart is normal in size .", "")
	add(". . ,", "The lungs are clear.")
	add("the the the the heart heart", "The heart is normal. The heart is enlarged. The the heart.")
	add("Effusions", "effusion")
	add("large", "big")
	add("|||  no  pneumothorax |||", "There is no pneumothorax.")
	add("Mr. Smith's heart, 3,000 ml. No. 5 (XXXX) T11-T12 e.g. U.S.-based", "mr. smith 's heart , 3,000 ml . no. 5 ( xxxx ) t11 t12 eg us based")

	for range 280 {
		ref := pick()
		switch k := rng.IntN(9); k {
		case 0:
			add(pick(), ref)
		case 1:
			add(ref, ref)
		case 2:
			add(edit(rng, ref, 0.15, 0, 0), ref)
		case 3:
			add(edit(rng, ref, 0, 0.2, 0), ref)
		case 4:
			add(edit(rng, ref, 0, 0, 0.35), ref)
		case 5:
			add(shuffleSentences(rng, ref), ref)
		case 6:
			add(data.CleanIUXray(edit(rng, ref, 0.05, 0.05, 0.2)), data.CleanIUXray(ref))
		case 7:
			add(noise(rng, edit(rng, ref, 0.05, 0.05, 0.2)), ref)
		case 8:
			add(edit(rng, ref, 0.1, 0.1, 0.3), pick(), ref, pick())
		}
	}
	// Long segments: three reports in one, where the beam of 40 cuts.
	for range 20 {
		ref := pick() + " " + pick() + " " + pick()
		add(edit(rng, pick()+" "+ref, 0.1, 0.1, 0.3), ref)
	}
	return segs
}

// replacements are inflections and WordNet synonyms (and a few words that
// are neither) of the synthetic reports' words.
var replacements = map[string][]string{
	"heart": {"hearts", "bosom", "center", "centre"}, "normal": {"normally", "average", "regular", "convention"},
	"size": {"sizes", "sized", "magnitude", "sizing"}, "enlarged": {"large", "big", "enlarge", "enlargement", "expanded"},
	"mediastinum": {"mediastinal", "mediastina"}, "unremarkable": {"remarkable", "ordinary", "unexceptional"},
	"lungs": {"lung", "lunged"}, "clear": {"clean", "clearer", "unclouded", "clearly", "percipient"},
	"pleural": {"pleura", "pleurae"}, "effusion": {"effusions", "outpouring", "gush", "effuse"},
	"effusions": {"effusion", "outpourings"}, "pneumothorax": {"pneumothoraces", "collapse"},
	"osseous": {"bony", "bone", "bones"}, "structures": {"structure", "structural", "construction", "social_structure"},
	"intact": {"whole", "entire", "unbroken", "integral"}, "small": {"little", "smaller", "minor", "small-scale"},
	"focal": {"focus", "focused", "central"}, "airspace": {"air", "space", "airspaces", "airspace's"},
	"opacity": {"opacities", "opaqueness", "opaque", "obscurity"}, "lobe": {"lobes", "lobar", "lobule"},
	"upper": {"higher", "top", "uppers", "upper-case"}, "lower": {"lowered", "low", "depress", "frown"},
	"left": {"leftover", "remaining", "leave", "leaving"}, "right": {"correct", "rightmost", "rightfield", "rights"},
	"bilateral": {"bilaterally", "two-sided", "bilateralism"}, "pacemaker": {"pacemakers", "pacer", "pace"},
	"catheter": {"catheters", "tube"}, "internal": {"interior", "inner", "internals"}, "jugular": {"jugulars", "throat"},
	"chest": {"thorax", "chests", "breast", "pectus"}, "wall": {"walls", "paries", "walled"},
	"place": {"placed", "position", "situated", "places", "spot"}, "there": {"here", "thither", "thereabouts"},
	"is": {"be", "are", "was", "being", "isn't"}, "are": {"is", "be", "were"}, "no": {"not", "none", "nope", "no."},
	"the": {"a", "this", "The", "THE"}, "in": {"inside", "within", "into", "IN"}, "a": {"an", "one", "the"},
	"or": {"nor", "and", "either"},
}

// edit drops words with probability drop, swaps neighbours with
// probability swap and replaces words with probability repl.
func edit(rng *rand.Rand, s string, drop, swap, repl float64) string {
	w := strings.Fields(s)
	var out []string
	for _, x := range w {
		if rng.Float64() < drop {
			continue
		}
		if rng.Float64() < repl {
			core := strings.TrimRight(strings.ToLower(x), ".,")
			if r, ok := replacements[core]; ok {
				x = r[rng.IntN(len(r))] + x[len(strings.TrimRight(x, ".,")):]
			}
		}
		if rng.Float64() < drop/3 {
			out = append(out, x) // a repeated word
		}
		out = append(out, x)
	}
	for i := 0; i+1 < len(out); i++ {
		if rng.Float64() < swap {
			out[i], out[i+1] = out[i+1], out[i]
		}
	}
	return strings.Join(out, " ")
}

func shuffleSentences(rng *rand.Rand, s string) string {
	sents := strings.SplitAfter(s, ". ")
	rng.Shuffle(len(sents), func(i, j int) { sents[i], sents[j] = sents[j], sents[i] })
	for i := range sents {
		sents[i] = strings.TrimSpace(sents[i])
	}
	return strings.Join(sents, " ")
}

// noise adds what real reports have: capitals, commas, hyphenated ranges,
// de-identification marks, numbers, quotes and parentheses.
func noise(rng *rand.Rand, s string) string {
	bits := []string{"XXXX", "(XXXX)", "T11-T12", "3.5 cm", "1,000", "\"stable\"", "e.g.", "Dr. XXXX", "--", "...", "x-XXXX", "2.", "isn't", "patient's", "AP/PA", "50%", "No."}
	w := strings.Fields(s)
	for k := rng.IntN(4) + 1; k > 0; k-- {
		i := rng.IntN(len(w) + 1)
		w = append(w[:i], append([]string{bits[rng.IntN(len(bits))]}, w[i:]...)...)
	}
	if rng.IntN(2) == 0 {
		w[0] = strings.ToUpper(w[0])
	}
	return strings.Join(w, " ")
}
