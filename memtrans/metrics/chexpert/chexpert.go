package chexpert

import (
	"embed"
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Observation is one of the 14 CheXpert observations.
type Observation int

// The observations, in the CheXpert labeler's column order (CATEGORIES).
const (
	NoFinding Observation = iota
	EnlargedCardiomediastinum
	Cardiomegaly
	LungLesion
	LungOpacity
	Edema
	Consolidation
	Pneumonia
	Atelectasis
	Pneumothorax
	PleuralEffusion
	PleuralOther
	Fracture
	SupportDevices
	// NumObservations is the number of observations.
	NumObservations = 14
)

var observationNames = [NumObservations]string{
	"No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion",
	"Lung Opacity", "Edema", "Consolidation", "Pneumonia", "Atelectasis",
	"Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices",
}

// String returns the observation's CheXpert column name, e.g. "Pleural Effusion".
func (o Observation) String() string {
	if o < 0 || o >= NumObservations {
		return fmt.Sprintf("Observation(%d)", int(o))
	}
	return observationNames[o]
}

// Label is the value the labeler gives an observation in a report.
type Label int8

const (
	// Blank: not mentioned (the CheXpert labeler's empty cell / NaN).
	Blank Label = iota
	// Positive: mentioned as present (1).
	Positive
	// Negative: mentioned as absent (0).
	Negative
	// Uncertain: mentioned with uncertainty (-1).
	Uncertain
)

// Value returns the CheXpert labeler's numeric encoding: 1, 0, -1, or NaN
// for Blank.
func (l Label) Value() float64 {
	switch l {
	case Positive:
		return 1
	case Negative:
		return 0
	case Uncertain:
		return -1
	}
	return math.NaN()
}

// String returns the label's name: positive, negative, uncertain or blank.
func (l Label) String() string {
	switch l {
	case Blank:
		return "blank"
	case Positive:
		return "positive"
	case Negative:
		return "negative"
	case Uncertain:
		return "uncertain"
	}
	return fmt.Sprintf("Label(%d)", int(l))
}

// Labels are a report's labels, indexed by Observation.
type Labels [NumObservations]Label

// String lists the non-blank labels, e.g. "Cardiomegaly=negative, Pleural Effusion=positive".
func (ls Labels) String() string {
	var parts []string
	for o, l := range ls {
		if l != Blank {
			parts = append(parts, Observation(o).String()+"="+l.String())
		}
	}
	return strings.Join(parts, ", ")
}

//go:embed phrases/mention/*.txt phrases/unmention/*.txt phrases/LICENSE
var phraseFS embed.FS

// Mention is one match of a mention phrase in a report.
type Mention struct {
	Observation Observation
	Sentence    string // the cleaned sentence
	Start, End  int    // byte span of the match in Sentence
	Label       Label  // Positive, Negative or Uncertain
	Rule        string // the surface rule that decided a negative/uncertain label
}

// Text returns the matched text.
func (m Mention) Text() string { return m.Sentence[m.Start:m.End] }

// Labeler is a CheXpert-style labeler with surface rules. The zero value is
// not usable; create one with New. A Labeler is immutable and safe for
// concurrent use.
type Labeler struct {
	mention   [NumObservations][]phrase
	unmention [NumObservations][]phrase
}

// phrase is a mention or unmention pattern. The labeler uses them as Python
// regular expressions; all of CheXpert's are plain text, which is searched
// with strings.Index (same matches as re.finditer: leftmost,
// non-overlapping). Others fall back to regexp.
type phrase struct {
	lit string
	re  *regexp.Regexp
}

func newPhrase(p string) (phrase, error) {
	if regexp.QuoteMeta(p) == p {
		return phrase{lit: p}, nil
	}
	re, err := regexp.Compile(p)
	return phrase{re: re}, err
}

// findAll returns the byte spans of all non-overlapping matches in s.
func (p phrase) findAll(s string) [][2]int {
	if p.re != nil {
		var out [][2]int
		for _, loc := range p.re.FindAllStringIndex(s, -1) {
			out = append(out, [2]int{loc[0], loc[1]})
		}
		return out
	}
	var out [][2]int
	for off := 0; off <= len(s); {
		i := strings.Index(s[off:], p.lit)
		if i < 0 {
			break
		}
		start := off + i
		out = append(out, [2]int{start, start + len(p.lit)})
		off = start + max(len(p.lit), 1)
	}
	return out
}

// New returns a Labeler with the embedded CheXpert phrase lists.
func New() (*Labeler, error) {
	l := &Labeler{}
	for _, kind := range []string{"mention", "unmention"} {
		files, err := fs.Glob(phraseFS, "phrases/"+kind+"/*.txt")
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, f := range files {
			obs, ok := observationFromFile(f)
			if !ok {
				return nil, fmt.Errorf("chexpert: phrase file %s names no observation", f)
			}
			data, err := phraseFS.ReadFile(f)
			if err != nil {
				return nil, err
			}
			for _, p := range parsePhrases(string(data)) {
				ph, err := newPhrase(p)
				if err != nil {
					return nil, fmt.Errorf("chexpert: %s: phrase %q: %v", f, p, err)
				}
				if kind == "mention" {
					l.mention[obs] = append(l.mention[obs], ph)
				} else {
					l.unmention[obs] = append(l.unmention[obs], ph)
				}
			}
		}
	}
	// Positional unmentions built in code, as Extractor.add_unmention_phrases.
	positions := []string{}
	for _, a := range []string{"over the", "overly the", "in the"} {
		for _, b := range []string{"", " superior", " left", " right"} {
			positions = append(positions, a+b)
		}
	}
	cardioMentions := phraseList("phrases/mention/cardiomegaly.txt")
	ecMentions := phraseList("phrases/mention/enlarged_cardiomediastinum.txt")
	l.unmention[Cardiomegaly] = nil
	l.unmention[EnlargedCardiomediastinum] = nil
	for _, pos := range positions {
		for _, m := range cardioMentions {
			if m == "cardiomegaly" || m == "cardiac enlargement" {
				continue
			}
			l.unmention[Cardiomegaly] = append(l.unmention[Cardiomegaly],
				mustPhrase(pos+" "+strings.ReplaceAll(m, "the ", "")))
		}
	}
	for _, pos := range positions {
		for _, m := range ecMentions {
			l.unmention[EnlargedCardiomediastinum] = append(l.unmention[EnlargedCardiomediastinum],
				mustPhrase(pos+" "+m))
		}
	}
	return l, nil
}

func mustPhrase(p string) phrase {
	ph, err := newPhrase(p)
	if err != nil {
		panic("chexpert: " + err.Error())
	}
	return ph
}

// parsePhrases reads one phrase per line as the labeler does:
// line.strip().replace("_", " "), skipping empty lines.
func parsePhrases(data string) []string {
	var out []string
	for _, line := range strings.Split(data, "\n") {
		p := strings.ReplaceAll(strings.TrimSpace(line), "_", " ")
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func phraseList(file string) []string {
	data, err := phraseFS.ReadFile(file)
	if err != nil {
		panic("chexpert: embedded phrase file missing: " + file)
	}
	return parsePhrases(string(data))
}

// observationFromFile maps "phrases/mention/pleural_effusion.txt" to
// PleuralEffusion (the labeler's stem.replace("_", " ").title()).
func observationFromFile(file string) (Observation, bool) {
	stem := strings.TrimSuffix(path.Base(file), ".txt")
	words := strings.Split(stem, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	name := strings.Join(words, " ")
	for o, n := range observationNames {
		if n == name {
			return Observation(o), true
		}
	}
	return 0, false
}

// LicenseNotice returns the licence of the embedded CheXpert phrase lists.
func LicenseNotice() string {
	b, _ := phraseFS.ReadFile("phrases/LICENSE")
	return string(b)
}

// Label labels one report: it finds mentions sentence by sentence,
// classifies each as negative, uncertain or positive with the surface rules,
// and aggregates them as the CheXpert labeler does.
func (l *Labeler) Label(report string) Labels {
	return aggregate(l.Mentions(report))
}

// Mentions returns every mention in report with its classification, in
// sentence order, then observation order.
func (l *Labeler) Mentions(report string) []Mention {
	var out []Mention
	for _, sent := range splitSentences(clean(report)) {
		var toks []token
		var trs []trigger
		for o := Observation(0); o < NumObservations; o++ {
			for _, ph := range l.mention[o] {
				for _, loc := range ph.findAll(sent) {
					if l.overlapsUnmention(sent, o, loc[0], loc[1]) {
						continue
					}
					if toks == nil {
						toks = tokenize(sent)
						trs = sentenceTriggers(toks)
					}
					m := Mention{Observation: o, Sentence: sent, Start: loc[0], End: loc[1]}
					m.Label, m.Rule = classify(toks, trs, m)
					out = append(out, m)
				}
			}
		}
	}
	return out
}

func (l *Labeler) overlapsUnmention(sent string, o Observation, start, end int) bool {
	for _, ph := range l.unmention[o] {
		for _, loc := range ph.findAll(sent) {
			if start < loc[1] && end > loc[0] {
				return true
			}
		}
	}
	return false
}

// aggregate is Aggregator.aggregate and dict_to_vec of the CheXpert labeler:
// No Finding mentions only veto No Finding; "chf" and "heart failure"
// mentioned positively or uncertainly add an uncertain Cardiomegaly; several
// labels of one observation resolve as {neg, unc} → uncertain, {neg, pos} →
// positive, {unc, pos} → positive; No Finding is positive when no
// observation other than Support Devices is positive or uncertain.
func aggregate(mentions []Mention) Labels {
	var seen [NumObservations][]Label
	noFinding := true
	for _, m := range mentions {
		if m.Observation != SupportDevices && (m.Label == Uncertain || m.Label == Positive) {
			noFinding = false
		}
		if m.Observation == NoFinding {
			continue
		}
		if (m.Label == Positive || m.Label == Uncertain) && (m.Text() == "chf" || m.Text() == "heart failure") {
			seen[Cardiomegaly] = append(seen[Cardiomegaly], Uncertain)
		}
		seen[m.Observation] = append(seen[m.Observation], m.Label)
	}
	if noFinding {
		seen[NoFinding] = []Label{Positive}
	}
	var out Labels
	for o, ls := range seen {
		out[o] = resolve(ls)
	}
	return out
}

func resolve(ls []Label) Label {
	switch len(ls) {
	case 0:
		return Blank
	case 1:
		return ls[0]
	}
	has := func(x Label) bool {
		for _, l := range ls {
			if l == x {
				return true
			}
		}
		return false
	}
	switch {
	case has(Negative) && has(Uncertain):
		return Uncertain
	case has(Negative) && has(Positive):
		return Positive
	case has(Uncertain) && has(Positive):
		return Positive
	}
	return ls[0]
}
