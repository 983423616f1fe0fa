package chexpert

import (
	"strings"
	"unicode"
)

// clean is Loader.clean of the CheXpert labeler: lower-case, "and/or" →
// "or", a slash between letters → " or ", ".." → ".", a space after every
// period and comma, and whitespace runs collapsed to single spaces.
func clean(report string) string {
	s := strings.ToLower(report)
	s = strings.ReplaceAll(s, "and/or", "or")
	// (?<=[a-zA-Z])/(?=[a-zA-Z]) → " or "
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '/' && i > 0 && i+1 < len(s) && isASCIILetter(s[i-1]) && isASCIILetter(s[i+1]) {
			b.WriteString(" or ")
			continue
		}
		b.WriteByte(s[i])
	}
	s = strings.ReplaceAll(b.String(), "..", ".")
	s = strings.ReplaceAll(s, ".", ". ")
	s = strings.ReplaceAll(s, ",", ", ")
	return strings.Join(strings.FieldsFunc(s, isPySpace), " ")
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func isPySpace(r rune) bool { return (r >= 0x1c && r <= 0x1f) || unicode.IsSpace(r) }

// splitSentences splits cleaned text after ".", "?" or "!" followed by a
// space (or at the end). The CheXpert labeler uses NLTK's Punkt splitter
// through NegBio; on cleaned text, where every period is followed by a
// space, the two agree except around abbreviations and numbered lists.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if (c == '.' || c == '?' || c == '!') && (i+1 == len(text) || text[i+1] == ' ') {
			if s := strings.TrimSpace(text[start : i+1]); s != "" && s != "." {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// token is a word of a sentence with its byte span.
type token struct {
	text       string
	start, end int
}

// tokenize splits a cleaned sentence into words (letters, digits and the
// characters - ' / inside words) and single punctuation marks.
func tokenize(s string) []token {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			i++
		case isWordByte(c):
			j := i
			for j < len(s) && (isWordByte(s[j]) || ((s[j] == '-' || s[j] == '\'' || s[j] == '/') && j+1 < len(s) && isWordByte(s[j+1]))) {
				j++
			}
			toks = append(toks, token{s[i:j], i, j})
			i = j
		default:
			toks = append(toks, token{s[i : i+1], i, i + 1})
			i++
		}
	}
	return toks
}

func isWordByte(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || c >= 0x80
}
