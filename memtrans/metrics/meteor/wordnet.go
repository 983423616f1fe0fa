package meteor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
)

// ErrWordNet is returned (wrapped) for synonym tables that cannot be read.
var ErrWordNet = errors.New("meteor: bad WordNet data")

// MaxWordNetBytes is the most [ReadWordNet] reads from each of its two
// readers (the jar's synonym table is 3.7 MB); longer input is an error.
const MaxWordNetBytes = 64 << 20

// maxWordNetLine is the longest line ReadWordNet accepts.
const maxWordNetLine = 1 << 20

// WordNet is the synonym dictionary of METEOR's synonym module
// (edu.cmu.meteor.aligner.SynonymDictionary): for each word the WordNet
// synsets it belongs to, the irregular forms of WordNet's exception lists,
// and the jar's suffix rules for regular inflections. Two different words
// match when their sets intersect.
//
// [EnglishWordNet] is the jar's own English table, which the synonym module
// uses by default; [ReadWordNet] reads another in the same format. A
// synset is the number the table gives it: the jar's English table gives
// the synset's offset in WordNet 3.0's data file without its part of
// speech, so a noun and a verb synset at the same offset count as one, as
// in the jar.
//
// A WordNet is immutable after loading and safe for concurrent use; the
// zero WordNet knows no words.
type WordNet struct {
	synsets map[string][]int32  // word → its synsets, sorted and unique
	bases   map[string][]string // inflected form → base forms, in file order
}

//go:embed data/english.synsets.gz data/english.exceptions.gz
var wordNetData embed.FS

var english = sync.OnceValues(func() (*WordNet, error) {
	open := func(name string) (io.Reader, error) {
		b, err := wordNetData.ReadFile("data/" + name)
		if err != nil {
			return nil, err
		}
		return gzip.NewReader(bytes.NewReader(b))
	}
	syn, err := open("english.synsets.gz")
	if err != nil {
		return nil, fmt.Errorf("%w: embedded english.synsets: %v", ErrWordNet, err)
	}
	exc, err := open("english.exceptions.gz")
	if err != nil {
		return nil, fmt.Errorf("%w: embedded english.exceptions: %v", ErrWordNet, err)
	}
	return ReadWordNet(syn, exc)
})

// EnglishWordNet returns the METEOR 1.5 jar's English synonym tables
// (resources/synonym/english.synsets and english.exceptions, built by the
// jar's authors from WordNet 3.0; embedded in data/ with WordNet's licence).
// They are read on the first call (about 150,000 words) and shared after.
func EnglishWordNet() (*WordNet, error) { return english() }

// ReadWordNet reads synonym tables in the format of the jar's
// resources/synonym directory. synsets holds pairs of lines: a word, then
// the numbers of its synsets separated by blanks. exceptions holds pairs of
// lines: a base form, then its irregular inflected forms. As in the jar, a
// word listed twice keeps its last synsets, a form listed under several
// bases gets them all, and words are case-sensitive (METEOR looks up the
// normalised, lower-case words). Each reader may hold at most
// [MaxWordNetBytes], each line at most 1 MiB.
func ReadWordNet(synsets, exceptions io.Reader) (*WordNet, error) {
	wn := &WordNet{synsets: map[string][]int32{}, bases: map[string][]string{}}
	if err := pairs(synsets, func(word string, rest []string) error {
		set := make([]int32, 0, len(rest))
		for _, f := range rest {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return fmt.Errorf("bad synset number %q", f)
			}
			set = append(set, int32(n))
		}
		slices.Sort(set)
		wn.synsets[word] = slices.Clip(slices.Compact(set))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%w: synsets: %v", ErrWordNet, err)
	}
	if err := pairs(exceptions, func(base string, forms []string) error {
		for _, f := range forms {
			wn.bases[f] = append(wn.bases[f], base)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%w: exceptions: %v", ErrWordNet, err)
	}
	return wn, nil
}

// pairs reads r as pairs of lines: a key taken as it is, then a line of
// blank-separated fields (java.util.StringTokenizer's delimiters).
func pairs(r io.Reader, f func(key string, fields []string) error) error {
	lr := &io.LimitedReader{R: r, N: MaxWordNetBytes + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), maxWordNetLine)
	line := 0
	for sc.Scan() {
		line++
		key := sc.Text()
		if !sc.Scan() {
			if sc.Err() == nil {
				return fmt.Errorf("line %d: %q has no second line", line, key)
			}
			break
		}
		line++
		if err := f(key, strings.FieldsFunc(sc.Text(), isJavaTokenDelim)); err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %v", line+1, err)
	}
	if lr.N <= 0 {
		return fmt.Errorf("more than %d bytes", MaxWordNetBytes)
	}
	return nil
}

// Synsets returns the synsets word may belong to: its own plus those of its
// base forms (SynonymMatcher: getSynSets ∪ getStemSynSets), sorted. The
// result is freshly allocated.
func (wn *WordNet) Synsets(word string) []int64 {
	s := wn.synsetsOf(word)
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// synsetsOf returns Synsets as sorted, unique int32s; the result may share
// the dictionary's memory and must not be modified.
func (wn *WordNet) synsetsOf(word string) []int32 {
	own := wn.synsets[word]
	var stem []int32
	if bases, ok := wn.bases[word]; ok {
		// getStemSynSets: the synsets of every base form.
		for _, b := range bases {
			stem = union(stem, wn.synsets[b])
		}
	} else {
		stem = wn.synsets[wn.morph(word)]
	}
	return union(own, stem)
}

// union returns the sorted union of two sorted sets; it returns one of them
// when the other is empty.
func union(a, b []int32) []int32 {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		default:
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// The jar's morphology (WordNet 3.0's suffix rules): tried in order, the
// first candidate that is a known word wins.
var (
	morphSuffixes = []string{
		"s", "ses", "xes", "zes", "ches", "shes", "men", "ies", // noun
		"s", "ies", "es", "es", "ed", "ed", "ing", "ing", // verb
		"er", "est", "er", "est", // adjective
	}
	morphEndings = []string{
		"", "s", "x", "z", "ch", "sh", "man", "y",
		"", "y", "e", "", "e", "", "e", "",
		"", "", "e", "e",
	}
)

// morph returns the base form of word that the jar's
// SynonymDictionary.morph finds, or "" when none is known. Like the jar it
// returns the word itself for words ending in "ss" or of at most two UTF-16
// code units, and it appends "ful" to the result for words ending in "ful"
// (the jar sets that suffix aside but then strips from the whole word).
func (wn *WordNet) morph(word string) string {
	end := ""
	if strings.HasSuffix(word, "ful") {
		end = "ful"
	}
	if strings.HasSuffix(word, "ss") || javaLen(word) <= 2 {
		return word
	}
	for i, suf := range morphSuffixes {
		if !strings.HasSuffix(word, suf) {
			continue
		}
		cand := word[:len(word)-len(suf)] + morphEndings[i]
		if _, ok := wn.synsets[cand]; ok {
			return cand + end
		}
	}
	return ""
}

// javaLen is String.length(): the word's length in UTF-16 code units.
func javaLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
