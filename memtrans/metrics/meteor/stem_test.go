package meteor

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stemCases were checked against Snowball 2.2's English stemmer (the
// stemwords program of Debian's libstemmer-tools).
var stemCases = []struct{ word, stem string }{
	{"caresses", "caress"},
	{"ponies", "poni"},
	{"ties", "tie"},
	{"caress", "caress"},
	{"cats", "cat"},
	{"feed", "feed"},
	{"agreed", "agre"},
	{"disabled", "disabl"},
	{"matting", "mat"},
	{"mating", "mate"},
	{"meeting", "meet"},
	{"milling", "mill"},
	{"messing", "mess"},
	{"meetings", "meet"},
	{"happy", "happi"},
	{"sky", "sky"},
	{"generously", "generous"},
	{"generalization", "general"},
	{"dying", "die"},
	{"skies", "sky"},
	{"news", "news"},
	{"atlas", "atlas"},
	{"cosmos", "cosmos"},
	{"inning", "inning"},
	{"outing", "outing"},
	{"canning", "canning"},
	{"proceeding", "proceed"},
	{"effusion", "effus"},
	{"effusions", "effus"},
	{"atelectasis", "atelectasi"},
	{"atelectatic", "atelectat"},
	{"opacities", "opac"},
	{"opacity", "opac"},
	{"opacification", "opacif"},
	{"consolidation", "consolid"},
	{"consolidations", "consolid"},
	{"cardiomegaly", "cardiomegali"},
	{"enlarged", "enlarg"},
	{"enlargement", "enlarg"},
	{"pneumothorax", "pneumothorax"},
	{"pneumothoraces", "pneumothorac"},
	{"pleural", "pleural"},
	{"mediastinal", "mediastin"},
	{"unremarkable", "unremark"},
	{"visualized", "visual"},
	{"visualised", "visualis"},
	{"degenerative", "degen"},
	{"calcified", "calcifi"},
	{"granulomas", "granuloma"},
	{"hyperinflated", "hyperinfl"},
	{"hyperinflation", "hyperinfl"},
	{"emphysematous", "emphysemat"},
	{"scarring", "scar"},
	{"interstitial", "interstiti"},
	{"markings", "mark"},
	{"normal", "normal"},
	{"normally", "normal"},
	{"identified", "identifi"},
	{"seen", "seen"},
	{"demonstrated", "demonstr"},
	{"bilateral", "bilater"},
	{"bibasilar", "bibasilar"},
	{"sternotomy", "sternotomi"},
	{"vascularity", "vascular"},
	{"vascular", "vascular"},
	{"prominence", "promin"},
	{"prominent", "promin"},
	{"fractures", "fractur"},
	{"fractured", "fractur"},
	{"healed", "heal"},
	{"healing", "heal"},
	{"lungs", "lung"},
	{"clear", "clear"},
	{"evidence", "evid"},
	{"focal", "focal"},
	{"airspace", "airspac"},
	{"disease", "diseas"},
	{"appearance", "appear"},
	{"appears", "appear"},
	{"appeared", "appear"},
	{"stable", "stabl"},
	{"unchanged", "unchang"},
	{"'tis", "tis"},
	{"dog's", "dog"},
	{"dogs'", "dog"},
	{"the", "the"},
	{"xxxx", "xxxx"},
	{"t11-t12", "t11-t12"},
	{"size", "size"},
	{"sized", "size"},
}

func TestEnglishStem(t *testing.T) {
	for _, c := range stemCases {
		if got := EnglishStem(c.word); got != c.stem {
			t.Errorf("EnglishStem(%q) = %q, want %q", c.word, got, c.stem)
		}
	}
}

// TestEnglishStemJar compares EnglishStem with the METEOR 1.5 jar's own
// stemmer (org.tartarus.snowball.ext.englishStemmer) on every 16th word of
// the jar's synonym table; testdata/jar/README.md says how stems.tsv was
// made.
func TestEnglishStemJar(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "jar", "stems.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, bad := 0, 0
	for sc.Scan() {
		w, want, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("line %d: no tab", n+1)
		}
		n++
		if got := EnglishStem(w); got != want {
			if bad++; bad <= 20 {
				t.Errorf("EnglishStem(%q) = %q, the jar says %q", w, got, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 9000 {
		t.Fatalf("only %d words in stems.tsv", n)
	}
	t.Logf("%d words compared, %d differ", n, bad)
}
