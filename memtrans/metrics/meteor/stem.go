package meteor

import "strings"

// EnglishStem returns the Snowball English ("Porter2") stem of a lower-case word:
// the stemmer the METEOR 1.5 jar's stem module uses
// (org.tartarus.snowball.ext.englishStemmer). It is the revised Porter
// algorithm, not the 1980 original: for example "generously" → "generous",
// "dying" → "die", "skies" → "sky".
//
// Reference: M. F. Porter, "The English (Porter2) stemming algorithm",
// https://snowballstem.org/algorithms/english/stemmer.html. Words of one or
// two letters, and words with characters outside a–z, ', are stemmed by the
// same rules treating those characters as consonants.
func EnglishStem(word string) string {
	if len(word) <= 2 {
		return word
	}
	if s, ok := stemExceptions1[word]; ok {
		return s
	}
	w := []byte(word)
	// Prelude: drop a leading apostrophe; mark consonant y's as Y.
	if w[0] == '\'' {
		w = w[1:]
	}
	if len(w) > 0 && w[0] == 'y' {
		w[0] = 'Y'
	}
	for i := 1; i < len(w); i++ {
		if w[i] == 'y' && isVowel(w[i-1]) {
			w[i] = 'Y'
		}
	}
	p1, p2 := markRegions(w)
	st := &stemmer{w: w, p1: p1, p2: p2}

	st.step0()
	st.step1a()
	if _, ok := stemExceptions2[string(st.w)]; ok {
		return strings.ReplaceAll(string(st.w), "Y", "y")
	}
	st.step1b()
	st.step1c()
	st.step2()
	st.step3()
	st.step4()
	st.step5()
	return strings.ReplaceAll(string(st.w), "Y", "y")
}

// stemExceptions1 are the whole words the algorithm special-cases first.
var stemExceptions1 = map[string]string{
	"skies": "sky", "dying": "die", "lying": "lie", "tying": "tie",
	"idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli",
	"only": "onli", "singly": "singl",
	// invariant forms
	"sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas",
	"cosmos": "cosmos", "bias": "bias", "andes": "andes",
}

// stemExceptions2 stop the algorithm after step 1a.
var stemExceptions2 = map[string]struct{}{
	"inning": {}, "outing": {}, "canning": {}, "herring": {}, "earring": {},
	"proceed": {}, "exceed": {}, "succeed": {},
}

func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

// markRegions returns the starts of R1 and R2: R1 begins after the first
// non-vowel that follows a vowel (or after the prefixes gener, commun,
// arsen); R2 is R1 applied again inside R1.
func markRegions(w []byte) (p1, p2 int) {
	p1, p2 = len(w), len(w)
	s := string(w)
	start := -1
	for _, pre := range []string{"gener", "commun", "arsen"} {
		if strings.HasPrefix(s, pre) {
			start = len(pre)
			break
		}
	}
	if start < 0 {
		start = afterVowelNonVowel(w, 0)
	}
	if start < 0 {
		return
	}
	p1 = start
	if r := afterVowelNonVowel(w, p1); r >= 0 {
		p2 = r
	}
	return
}

// afterVowelNonVowel returns the index after the first non-vowel that follows
// a vowel at or after from, or -1.
func afterVowelNonVowel(w []byte, from int) int {
	for i := from + 1; i < len(w); i++ {
		if !isVowel(w[i]) && isVowel(w[i-1]) {
			return i + 1
		}
	}
	return -1
}

type stemmer struct {
	w      []byte
	p1, p2 int
}

func (s *stemmer) has(suf string) bool { return strings.HasSuffix(string(s.w), suf) }

// longest returns the longest of sufs that ends the word, or "".
func (s *stemmer) longest(sufs ...string) string {
	best := ""
	for _, suf := range sufs {
		if len(suf) > len(best) && s.has(suf) {
			best = suf
		}
	}
	return best
}

func (s *stemmer) replace(suf, with string) {
	s.w = append(s.w[:len(s.w)-len(suf)], with...)
}

func (s *stemmer) inR1(suf string) bool { return len(s.w)-len(suf) >= s.p1 }
func (s *stemmer) inR2(suf string) bool { return len(s.w)-len(suf) >= s.p2 }

// shortSyllableEndingAt reports whether w[:end] ends in a short syllable:
// non-vowel, vowel, non-vowel other than w, x, Y; or, at the start of the
// word, vowel then non-vowel.
func shortSyllableEndingAt(w []byte, end int) bool {
	if end == 2 {
		return isVowel(w[0]) && !isVowel(w[1])
	}
	if end >= 3 {
		a, b, c := w[end-3], w[end-2], w[end-1]
		return !isVowel(a) && isVowel(b) && !isVowel(c) && c != 'w' && c != 'x' && c != 'Y'
	}
	return false
}

// isShort: R1 is empty and the word ends in a short syllable.
func (s *stemmer) isShort() bool {
	return s.p1 == len(s.w) && shortSyllableEndingAt(s.w, len(s.w))
}

