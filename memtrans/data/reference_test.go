package data

import (
	"strings"
	"testing"
)

// ReferenceFunc refuses unknown modes and corpora, and an r2gen reference
// needs a train split.
func TestReferenceFuncErrors(t *testing.T) {
	ann := NewAnnotation(map[string][]Study{"test": {{ID: "a", Report: "No effusion."}}})
	for _, c := range []struct {
		mode   string
		corpus Corpus
		want   string
	}{
		{"bleu", IUXray, "unknown reference mode"},
		{"clean", Corpus("chexpert"), "unknown corpus"},
		{"r2gen", Corpus("chexpert"), "unknown corpus"},
		{"r2gen", IUXray, "train split"},
	} {
		if _, err := ann.ReferenceFunc(c.mode, c.corpus); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReferenceFunc(%q, %q) = %v, want an error saying %q", c.mode, c.corpus, err, c.want)
		}
	}
	if ref, err := ann.ReferenceFunc("as-is", Corpus("chexpert")); err != nil || ref("x") != "x" {
		t.Errorf("as-is of any corpus: %v", err)
	}
}
