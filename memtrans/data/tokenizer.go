package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Corpus names a dataset the way R2Gen's --dataset_name does. It selects the
// report cleaner and the defaults of the tokenizer and the loader.
type Corpus string

// The two corpora of R2Gen.
const (
	IUXray   Corpus = "iu_xray"   // IU X-Ray (Open-i): two views per study
	MIMICCXR Corpus = "mimic_cxr" // MIMIC-CXR: the first image of a study
)

// ErrCorpus is returned for a corpus name other than [IUXray] and [MIMICCXR].
var ErrCorpus = errors.New("data: unknown corpus")

func (c Corpus) check() error {
	if c != IUXray && c != MIMICCXR {
		return fmt.Errorf("%w %q (want %q or %q)", ErrCorpus, string(c), IUXray, MIMICCXR)
	}
	return nil
}

// Clean is the corpus's report cleaner: [CleanIUXray] or [CleanMIMICCXR].
func (c Corpus) Clean(report string) string {
	if c == IUXray {
		return CleanIUXray(report)
	}
	return CleanMIMICCXR(report)
}

// Threshold is R2Gen's minimum count for a word to enter the vocabulary:
// 3 for IU X-Ray, 10 for MIMIC-CXR (the run scripts' values).
func (c Corpus) Threshold() int {
	if c == IUXray {
		return 3
	}
	return 10
}

// MaxSeqLen is R2Gen's max_seq_length: 60 for IU X-Ray, 100 for MIMIC-CXR.
// It counts the leading bos, so at most MaxSeqLen−1 words are kept.
func (c Corpus) MaxSeqLen() int {
	if c == IUXray {
		return 60
	}
	return 100
}

// Views is the number of images per study: 2 for IU X-Ray, 1 for MIMIC-CXR.
func (c Corpus) Views() int {
	if c == IUXray {
		return 2
	}
	return 1
}

// Unk is the out-of-vocabulary token.
const Unk = "<unk>"

// Tokenizer is R2Gen's tokenizer: a sorted vocabulary whose i-th word has id
// i+1; id 0 is bos, eos and pad at once. A Tokenizer is immutable and safe
// for concurrent use.
type Tokenizer struct {
	corpus    Corpus
	threshold int
	tokens    []string       // tokens[i] has id i+1
	ids       map[string]int // token → id
	unk       int
}

// BuildTokenizer is R2Gen's create_vocabulary: every report is cleaned with
// the corpus's cleaner and split on whitespace; the words seen at least
// threshold times, plus [Unk], sorted in code-point order (Python's sort),
// get ids 1, 2, …. R2Gen builds it from the train split only
// ([Annotation.Reports]); threshold is corpus.Threshold() there.
func BuildTokenizer(corpus Corpus, threshold int, reports []string) (*Tokenizer, error) {
	if err := corpus.check(); err != nil {
		return nil, err
	}
	if threshold < 1 {
		return nil, fmt.Errorf("data: vocabulary threshold %d, want ≥ 1", threshold)
	}
	counts := map[string]int{}
	for _, r := range reports {
		for _, w := range pyFields(corpus.Clean(r)) {
			counts[w]++
		}
	}
	vocab := []string{Unk}
	for w, n := range counts {
		if n >= threshold && w != Unk {
			vocab = append(vocab, w)
		}
	}
	// Go compares strings bytewise; on valid UTF-8 that is code-point order.
	slices.Sort(vocab)
	return newTokenizer(corpus, threshold, vocab)
}

// NewTokenizer returns the tokenizer of an existing vocabulary: tokens[i]
// gets id i+1. The vocabulary must be as BuildTokenizer makes them: sorted,
// without duplicates or whitespace, valid UTF-8, and containing [Unk].
// threshold is recorded only.
func NewTokenizer(corpus Corpus, threshold int, tokens []string) (*Tokenizer, error) {
	if err := corpus.check(); err != nil {
		return nil, err
	}
	return newTokenizer(corpus, threshold, slices.Clone(tokens))
}

func newTokenizer(corpus Corpus, threshold int, tokens []string) (*Tokenizer, error) {
	t := &Tokenizer{corpus: corpus, threshold: threshold, tokens: tokens, ids: make(map[string]int, len(tokens))}
	for i, w := range tokens {
		switch {
		case w == "" || !utf8.ValidString(w) || strings.IndexFunc(w, pyIsSpace) >= 0:
			return nil, fmt.Errorf("data: vocabulary token %d %q is empty, not UTF-8 or has whitespace", i+1, w)
		case i > 0 && tokens[i-1] >= w:
			return nil, fmt.Errorf("data: vocabulary not sorted or duplicated at %d: %q after %q", i+1, w, tokens[i-1])
		}
		t.ids[w] = i + 1
	}
	unk, ok := t.ids[Unk]
	if !ok {
		return nil, fmt.Errorf("data: vocabulary has no %s", Unk)
	}
	t.unk = unk
	return t, nil
}

