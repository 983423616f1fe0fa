package meteor

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// normalizeSlow is Normalize with every step applied unconditionally, as the
// jar does; Normalize skips steps whose trigger characters are absent.
func normalizeSlow(line string) string {
	w := " " + line + " "
	w = reSepOther.ReplaceAllString(w, " ${1} ")
	w = reMultiDot.ReplaceAllString(w, " DOTMULTI${1}")
	for strings.Contains(w, "DOTMULTI.") {
		w = reMultiDot2.ReplaceAllString(w, "DOTDOTMULTI ${1}")
		w = strings.ReplaceAll(w, "DOTMULTI.", "DOTDOTMULTI")
	}
	w = reComma.ReplaceAllString(w, "${1} , ${2}")
	w = reComma2.ReplaceAllString(w, "${1} , ${2}")
	w = reComma3.ReplaceAllString(w, "${1} , ${2}")
	w = reQuote.ReplaceAllString(w, "'")
	w = reQuote2.ReplaceAllString(w, ` " `)
	w = strings.ReplaceAll(w, "–", "-")
	w = strings.ReplaceAll(w, "--", "-")
	w = reRmDash.ReplaceAllString(w, "${1} ${2}")
	w = reContEn.ReplaceAllString(w, "${1} ' ${2}")
	w = reContEn2.ReplaceAllString(w, "${1} ' ${2}")
	w = reContEn3.ReplaceAllString(w, "${1} ' ${2}")
	w = reContEn4.ReplaceAllString(w, "${1} '${2}")
	w = reContEn5.ReplaceAllString(w, "${1} '${2}")
	words := strings.FieldsFunc(w, isJavaTokenDelim)
	var sb strings.Builder
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
	for strings.Contains(w, "DOTDOTMULTI") {
		w = strings.ReplaceAll(w, "DOTDOTMULTI", "DOTMULTI.")
	}
	w = strings.ReplaceAll(w, "DOTMULTI", ".")
	w = reWhite.ReplaceAllString(w, " ")
	w = strings.TrimFunc(w, func(r rune) bool { return r <= ' ' })
	return javaLower(w)
}

func TestNormalizeFastPathMatchesSlow(t *testing.T) {
	alphabet := []string{"a", "b", "x", "T", "1", "0", " ", " ", ".", "..", ",", "-", "–", "'", "`", "’", "“", "(", ")", "<", ">", "é", "ж", "\t", "\u00a0", "Mr", "no", "s"}
	rng := rand.New(rand.NewPCG(1, 1))
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for n := 0; n < iters; n++ {
		var b strings.Builder
		for k := rng.IntN(16); k > 0; k-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		in := b.String()
		if got, want := Normalize(in), normalizeSlow(in); got != want {
			t.Fatalf("Normalize(%q) = %q, the unconditional steps give %q", in, got, want)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"Mild T11-T12 change (XXXX).", "Mr. Smith's heart, 3,000 ml.", "a..b", "‘x’ “y”"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Normalize(s), normalizeSlow(s); got != want {
			t.Fatalf("Normalize(%q) = %q, want %q", s, got, want)
		}
	})
}
