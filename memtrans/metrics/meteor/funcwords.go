package meteor

import (
	_ "embed"
	"strings"
)

//go:embed data/english.words
var englishWords string

// DefaultFunctionWords is the METEOR 1.5 jar's English function-word list
// (resources/function/english.words, embedded in data/ under the jar's
// LGPL 2.1): the most frequent words and punctuation tokens of a large
// English corpus, one per line, used for METEOR's content/function
// weighting (δ). As in the jar, a word is a function word when its
// lower-case form is in the list. Replace it with [WithFunctionWords].
var DefaultFunctionWords = lines(englishWords)

// lines splits s into lines as java.io.BufferedReader.readLine does for
// "\n" and "\r\n" endings, keeping each line as it is.
func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		l = strings.TrimSuffix(l, "\n")
		out = append(out, strings.TrimSuffix(l, "\r"))
	}
	return out
}

func functionWordSet(words []string) map[string]struct{} {
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[w] = struct{}{}
	}
	return m
}
