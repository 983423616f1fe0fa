package meteor

import (
	_ "embed"
	"regexp"
	"strings"
)

// Normalize tokenises and lower-cases a line as the METEOR 1.5 jar's -norm
// option does for English (Normalizer.normalizeLine with punctuation kept,
// then lower-casing): punctuation other than . ' ` , - is split off, runs of
// dots are protected, commas are split except inside numbers, quotes and
// dashes are unified, a dash between two letters or digits becomes a space
// ("t11-t12" → "t11 t12", the jar's rule for partial credit), English
// contractions are split to the right ("don't" → "don 't"), and a word-final
// dot is split off unless the word is a known abbreviation or the next word
// starts in lower case. Tokens in the result are separated by single spaces.
//
// Abbreviations come from the jar's own list (Moses' nonbreaking prefixes
// for English, embedded in data/). The result is lower-cased as Java's
// String.toLowerCase does.
func Normalize(line string) string {
	w := " " + line + " "
	// Each step below only changes lines containing its trigger characters;
	// skipping the others keeps plain lower-case text cheap.
	if !onlyPlain(w) {
		w = reSepOther.ReplaceAllString(w, " ${1} ")
	}

	// Escape multiple dots.
	if strings.Contains(w, "..") {
		w = reMultiDot.ReplaceAllString(w, " DOTMULTI${1}")
		for strings.Contains(w, "DOTMULTI.") {
			w = reMultiDot2.ReplaceAllString(w, "DOTDOTMULTI ${1}")
			w = strings.ReplaceAll(w, "DOTMULTI.", "DOTDOTMULTI")
		}
	}

	// Separate commas except within numbers.
	if strings.Contains(w, ",") {
		w = reComma.ReplaceAllString(w, "${1} , ${2}")
		w = reComma2.ReplaceAllString(w, "${1} , ${2}")
		w = reComma3.ReplaceAllString(w, "${1} , ${2}")
	}

	// Normalise quotes and dashes.
	if strings.ContainsAny(w, "`‘’“”'") {
		w = reQuote.ReplaceAllString(w, "'")
		w = reQuote2.ReplaceAllString(w, ` " `)
	}
	if strings.ContainsAny(w, "-–") {
		w = strings.ReplaceAll(w, "–", "-")
		w = strings.ReplaceAll(w, "--", "-")
		// Remove dashes between words.
		w = reRmDash.ReplaceAllString(w, "${1} ${2}")
	}

	// English contractions split to the right.
	if strings.Contains(w, "'") {
		w = reContEn.ReplaceAllString(w, "${1} ' ${2}")
		w = reContEn2.ReplaceAllString(w, "${1} ' ${2}")
		w = reContEn3.ReplaceAllString(w, "${1} ' ${2}")
		w = reContEn4.ReplaceAllString(w, "${1} '${2}")
		w = reContEn5.ReplaceAllString(w, "${1} '${2}")
	}

	// Rebuild the line, splitting word-final dots unless nonbreaking.
	words := strings.FieldsFunc(w, isJavaTokenDelim)
	var sb strings.Builder
	sb.Grow(len(w) + 8)
	for i, word := range words {
		if len(word) > 1 && strings.HasSuffix(word, ".") {
			pre := word[:len(word)-1]
			kind := nonbreakingPrefixes[pre]
			next := ""
			if i < len(words)-1 {
				next = words[i+1]
			}
			switch {
			case strings.Contains(pre, ".") && reAlpha.MatchString(pre):
				sb.WriteString(strings.ReplaceAll(word, ".", ""))
			case kind == nbpAny || (next != "" && next[0] >= 'a' && next[0] <= 'z'):
				sb.WriteString(word)
			case kind == nbpNumericOnly && next != "" && next[0] >= '0' && next[0] <= '9':
				sb.WriteString(word)
			default:
				sb.WriteString(pre)
				sb.WriteString(" .")
			}
		} else {
			sb.WriteString(word)
		}
		sb.WriteByte(' ')
	}
	w = sb.String()

	// Unescape multiple dots.
	if strings.Contains(w, "DOTMULTI") {
		for strings.Contains(w, "DOTDOTMULTI") {
			w = strings.ReplaceAll(w, "DOTDOTMULTI", "DOTMULTI.")
		}
		w = strings.ReplaceAll(w, "DOTMULTI", ".")
	}

	if !isASCII(w) {
		w = reWhite.ReplaceAllString(w, " ")
	}
	w = strings.TrimFunc(w, func(r rune) bool { return r <= ' ' })
	return javaLower(w)
}

