package data

// The report cleaners of R2Gen's modules/tokenizers.py (clean_report_iu_xray,
// clean_report_mimic_cxr), with Python's string semantics: str.strip and
// str.split without arguments split on Python's whitespace, str.lower is the
// full Unicode lower-casing (İ → i̇, final sigma).

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// replaceNumbering applies R2Gen's chain of list-number replacements in
// order; each str.replace is a separate pass, so they stay sequential. Note
// "1. " → "" anywhere, so "size 1. normal" loses its "1. " too.
func replaceNumbering(t string) string {
	t = strings.ReplaceAll(t, "1. ", "")
	for _, n := range [...]string{"2", "3", "4", "5"} {
		t = strings.ReplaceAll(t, ". "+n+". ", ". ")
	}
	for _, n := range [...]string{"2", "3", "4", "5"} {
		t = strings.ReplaceAll(t, " "+n+". ", ". ")
	}
	return t
}

// replaceN applies strings.ReplaceAll(t, old, new) n times, as R2Gen's
// chained .replace calls do (each pass is not a fixed point: "...." → "..").
func replaceN(t, old, new string, n int) string {
	for range n {
		t = strings.ReplaceAll(t, old, new)
	}
	return t
}

// CleanIUXray is R2Gen's clean_report_iu_xray, byte for byte:
//  1. ".." → "." three times; "1. " → ""; ". 2. " … ". 5. " → ". ";
//     " 2. " … " 5. " → ". ";
//  2. strip, lower, split on ". ";
//  3. per sentence: drop " / \ ', strip, lower, then delete every character
//     of the class [.,?;*!%^&_+():-\[\]{}] — where ":-\[" is a range, so
//     ':' … '[' (including < = > @ and A–Z) go and '-' stays;
//  4. join with " . " and append " ." (empty sentences are kept: R2Gen's
//     filter compares a string with a list and is always true).
//
// Example: "1. The heart is normal. 2. No effusion.. Mild T11-T12 change
// (XXXX)." → "the heart is normal . no effusion . mild t11-t12 change xxxx ."
//
// The report should be valid UTF-8; invalid bytes become U+FFFD.
func CleanIUXray(report string) string {
	t := replaceN(report, "..", ".", 3)
	return joinSentences(replaceNumbering(t))
}

// CleanMIMICCXR is R2Gen's clean_report_mimic_cxr: newlines → spaces, "__" →
// "_" seven times, double spaces → one six times, ".." → "." eight times,
// then the numbering replacements and the sentence cleaning of [CleanIUXray].
func CleanMIMICCXR(report string) string {
	t := strings.ReplaceAll(report, "\n", " ")
	t = replaceN(t, "__", "_", 7)
	t = replaceN(t, "  ", " ", 6)
	t = replaceN(t, "..", ".", 8)
	return joinSentences(replaceNumbering(t))
}

// joinSentences is the tail both cleaners share: strip, lower, split on ". ",
// clean each sentence, join with " . " and end with " .".
func joinSentences(t string) string {
	sents := strings.Split(pyLower(pyStrip(t)), ". ")
	var b strings.Builder
	b.Grow(len(t) + 2*len(sents) + 2)
	for i, s := range sents {
		if i > 0 {
			b.WriteString(" . ")
		}
		b.WriteString(cleanSentence(s))
	}
	b.WriteString(" .")
	return b.String()
}

// removed marks the ASCII characters R2Gen's sentence cleaner deletes: the
// regex class [.,?;*!%^&_+():-\[\]{}] (with the range ':' … '[').
var removed = func() (set [128]bool) {
	for _, c := range ".,?;*!%^&_+()]{}" {
		set[c] = true
	}
	for c := ':'; c <= '['; c++ {
		set[c] = true
	}
	return set
}()

// cleanSentence is R2Gen's sent_cleaner: drop the characters " / \ ',
// strip, lower, then delete the regex class. All deleted characters are
// ASCII, so the deletion works on bytes without touching multi-byte runes.
func cleanSentence(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '"', '/', '\\', '\'':
			return -1
		}
		return r
	}, s)
	s = pyLower(pyStrip(s))
	keep := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || !removed[c] {
			keep++
		}
	}
	if keep == len(s) {
		return s
	}
	b := make([]byte, 0, keep)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || !removed[c] {
			b = append(b, c)
		}
	}
	return string(b)
}

// pyIsSpace is Python's str.isspace for one character (Py_UNICODE_ISSPACE):
// Unicode White_Space plus the separators U+001C … U+001F.
func pyIsSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || '\t' <= r && r <= '\r' || 0x1c <= r && r <= 0x1f
	}
	return unicode.IsSpace(r)
}

// pyStrip is Python's str.strip() without arguments.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyFields is Python's str.split() without arguments.
func pyFields(s string) []string { return strings.FieldsFunc(s, pyIsSpace) }

// pyLower is Python's str.lower(): the full lower-case mapping of each
// character (U+0130 İ becomes "i̇", two characters) and the Final_Sigma rule
// for U+03A3 Σ. Other characters use Unicode's simple lower-case mapping, as
// Python does; the two can differ only for characters that the Unicode
// versions of Go and Python do not share.
func pyLower(s string) string {
	ascii, upper := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	if ascii {
		if !upper {
			return s
		}
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch r {
		case 0x130:
			b.WriteString("i\u0307")
		case 0x3a3:
			if finalSigma(rs, i) {
				b.WriteRune(0x3c2)
			} else {
				b.WriteRune(0x3c3)
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether Σ at rs[i] is in the Final_Sigma context:
// preceded by a cased letter and not followed by one, skipping
// case-ignorable characters both ways (CPython's handle_capital_sigma).
func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !cased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && caseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !cased(rs[j])
}

// cased is Unicode's derived property Cased.
func cased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// caseIgnorable is Unicode's derived property Case_Ignorable: Mn, Me, Cf, Lm,
// Sk, and the Word_Break classes MidLetter, MidNumLet and Single_Quote.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xb7, 0x387, 0x55f, 0x5f4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xfe13, 0xfe52, 0xfe55, 0xff07, 0xff0e, 0xff1a:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