// Corpus returns the corpus whose cleaner the tokenizer applies.
func (t *Tokenizer) Corpus() Corpus { return t.corpus }

// Threshold returns the count threshold the vocabulary was built with.
func (t *Tokenizer) Threshold() int { return t.threshold }

// Len is the number of words including [Unk] (R2Gen's get_vocab_size). Ids
// run from 0 (bos/eos/pad) to Len(), so a model's output layer has Len()+1
// entries.
func (t *Tokenizer) Len() int { return len(t.tokens) }

// Tokens returns a copy of the vocabulary; Tokens()[i] has id i+1.
func (t *Tokenizer) Tokens() []string { return slices.Clone(t.tokens) }

// ID returns the id of a word, or the id of [Unk] for an unknown word.
func (t *Tokenizer) ID(word string) int {
	if id, ok := t.ids[word]; ok {
		return id
	}
	return t.unk
}

// UnkID returns the id of [Unk].
func (t *Tokenizer) UnkID() int { return t.unk }

// Token returns the word of an id in 1…Len(), "" for 0 and [Unk] otherwise.
func (t *Tokenizer) Token(id int) string {
	switch {
	case id == 0:
		return ""
	case id < 1 || id > len(t.tokens):
		return Unk
	}
	return t.tokens[id-1]
}

// Clean applies the corpus's report cleaner.
func (t *Tokenizer) Clean(report string) string { return t.corpus.Clean(report) }

// Encode appends to dst R2Gen's ids of report, [0, w1 … wn, 0], truncated to
// maxLen ids when maxLen > 0 (R2Gen's tokenizer(report)[:max_seq_length]:
// the bos counts, and a truncated report loses its final 0).
func (t *Tokenizer) Encode(dst []int, report string, maxLen int) []int {
	return t.EncodeClean(dst, t.Clean(report), maxLen)
}

// EncodeClean is Encode of an already cleaned report.
func (t *Tokenizer) EncodeClean(dst []int, clean string, maxLen int) []int {
	start := len(dst)
	dst = append(dst, 0)
	for _, w := range pyFields(clean) {
		if maxLen > 0 && len(dst)-start >= maxLen {
			return dst
		}
		dst = append(dst, t.ID(w))
	}
	if maxLen > 0 && len(dst)-start >= maxLen {
		return dst
	}
	return append(dst, 0)
}

// Reference returns a report as R2Gen scores generated text against it:
// cleaned, encoded with truncation to maxLen ids (bos included) and decoded
// back, so words outside the vocabulary read <unk> and a long report is cut.
func (t *Tokenizer) Reference(report string, maxLen int) string {
	ids := t.Encode(nil, report, maxLen)
	if len(ids) == 0 {
		return ""
	}
	return t.Decode(ids[1:])
}

// Decode is R2Gen's decode: the words of ids joined by single spaces,
// stopping at the first id ≤ 0 (0 is eos). Ids above Len() read as [Unk]. A
// generated sequence is passed without its bos; a leading 0 gives "".
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if id <= 0 {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Token(id))
	}
	return b.String()
}

// vocabJSON is the serialised vocabulary. idx2token_from_1 and threshold are
// the names of ../shared/golden/r2gen/vocab.json, so that file loads as is.
type vocabJSON struct {
	Corpus    Corpus   `json:"corpus,omitempty"`
	Threshold int      `json:"threshold"`
	Tokens    []string `json:"idx2token_from_1"`
}

// MarshalJSON encodes the tokenizer as {"corpus", "threshold",
// "idx2token_from_1"}. The encoding is stable: equal vocabularies give equal
// bytes, so a checkpoint can embed it and be compared byte for byte.
func (t *Tokenizer) MarshalJSON() ([]byte, error) {
	return json.Marshal(vocabJSON{Corpus: t.corpus, Threshold: t.threshold, Tokens: t.tokens})
}

// UnmarshalJSON decodes what MarshalJSON writes and validates it as
// [NewTokenizer] does. A missing corpus means [IUXray], as in R2Gen's
// golden vocab.json.
func (t *Tokenizer) UnmarshalJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("data: vocabulary is not valid UTF-8")
	}
	var v vocabJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("data: vocabulary: %w", err)
	}
	if v.Corpus == "" {
		v.Corpus = IUXray
	}
	nt, err := NewTokenizer(v.Corpus, v.Threshold, v.Tokens)
	if err != nil {
		return err
	}
	*t = *nt
	return nil
}

// ReadTokenizer reads a vocabulary written by [Tokenizer.MarshalJSON].
func ReadTokenizer(r io.Reader) (*Tokenizer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	t := new(Tokenizer)
	if err := t.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return t, nil
}
