package meteor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// ErrWordNet is returned (wrapped) when a WordNet directory cannot be read.
var ErrWordNet = errors.New("meteor: bad WordNet data")

// WordNet is the synonym dictionary of METEOR's synonym module: for each word
// the set of WordNet synsets it belongs to (any part of speech), the
// irregular forms of WordNet's exception lists, and the jar's small
// suffix-stripping morphology for regular inflections. Two different words
// match when their synset sets intersect.
//
// It is read from the files of a WordNet 3.x database directory (index.noun,
// index.verb, index.adj, index.adv and the optional noun.exc, verb.exc,
// adj.exc, adv.exc), as Debian's wordnet-base package installs them in
// /usr/share/wordnet. The jar instead ships its own precomputed tables
// built from WordNet 3.0; see the package documentation for the difference.
//
// A WordNet is immutable after loading and safe for concurrent use.
type WordNet struct {
	synsets map[string][]int64  // word → synset ids (offset·4 + part of speech)
	bases   map[string][]string // irregular form → base forms
}

var wordNetPOS = []string{"noun", "verb", "adj", "adv"}

// LoadWordNet reads the WordNet database in dir.
func LoadWordNet(dir string) (*WordNet, error) {
	return LoadWordNetFS(os.DirFS(dir))
}

// LoadWordNetFS reads a WordNet database from the root of fsys. At least one
// index file must be present; the exception lists are optional.
func LoadWordNetFS(fsys fs.FS) (*WordNet, error) {
	wn := &WordNet{synsets: map[string][]int64{}, bases: map[string][]string{}}
	found := 0
	for p, pos := range wordNetPOS {
		f, err := fsys.Open("index." + pos)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrWordNet, err)
		}
		err = wn.readIndex(f, int64(p))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: index.%s: %v", ErrWordNet, pos, err)
		}
		found++
	}
	if found == 0 {
		return nil, fmt.Errorf("%w: no index.noun, index.verb, index.adj or index.adv", ErrWordNet)
	}
	for _, pos := range wordNetPOS {
		f, err := fsys.Open(pos + ".exc")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrWordNet, err)
		}
		err = wn.readExceptions(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s.exc: %v", ErrWordNet, pos, err)
		}
	}
	return wn, nil
}

// readIndex parses lines "lemma pos synset_cnt p_cnt [ptr...] sense_cnt
// tagsense_cnt offset..." whose last synset_cnt fields are synset offsets.
// Lines starting with a space are the licence header.
func (wn *WordNet) readIndex(r io.Reader, pos int64) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if t == "" || t[0] == ' ' {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 4 {
			return fmt.Errorf("line %d: too few fields", line)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 || n > len(f)-4 {
			return fmt.Errorf("line %d: bad synset count %q", line, f[2])
		}
		word := strings.ToLower(f[0])
		for _, o := range f[len(f)-n:] {
			off, err := strconv.ParseInt(o, 10, 64)
			if err != nil {
				return fmt.Errorf("line %d: bad offset %q", line, o)
			}
			wn.synsets[word] = append(wn.synsets[word], off*4+pos)
		}
	}
	return sc.Err()
}

// readExceptions parses lines "inflected base [base...]".
func (wn *WordNet) readExceptions(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		form := strings.ToLower(f[0])
		for _, b := range f[1:] {
			wn.bases[form] = append(wn.bases[form], strings.ToLower(b))
		}
	}
	return sc.Err()
}

// Synsets returns the synset ids that word may belong to: its own senses
// plus those of its base form (SynonymMatcher: getSynSets ∪ getStemSynSets).
// The result is freshly allocated and sorted in no particular order.
func (wn *WordNet) Synsets(word string) []int64 {
	set := map[int64]struct{}{}
	for _, s := range wn.synsets[word] {
		set[s] = struct{}{}
	}
	if bases, ok := wn.bases[word]; ok {
		for _, b := range bases {
			for _, s := range wn.synsets[b] {
				set[s] = struct{}{}
			}
		}
	} else if m := wn.morph(word); m != "" {
		for _, s := range wn.synsets[m] {
			set[s] = struct{}{}
		}
	}
	out := make([]int64, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	return out
}

// The jar's morphology: WordNet 3.0's suffix rules tried in order, the first
// candidate that is a known word wins.
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

// morph returns the base form of word that the jar's SynonymDictionary.morph
// finds, or "" when none is known. Like the jar it returns the word itself
// for words ending in "ss" or of at most two letters, and it appends "ful"
// to the result for words ending in "ful" (the jar sets that suffix aside
// but then strips from the whole word).
func (wn *WordNet) morph(word string) string {
	end := ""
	if strings.HasSuffix(word, "ful") {
		end = "ful"
	}
	if strings.HasSuffix(word, "ss") || len(word) <= 2 {
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
