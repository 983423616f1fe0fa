package meteor

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
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

// TestEnglishStemOracle compares EnglishStem with Snowball's own stemwords
// program on every single-word lemma of a WordNet database, when both are
// installed (apt-get install libstemmer-tools wordnet-base). It is skipped
// otherwise.
func TestEnglishStemOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("slow oracle comparison")
	}
	bin, err := exec.LookPath("stemwords")
	if err != nil {
		t.Skip("stemwords (libstemmer-tools) not installed")
	}
	dir := wordNetDir(t)
	var words []string
	for _, pos := range []string{"noun", "verb", "adj", "adv"} {
		f, err := os.Open(filepath.Join(dir, "index."+pos))
		if err != nil {
			t.Skip(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w, _, _ := strings.Cut(sc.Text(), " ")
			if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyz'") == "" {
				words = append(words, w)
			}
		}
		f.Close()
	}
	cmd := exec.Command(bin, "-l", "english")
	cmd.Stdin = strings.NewReader(strings.Join(words, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimRight(string(bytes.TrimSpace(out)), "\n"), "\n")
	if len(want) != len(words) {
		t.Fatalf("stemwords returned %d lines for %d words", len(want), len(words))
	}
	bad := 0
	for i, w := range words {
		if got := EnglishStem(w); got != want[i] {
			if bad++; bad <= 20 {
				t.Errorf("EnglishStem(%q) = %q, stemwords says %q", w, got, want[i])
			}
		}
	}
	t.Logf("%d words compared, %d differ", len(words), bad)
}
