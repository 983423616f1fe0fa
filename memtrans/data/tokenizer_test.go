package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/radgen/radgen/internal/testutil"
)

func loadIU(t *testing.T) *Annotation {
	t.Helper()
	path := testutil.File(t, "RADGEN_IU_ANNOTATION", "data/iu_xray/annotation.json")
	a, err := LoadAnnotation(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func iuTokenizer(t *testing.T, a *Annotation) *Tokenizer {
	t.Helper()
	reports, err := a.Reports("train")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := BuildTokenizer(IUXray, IUXray.Threshold(), reports)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// logNoDevice notes in a parity test's log that tokenization uses no
// tensors: it is the same whatever device RADGEN_DEVICE names.
func logNoDevice(t *testing.T) {
	t.Helper()
	t.Log("device: none (tokenization uses no tensors; RADGEN_DEVICE does not apply)")
}

// TestVocabParity: the vocabulary from the IU X-Ray train split equals
// R2Gen's vocab.json token for token.
func TestVocabParity(t *testing.T) {
	logNoDevice(t)
	golden := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	a := loadIU(t)
	tok := iuTokenizer(t, a)
	raw, err := os.ReadFile(filepath.Join(golden, "vocab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Threshold int      `json:"threshold"`
		Tokens    []string `json:"idx2token_from_1"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	got := tok.Tokens()
	if want.Threshold != tok.Threshold() || len(got) != len(want.Tokens) {
		t.Fatalf("threshold %d, %d tokens; golden %d, %d", tok.Threshold(), len(got), want.Threshold, len(want.Tokens))
	}
	for i := range got {
		if got[i] != want.Tokens[i] {
			t.Fatalf("id %d: %q, golden %q", i+1, got[i], want.Tokens[i])
		}
	}
	t.Logf("vocabulary: %d tokens, equal to R2Gen's", len(got))

	// The golden file itself loads as a tokenizer (corpus defaults to IU).
	g, err := ReadTokenizer(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Tokens(), got) || g.Corpus() != IUXray {
		t.Error("vocab.json read back differs")
	}
}

// TestTokenizedParity: cleaned text and ids of all 2,955 studies, and the
// MIMIC cleaner on the test reports, equal R2Gen's.
func TestTokenizedParity(t *testing.T) {
	logNoDevice(t)
	golden := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	a := loadIU(t)
	tok := iuTokenizer(t, a)
	raw, err := os.ReadFile(filepath.Join(golden, "tokenized.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string][]struct {
		ID    string `json:"id"`
		Clean string `json:"clean"`
		IDs   []int  `json:"ids"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, split := range Splits {
		studies, err := a.Split(split)
		if err != nil {
			t.Fatal(err)
		}
		w := want[split]
		if len(w) != len(studies) {
			t.Fatalf("%s: %d studies, golden %d", split, len(studies), len(w))
		}
		ds, err := NewDataset(a, split, tok, DatasetConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range studies {
			if w[i].ID != s.ID {
				t.Fatalf("%s[%d]: id %q, golden %q", split, i, s.ID, w[i].ID)
			}
			if c := CleanIUXray(s.Report); c != w[i].Clean {
				t.Errorf("%s %s: clean\n got %q\nwant %q", split, s.ID, c, w[i].Clean)
			}
			if ids := ds.Examples[i].IDs; !slices.Equal(ids, w[i].IDs) {
				t.Errorf("%s %s: ids\n got %v\nwant %v", split, s.ID, ids, w[i].IDs)
			}
			total++
		}
	}
	if total != 2955 {
		t.Errorf("%d studies compared, want 2955", total)
	}
	test, _ := a.Split("test")
	wm := want["mimic_clean_of_test"]
	if len(wm) != len(test) {
		t.Fatalf("mimic_clean_of_test: %d entries, %d test studies", len(wm), len(test))
	}
	for i, s := range test {
		if c := CleanMIMICCXR(s.Report); wm[i].ID != s.ID || c != wm[i].Clean {
			t.Errorf("MIMIC cleaner on %s:\n got %q\nwant %q (%s)", s.ID, c, wm[i].Clean, wm[i].ID)
		}
	}
	t.Logf("%d studies: cleaned text and ids equal R2Gen's; MIMIC cleaner equal on %d test reports", total, len(test))
}

func TestCleanQuirks(t *testing.T) {
	cases := []struct{ in, iu, mimic string }{
		{"1. The heart is normal in size. 2. No pleural effusion.. Mild T11-T12 degenerative change (XXXX).",
			"the heart is normal in size . no pleural effusion . mild t11-t12 degenerative change xxxx .", ""},
		{"Heart size 1. normal.", "heart size normal .", ""}, // every "1. " goes
		{"A.  . B", "a .  . b .", "a .  . b ."},              // empty sentences kept
		{"", " .", " ."},
		{"Post-surgical <changes> @ [left] {x}: 5% & more!", "post-surgical changes  left x 5  more .", ""},
		{"Line one\nline  two.. ok", "line one\nline  two . ok .", "line one line two . ok ."},
		{"a__b", "ab .", "ab ."}, // '_' is in the class
		{"It's \"quoted\" / back\\slash", "its quoted  backslash .", ""},
	}
	for _, c := range cases {
		if got := CleanIUXray(c.in); got != c.iu {
			t.Errorf("CleanIUXray(%q) = %q, want %q", c.in, got, c.iu)
		}
		if c.mimic == "" {
			continue
		}
		if got := CleanMIMICCXR(c.in); got != c.mimic {
			t.Errorf("CleanMIMICCXR(%q) = %q, want %q", c.in, got, c.mimic)
		}
	}
}

// Python's str.lower and whitespace on non-ASCII text (values from CPython
// 3.11).
func TestPythonStringSemantics(t *testing.T) {
	lower := map[string]string{
		"İ":     "i̇",
		"ΟΔΟΣ":  "οδος",
		"ΟΔΟΣ.": "οδος.",
		"Σ":     "σ",
		"AΣ'B":  "aσ'b",
		"AΣ' B": "aς' b",
		"ÀÉÎ":   "àéî",
		"ǅ":     "ǆ",
		"K":     "k", // Kelvin sign
		"ᾼ":     "ᾳ",
	}
	for in, want := range lower {
		if got := pyLower(in); got != want {
			t.Errorf("pyLower(%q) = %q, want %q", in, got, want)
		}
	}
	if got := pyFields("a\x1cb\u00a0c\u200bd\u3000e"); !slices.Equal(got, []string{"a", "b", "c\u200bd", "e"}) {
		t.Errorf("pyFields = %q", got)
	}
}

func TestEncodeDecode(t *testing.T) {
	tok, err := BuildTokenizer(IUXray, 1, []string{"The heart is normal. The lungs are clear.", "Heart normal."})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".", "<unk>", "are", "clear", "heart", "is", "lungs", "normal", "the"}
	if !slices.Equal(tok.Tokens(), want) {
		t.Fatalf("vocabulary %q, want %q", tok.Tokens(), want)
	}
	ids := tok.Encode(nil, "The heart is enlarged.", 0)
	if !slices.Equal(ids, []int{0, 9, 5, 6, 2, 1, 0}) {
		t.Errorf("Encode = %v", ids)
	}
	if s := tok.Decode(ids[1:]); s != "the heart is <unk> ." {
		t.Errorf("Decode = %q", s)
	}
	if s := tok.Decode(ids); s != "" {
		t.Errorf("Decode with bos = %q, want \"\"", s)
	}
	if s := tok.Decode([]int{5, 99, -1, 5}); s != "heart <unk>" {
		t.Errorf("Decode out of range = %q", s)
	}
	// Truncation counts the bos; a truncated report loses its eos.
	for maxLen, want := range map[int][]int{1: {0}, 3: {0, 9, 5}, 6: {0, 9, 5, 6, 2, 1}, 7: {0, 9, 5, 6, 2, 1, 0}, 8: {0, 9, 5, 6, 2, 1, 0}} {
		if got := tok.Encode(nil, "The heart is enlarged.", maxLen); !slices.Equal(got, want) {
			t.Errorf("Encode(maxLen %d) = %v, want %v", maxLen, got, want)
		}
	}
	// JSON round trip, stable bytes.
	b1, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	var back Tokenizer
	if err := json.Unmarshal(b1, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if !bytes.Equal(b1, b2) || !slices.Equal(back.Tokens(), tok.Tokens()) || back.Threshold() != 1 {
		t.Errorf("round trip: %s vs %s", b1, b2)
	}
	for _, bad := range []string{
		`{"idx2token_from_1": ["b", "a", "<unk>"]}`,
		`{"idx2token_from_1": ["a"]}`,
		`{"idx2token_from_1": ["<unk>", "a b"]}`,
		`{"idx2token_from_1": ["<unk>", "a", "a"]}`,
		`{"corpus": "chexpert", "idx2token_from_1": ["<unk>"]}`,
		"{\"idx2token_from_1\": [\"<unk>\", \"\xff\"]}",
		`[1, 2]`,
	} {
		if _, err := ReadTokenizer(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadTokenizer(%s): no error", bad)
		}
	}
}

// The sentence cleaner as R2Gen writes it, with a regexp (RE2 reads the
// class with the same ':' … '[' range as Python's re).
var sentRE = regexp.MustCompile(`[.,?;*!%^&_+():-\[\]{}]`)

func refSentence(s string) string {
	s = strings.NewReplacer(`"`, "", "/", "", `\`, "", "'", "").Replace(s)
	return sentRE.ReplaceAllString(pyLower(pyStrip(s)), "")
}

// FuzzClean: the cleaners never panic, give valid UTF-8 ending in " .", and
// the byte-set sentence cleaner equals the regexp one.
func FuzzClean(f *testing.F) {
	for _, s := range []string{
		"1. The heart is normal in size. 2. No pleural effusion.. Mild T11-T12 degenerative change (XXXX).",
		"Heart size 1. normal. 3. ok", "A.  . B", "", "İSTANBUL ΟΔΟΣ. ok", "a\n\nb__c....d", "\x1c. \u3000",
		"It's \"quoted\" / back\\slash [x] {y} <z> @ 5% ^ & * +", "\xff\xfe broken",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, clean := range []func(string) string{CleanIUXray, CleanMIMICCXR} {
			out := clean(s)
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 from %q: %q", s, out)
			}
			if !strings.HasSuffix(out, " .") {
				t.Fatalf("%q → %q: no final \" .\"", s, out)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		if got, want := cleanSentence(s), refSentence(s); got != want {
			t.Fatalf("cleanSentence(%q) = %q, regexp %q", s, got, want)
		}
	})
}

func TestReadAnnotationErrors(t *testing.T) {
	ok := `{"id": "S1", "report": "Fine.", "image_path": ["a.png", "b.png"], "split": "train"}`
	cases := []struct {
		name, json, mention string
	}{
		{"empty report", `{"train": [{"id": "S2", "report": "  ", "image_path": ["a.png"]}]}`, `"S2"`},
		{"no report", `{"train": [{"id": "S3", "image_path": ["a.png"]}]}`, `"S3"`},
		{"no images", `{"train": [{"id": "S4", "report": "x", "image_path": []}]}`, `"S4"`},
		{"invalid UTF-8", "{\"train\": [{\"id\": \"S5\", \"report\": \"bad \xff\", \"image_path\": [\"a\"]}]}", `"S5"`},
		{"lone surrogate", `{"train": [{"id": "S6", "report": "bad \udc00", "image_path": ["a"]}]}`, `"S6"`},
		{"unpaired high", `{"train": [{"id": "S7", "report": "bad \ud800x", "image_path": ["a"]}]}`, `"S7"`},
		{"no id", `{"train": [` + ok + `, {"report": "x", "image_path": ["a"]}]}`, `train[1]`},
		{"bad study_id", `{"train": [{"id": "S8", "study_id": "x1", "report": "x", "image_path": ["a"]}]}`, `"S8"`},
		{"not an object", `{"train": 3}`, `train`},
	}
	for _, c := range cases {
		_, err := ReadAnnotation(strings.NewReader(c.json))
		if err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.mention)
		}
	}
	// Accepted: paired surrogates, literal and escaped U+FFFD, numeric ids.
	a, err := ReadAnnotation(strings.NewReader(`{"train": [` + ok + `,
		{"id": 7, "study_id": "50414267", "subject_id": 10000032, "report": "\ud83d\ude00 \ufffd �", "image_path": ["p/x.jpg"]}],
		"    ": []}`))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := a.Split("train")
	if tr[1].ID != "7" || tr[1].StudyID != 50414267 || tr[1].SubjectID != 10000032 || tr[1].Report != "😀 \uFFFD \uFFFD" {
		t.Errorf("second study: %+v", tr[1])
	}
	// A renamed split (as in a published copy with "test" → "    ").
	_, err = a.Split("test")
	if !errors.Is(err, ErrMissingSplit) || !strings.Contains(err.Error(), `"    "`) {
		t.Errorf("missing split: %v", err)
	}
	if _, err := NewDataset(a, "val", mustTok(t), DatasetConfig{}); !errors.Is(err, ErrMissingSplit) {
		t.Errorf("NewDataset on a missing split: %v", err)
	}
	// Too few views for IU X-Ray.
	if _, err := NewDataset(a, "train", mustTok(t), DatasetConfig{}); err == nil || !strings.Contains(err.Error(), `"7"`) {
		t.Errorf("one image for a two-view corpus: %v", err)
	}
}

func mustTok(t *testing.T) *Tokenizer {
	tok, err := NewTokenizer(IUXray, 3, []string{".", Unk, "fine"})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestAnnotationRoundTrip(t *testing.T) {
	a := NewAnnotation(map[string][]Study{
		"test":  {{ID: "b", Report: "r", ImagePath: []string{"x"}, Split: "test"}},
		"train": {{ID: "a", Report: "r", ImagePath: []string{"x", "y"}, Split: "train", Labels: []int8{1, 0}}},
	})
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"train":[`) {
		t.Errorf("splits out of order: %s", b)
	}
	back, err := ReadAnnotation(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := back.Split("train")
	if len(tr) != 1 || !slices.Equal(tr[0].Labels, []int8{1, 0}) || !slices.Equal(back.SplitNames(), []string{"train", "test"}) {
		t.Errorf("round trip: %+v %v", tr, back.SplitNames())
	}
}

// FuzzReadAnnotation: arbitrary bytes never panic, and an accepted
// annotation has valid studies.
func FuzzReadAnnotation(f *testing.F) {
	f.Add([]byte(`{"train": [{"id": "S1", "report": "Fine.", "image_path": ["a.png", "b.png"], "split": "train"}]}`))
	f.Add([]byte(`{"test": [{"id": 3, "study_id": "5", "report": "\ud83d\ude00", "image_path": ["p"]}], "val": []}`))
	f.Add([]byte(`{"train": [{"id": "S", "report": "\udc00", "image_path": ["a"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadAnnotation(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, name := range a.SplitNames() {
			studies, err := a.Split(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range studies {
				if s.ID == "" || pyStrip(s.Report) == "" || len(s.ImagePath) == 0 || !utf8.ValidString(s.Report) {
					t.Fatalf("accepted bad study %+v", s)
				}
			}
		}
	})
}

func TestReference(t *testing.T) {
	tok, err := BuildTokenizer(IUXray, 1, []string{"The heart is normal. The lungs are clear."})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Reference("The heart is enlarged. The lungs are clear.", 60), "the heart is <unk> . the lungs are clear ."; got != want {
		t.Errorf("Reference = %q, want %q", got, want)
	}
	// Truncation counts the bos: 4 ids keep 3 words.
	if got := tok.Reference("The heart is normal.", 4); got != "the heart is" {
		t.Errorf("truncated Reference = %q", got)
	}
}