// onlyPlain reports whether s has only characters that the separation step
// leaves alone and that need no Unicode classes: ASCII letters, digits,
// the Java whitespace set and . ' ` , -.
func onlyPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == ' ', c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
		case c == '.', c == '\'', c == '`', c == ',', c == '-':
		default:
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// isJavaTokenDelim is java.util.StringTokenizer's default delimiter set.
func isJavaTokenDelim(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
}

// Character classes of the jar's Normalizer (Western European and Cyrillic
// letters).
const (
	normAlpha = `A-Za-zŠŽšžŸÀ-ÖØ-öø-žЀ-ӿԀ-ԧꙀ-ꙮ꙾-ꚗᴀ-ᵿ`
	normAlnum = `0-9` + normAlpha
	javaSpace = ` \t\n\x0B\f\r`
)

var (
	reSepOther  = regexp.MustCompile(`([^` + normAlnum + javaSpace + `\.'` + "`" + `,\-‘’])`)
	reMultiDot  = regexp.MustCompile(`\.([\.]+)`)
	reMultiDot2 = regexp.MustCompile(`DOTMULTI\.([^\.])`)
	reComma     = regexp.MustCompile(`([^0-9])[,]([^0-9])`)
	reComma2    = regexp.MustCompile(`([0-9])[,]([^0-9])`)
	reComma3    = regexp.MustCompile(`([^0-9])[,]([0-9])`)
	reQuote     = regexp.MustCompile("([`‘’])")
	reQuote2    = regexp.MustCompile(`([“”]|'')`)
	reRmDash    = regexp.MustCompile(`([` + normAlnum + `\.])[\-]([` + normAlnum + `])`)
	reContEn    = regexp.MustCompile(`([^` + normAlpha + `])[']([^` + normAlpha + `])`)
	reContEn2   = regexp.MustCompile(`([^` + normAlpha + `0-9])[']([` + normAlpha + `])`)
	reContEn3   = regexp.MustCompile(`([` + normAlpha + `])[']([^` + normAlpha + `])`)
	reContEn4   = regexp.MustCompile(`([` + normAlpha + `])[']([` + normAlpha + `])`)
	reContEn5   = regexp.MustCompile(`([0-9])[']([s])`)
	reAlpha     = regexp.MustCompile(`[` + normAlpha + `]`)
	// The jar's own list of Unicode spaces (not U+1680, U+2028, U+2029).
	reWhite = regexp.MustCompile("[ \u00a0\u2000-\u200a\u202f\u205f\u3000]+")
)

const (
	nbpAny         = 1
	nbpNumericOnly = 2
)

//go:embed data/english.prefixes
var englishPrefixes string

// nonbreakingPrefixes are the words that keep a following dot (nbpAny), or
// keep it when a number follows (nbpNumericOnly): the jar's English list
// (resources/nonbreaking/english.prefixes, from the Moses tokenizer),
// read as Normalizer.nbpList reads it.
var nonbreakingPrefixes = func() map[string]int {
	m := map[string]int{}
	for _, l := range lines(englishPrefixes) {
		f := strings.FieldsFunc(l, isJavaTokenDelim)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		kind := nbpAny
		if len(f) > 1 && f[1] == "#NUMERIC_ONLY#" {
			kind = nbpNumericOnly
		}
		m[f[0]] = kind
	}
	return m
}()

// javaLower is String.toLowerCase in an English locale: Unicode's simple
// lower-case mapping, except that U+0130 (capital I with dot above) becomes
// "i" and a combining dot above. (Java's other special case, a final
// capital sigma, cannot arise here: -norm splits Greek letters into tokens
// of their own, and no function word is Greek.)
func javaLower(s string) string {
	if strings.ContainsRune(s, '\u0130') {
		s = strings.ReplaceAll(s, "\u0130", "i\u0307")
	}
	return strings.ToLower(s)
}