func (s *stemmer) step0() {
	if suf := s.longest("'s'", "'s", "'"); suf != "" {
		s.replace(suf, "")
	}
}

func containsVowel(b []byte) bool {
	for _, c := range b {
		if isVowel(c) {
			return true
		}
	}
	return false
}

func (s *stemmer) step1a() {
	switch suf := s.longest("sses", "ied", "ies", "us", "ss", "s"); suf {
	case "sses":
		s.replace(suf, "ss")
	case "ied", "ies":
		if len(s.w)-len(suf) > 1 {
			s.replace(suf, "i")
		} else {
			s.replace(suf, "ie")
		}
	case "s":
		// Delete if the part before the s holds a vowel not just before it.
		if len(s.w) >= 2 && containsVowel(s.w[:len(s.w)-2]) {
			s.replace(suf, "")
		}
	}
}

func (s *stemmer) step1b() {
	suf := s.longest("eed", "eedly", "ed", "edly", "ing", "ingly")
	switch suf {
	case "":
		return
	case "eed", "eedly":
		if s.inR1(suf) {
			s.replace(suf, "ee")
		}
		return
	}
	if !containsVowel(s.w[:len(s.w)-len(suf)]) {
		return
	}
	s.replace(suf, "")
	switch {
	case s.has("at"), s.has("bl"), s.has("iz"):
		s.w = append(s.w, 'e')
	case s.endsDouble():
		s.w = s.w[:len(s.w)-1]
	case s.isShort():
		s.w = append(s.w, 'e')
	}
}

func (s *stemmer) endsDouble() bool {
	for _, d := range []string{"bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt"} {
		if s.has(d) {
			return true
		}
	}
	return false
}

func (s *stemmer) step1c() {
	n := len(s.w)
	if n > 2 && (s.w[n-1] == 'y' || s.w[n-1] == 'Y') && !isVowel(s.w[n-2]) {
		s.w[n-1] = 'i'
	}
}

var step2Rules = []struct{ suf, rep string }{
	{"ization", "ize"}, {"ational", "ate"}, {"fulness", "ful"}, {"ousness", "ous"},
	{"iveness", "ive"}, {"tional", "tion"}, {"biliti", "ble"}, {"lessli", "less"},
	{"entli", "ent"}, {"ation", "ate"}, {"alism", "al"}, {"aliti", "al"},
	{"ousli", "ous"}, {"iviti", "ive"}, {"fulli", "ful"}, {"enci", "ence"},
	{"anci", "ance"}, {"abli", "able"}, {"izer", "ize"}, {"ator", "ate"},
	{"alli", "al"}, {"bli", "ble"}, {"ogi", "og"}, {"li", ""},
}

func (s *stemmer) step2() {
	// Find the longest matching suffix; act only if it is in R1.
	for _, r := range step2Rules {
		if !s.has(r.suf) {
			continue
		}
		if !s.inR1(r.suf) {
			return
		}
		switch r.suf {
		case "ogi":
			if len(s.w) >= 4 && s.w[len(s.w)-4] == 'l' {
				s.replace(r.suf, r.rep)
			}
		case "li":
			if len(s.w) >= 3 && strings.IndexByte("cdeghkmnrt", s.w[len(s.w)-3]) >= 0 {
				s.replace(r.suf, r.rep)
			}
		default:
			s.replace(r.suf, r.rep)
		}
		return
	}
}

var step3Rules = []struct{ suf, rep string }{
	{"ational", "ate"}, {"tional", "tion"}, {"alize", "al"}, {"icate", "ic"},
	{"iciti", "ic"}, {"ative", ""}, {"ical", "ic"}, {"ness", ""}, {"ful", ""},
}

func (s *stemmer) step3() {
	for _, r := range step3Rules {
		if !s.has(r.suf) {
			continue
		}
		if !s.inR1(r.suf) {
			return
		}
		if r.suf == "ative" && !s.inR2(r.suf) {
			return
		}
		s.replace(r.suf, r.rep)
		return
	}
}

var step4Suffixes = []string{
	"ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism",
	"ate", "iti", "ous", "ive", "ize", "ion", "al", "er", "ic",
}

func (s *stemmer) step4() {
	suf := s.longest(step4Suffixes...)
	if suf == "" || !s.inR2(suf) {
		return
	}
	if suf == "ion" {
		n := len(s.w) - 3
		if n < 1 || (s.w[n-1] != 's' && s.w[n-1] != 't') {
			return
		}
	}
	s.replace(suf, "")
}

func (s *stemmer) step5() {
	n := len(s.w)
	switch {
	case s.has("e"):
		if s.inR2("e") || (s.inR1("e") && !shortSyllableEndingAt(s.w, n-1)) {
			s.w = s.w[:n-1]
		}
	case s.has("l"):
		if s.inR2("l") && n >= 2 && s.w[n-2] == 'l' {
			s.w = s.w[:n-1]
		}
	}
}
