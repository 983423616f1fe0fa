package meteor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// Function words of the test sentences below, in the jar's list (DefaultFunctionWords):
// "the", "is", "no", "or".

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %.15g, want %.15g", name, got, want)
	}
}

// Each expected value below is worked out by hand from the formulas in
// Scorer.Score with α = 0.85, β = 0.2, γ = 0.6, δ = 0.75, exact weight 1,
// stem weight 0.6, synonym weight 0.8.
func TestScoreHandComputed(t *testing.T) {
	s, err := New(WithoutSynonym())
	if err != nil {
		t.Fatal(err)
	}
	fmean := func(p, r float64) float64 { return 1 / (0.15/p + 0.85/r) }
	pen := func(frag float64) float64 { return 1 - 0.6*math.Pow(frag, 0.2) }
	cases := []struct {
		name, hyp, ref string
		want           float64
		chunks         int
	}{
		{
			// Identical: P = R = 1, one chunk covering everything, frag = 0.
			name: "identical", hyp: "the heart is normal", ref: "the heart is normal",
			want: 1, chunks: 1,
		},
		{
			// hyp: heart size normal (content) + is (function), all matched:
			//   P = (.75·3 + .25·1)/(.75·3 + .25·1) = 1
			// ref adds "the": R = 2.5/(.75·3 + .25·2) = 2.5/2.75
			// one chunk, 4 of 5 reference words matched: frag = 1/((4+4)/2).
			name: "missing article", hyp: "heart size is normal", ref: "the heart size is normal",
			want: fmean(1, 2.5/2.75) * pen(0.25), chunks: 1,
		},
		{
			// One stem match (effusions ~ effusion, stem "effus"): P = R = 0.6,
			// everything matched in one chunk: frag = 0.
			name: "stem", hyp: "effusions", ref: "effusion",
			want: 0.6, chunks: 1,
		},
		{
			// All five words match exactly, one-to-one, but in 4 chunks
			// ("no" | "pneumothorax" | "or" | "pleural effusion" along the
			// reference): P = R = 1, frag = 4/5.
			name: "reordered", hyp: "no pleural effusion or pneumothorax", ref: "no pneumothorax or pleural effusion",
			want: pen(0.8), chunks: 4,
		},
		{
			// The reference word has an exact (hyp 2nd word) and a stem (hyp
			// 1st word) candidate; the exact one wins. P = .75/(.75·2) = 0.5,
			// R = 1, one chunk, frag = 1/((1+1)/2) = 1.
			name: "exact beats stem", hyp: "effusion effusions", ref: "effusions",
			want: fmean(0.5, 1) * pen(1), chunks: 1,
		},
		{
			// The jar's search counts a stem match as 0 matches (0.5 truncated
			// to int) and prefers fewer chunks, so an ambiguous stem match
			// (one hypothesis word, two reference candidates) loses to no
			// alignment at all: score 0. An exhaustive aligner would give
			// 0.6·… here; this package follows the jar.
			name: "jar drops ambiguous stem", hyp: "effusions x", ref: "effusion effusion",
			want: 0, chunks: 0,
		},
		{
			// Nothing in common.
			name: "disjoint", hyp: "pneumothorax", ref: "effusion",
			want: 0, chunks: 0,
		},
		{
			// Empty hypothesis: precision undefined → 0.
			name: "empty", hyp: "", ref: "effusion",
			want: 0, chunks: 0,
		},
	}
	for _, c := range cases {
		st := s.SegmentStats(c.hyp, []string{c.ref})
		near(t, c.name, s.Score(st), c.want)
		if st.Chunks != c.chunks {
			t.Errorf("%s: %d chunks, want %d", c.name, st.Chunks, c.chunks)
		}
	}
}

func TestCorpusSumsStatistics(t *testing.T) {
	s, _ := New(WithoutSynonym())
	res, err := s.Corpus(
		[][]string{{"the heart size is normal"}, {"effusion"}},
		[]string{"heart size is normal", "effusions"})
	if err != nil {
		t.Fatal(err)
	}
	// Summed: test 5 words (1 function), ref 6 words (2 function); exact
	// content 3 + function 1 and stem content 1 on both sides; 5 matches
	// each side; 1 chunk: the second segment is matched whole in one chunk,
	// and the jar's addStats leaves such a chunk out.
	//   P = (.75·(3 + 0.6) + .25·1)/(.75·4 + .25·1) = 2.95/3.25
	//   R = 2.95/(.75·4 + .25·2) = 2.95/3.5,  frag = 1/5.
	p, r := 2.95/3.25, 2.95/3.5
	want := 1 / (0.15/p + 0.85/r) * (1 - 0.6*math.Pow(0.2, 0.2))
	near(t, "corpus", res.Corpus, want)
	near(t, "segment 1", res.PerSegment[1], 0.6)
	if mean := (res.PerSegment[0] + res.PerSegment[1]) / 2; math.Abs(mean-res.Corpus) < 1e-3 {
		t.Errorf("corpus score %.6f should not be the mean of segments %.6f", res.Corpus, mean)
	}
}

func TestBestReference(t *testing.T) {
	s, _ := New(WithoutSynonym())
	st := s.SegmentStats("effusions", []string{"pneumothorax", "effusion", "effusions"})
	near(t, "best of three", s.Score(st), 1)
	st = s.SegmentStats("effusions", []string{"pneumothorax", "effusion"})
	near(t, "best of two", s.Score(st), 0.6)
}

// With the synonym module too, "effusions" matches "effusion" twice (stem
// and synonym: WordNet knows "effusion" and the plural through its suffix
// rule). Neither match is fixed in advance, both count 0 in the search, and
// the search prefers no chunk to one: the jar scores 0, and so do we.
func TestStemAndSynonymBothMatch(t *testing.T) {
	s, _ := New()
	st := s.SegmentStats("effusions", []string{"effusion"})
	near(t, "exact+stem+synonym", s.Score(st), 0)
	s, _ = New(WithoutSynonym())
	near(t, "exact+stem", s.Score(s.SegmentStats("effusions", []string{"effusion"})), 0.6)
}

// Stats.Add leaves out the chunk of a segment matched whole in one chunk,
// as the jar's addStats: a corpus of two identical pairs scores 1, not
// 1 − γ·(2/…)^β.
func TestAddSkipsWholeSegmentChunk(t *testing.T) {
	s, _ := New()
	r, err := s.Corpus([][]string{{"the heart is normal"}, {"no effusion"}}, []string{"the heart is normal", "no effusion"})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "corpus", r.Corpus, 1)
	if r.Stats.Chunks != 0 {
		t.Errorf("summed chunks %d, want 0", r.Stats.Chunks)
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"the heart is normal .", "the heart is normal ."},
		{"Mild T11-T12 degenerative change (XXXX).", "mild t11 t12 degenerative change ( xxxx ) ."},
		{"Mr. Smith's heart, 3,000 ml.", "mr. smith 's heart , 3,000 ml ."},
		{"No effusion... Stable.", "no effusion ... stable ."},
		{"U.S.-based <unk> don't", "us based < unk > don 't"},
		// Expected values below are the jar's Normalizer (English, keep
		// punctuation) followed by toLowerCase, run on these lines.
		{"Mr. Smith's heart, 3,000 ml. No. 5 and No. 6 Nos. 7 Nr. 8 Jan. Visit",
			"mr. smith 's heart , 3,000 ml . no. 5 and no. 6 nos. 7 nr. 8 jan . visit"},
		{"a b. C d. e.g. F i.e. X-XXXX xxxx-xxxx 5-mm 2.5cm p.m. Dr. Who St. Mary",
			"a b . c d. eg f ie x xxxx xxxx xxxx 5 mm 2.5cm pm dr. who st. mary"},
		{"nbsp\u00a0here ideo\u3000graphic quad\u2000x lsep\u2028y psep\u2029z ogham\u1680w nnbsp\u202fv mm\u205fu",
			"nbsp here ideo graphic quad x lsep \u2028 y psep \u2029 z ogham \u1680 w nnbsp v mm u"},
		{"Ünïcödé Straße ŽŠ ЖИЗНЬ, Ω-omega; αβγ: test İstanbul ΣΑΣ",
			"ünïcödé straße žš жизнь , ω -omega ; α β γ : test i\u0307stanbul σ α σ"},
		{"  spaced\tout  ", "spaced out"},
	}
	for _, c := range cases {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCleanHypothesis(t *testing.T) {
	if got := CleanHypothesis("a ||| b   c"); got != "a b  c" { // Python: "a  b   c" then "  " → " " once each
		t.Errorf("got %q", got)
	}
}

func TestNameAndModules(t *testing.T) {
	for _, c := range []struct {
		opts    []Option
		name    string
		weights []float64
	}{
		{nil, "METEOR (exact+stem+synonym; no paraphrase)", []float64{1, 0.6, 0.8}},
		{[]Option{WithoutSynonym()}, "METEOR (exact+stem; no synonym, no paraphrase)", []float64{1, 0.6}},
		// The jar weighs modules by position: -m "exact synonym" gives
		// synonym matches the second weight, 0.6.
		{[]Option{WithoutStem()}, "METEOR (exact+synonym; no stem, no paraphrase)", []float64{1, 0.6}},
		{[]Option{WithModules(Exact)}, "METEOR (exact; no stem, no synonym, no paraphrase)", []float64{1}},
	} {
		s, err := New(c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Name(); got != c.name {
			t.Errorf("Name() = %q, want %q", got, c.name)
		}
		if !slices.Equal(s.weights, c.weights) {
			t.Errorf("%s: weights %v, want %v", c.name, s.weights, c.weights)
		}
	}
	s, _ := New(WithoutStem())
	if m := s.Modules(); len(m) != 2 || m[1] != Synonym {
		t.Errorf("Modules() = %v", m)
	}
	// Synonym weight by position: "large" ~ "big" scores 0.6 with
	// -m "exact synonym", 0.8 with all three modules.
	near(t, "exact synonym", s.Score(s.SegmentStats("large", []string{"big"})), 0.6)
	s, _ = New()
	near(t, "exact stem synonym", s.Score(s.SegmentStats("large", []string{"big"})), 0.8)
}

func TestParseModules(t *testing.T) {
	m, err := ParseModules(" exact  stem\tsynonym ")
	if err != nil || !slices.Equal(m, DefaultModules) {
		t.Errorf("ParseModules = %v, %v", m, err)
	}
	for _, bad := range []string{"", "exact paraphrase", "exact stems"} {
		if _, err := ParseModules(bad); !errors.Is(err, ErrOption) {
			t.Errorf("ParseModules(%q): %v", bad, err)
		}
	}
}

// A hand-made table in the jar's format (test data for radgen, not
// WordNet content): "big" and "large" share synset 1740, "lesion" and
// "wound" share 200000, "mouse" has its own, and "bigger" and "mice" are
// exceptions of "big" and "mouse". "sore" is listed twice: the second entry
// wins, as in the jar.
const (
	fixtureSynsets = "big\n00001740 00002000\nlarge\n1740\nlesion\n00200000\nwound\n200000 5\n" +
		"mouse\n300\nsore\n200000\nsore\n7\n"
	fixtureExceptions = "big\nbigger\nmouse\nmice\n"
)

func TestReadWordNet(t *testing.T) {
	wn, err := ReadWordNet(strings.NewReader(fixtureSynsets), strings.NewReader(fixtureExceptions))
	if err != nil {
		t.Fatal(err)
	}
	share := func(a, b string) bool { return intersects(wn.synsetsOf(a), wn.synsetsOf(b)) }
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"big", "large", true},
		{"bigger", "large", true},   // exceptions
		{"lesions", "wound", true},  // suffix rule "s" → ""
		{"mice", "mouse", true},     // exceptions
		{"mouse", "lesion", false},  // different synsets
		{"unknown", "large", false}, // not in the dictionary
		{"sore", "wound", false},    // the second entry of "sore" replaced the first
	} {
		if got := share(c.a, c.b); got != c.want {
			t.Errorf("synonyms(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if got := wn.Synsets("wound"); !slices.Equal(got, []int64{5, 200000}) {
		t.Errorf("Synsets(wound) = %v", got)
	}

	s, err := New(WithWordNet(wn))
	if err != nil {
		t.Fatal(err)
	}
	// Two synonym matches (third module, weight 0.8), both content words,
	// one chunk: P = R = 0.8, frag = 0.
	st := s.SegmentStats("large lesions", []string{"big wound"})
	near(t, "synonyms", s.Score(st), 0.8)
	if st.TestContent[2] != 2 {
		t.Errorf("synonym matches = %v", st.TestContent)
	}

	for _, bad := range []struct{ syn, exc string }{
		{"big\n", ""},              // no second line
		{"big\nx\n", ""},           // not a number
		{"big\n99999999999\n", ""}, // beyond Java's int
		{"", "big"},                // no forms line
	} {
		if _, err := ReadWordNet(strings.NewReader(bad.syn), strings.NewReader(bad.exc)); !errors.Is(err, ErrWordNet) {
			t.Errorf("ReadWordNet(%q, %q): %v", bad.syn, bad.exc, err)
		}
	}
}

func TestEnglishWordNet(t *testing.T) {
	wn, err := EnglishWordNet()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(wn.synsets); n != 147306 {
		t.Errorf("%d words, want the jar's 147306", n)
	}
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// "big" and "large" share WordNet synsets; different stems.
	near(t, "big/large", s.Score(s.SegmentStats("large", []string{"big"})), 0.8)
	near(t, "exact beats synonym", s.Score(s.SegmentStats("big", []string{"big"})), 1)
}

func FuzzReadWordNet(f *testing.F) {
	f.Add(fixtureSynsets, fixtureExceptions)
	f.Add("a\n-1 +2 0\n", "a\r\nb c\r\n")
	f.Add("", "")
	f.Add("x", "y\n")
	f.Fuzz(func(t *testing.T, syn, exc string) {
		wn, err := ReadWordNet(strings.NewReader(syn), strings.NewReader(exc))
		if err != nil {
			if !errors.Is(err, ErrWordNet) {
				t.Fatalf("error %v is not ErrWordNet", err)
			}
			return
		}
		for w := range wn.synsets {
			got := wn.Synsets(w)
			if !slices.IsSorted(got) {
				t.Fatalf("Synsets(%q) = %v not sorted", w, got)
			}
		}
		for w := range wn.bases {
			wn.Synsets(w)
		}
	})
}

func TestErrors(t *testing.T) {
	s, _ := New()
	if _, err := s.Corpus(nil, nil); !errors.Is(err, ErrInput) {
		t.Errorf("empty: %v", err)
	}
	if _, err := s.Corpus([][]string{{"a"}}, []string{"a", "b"}); !errors.Is(err, ErrInput) {
		t.Errorf("mismatch: %v", err)
	}
	if _, err := s.Corpus([][]string{{}}, []string{"a"}); !errors.Is(err, ErrInput) {
		t.Errorf("no reference: %v", err)
	}
	if _, err := New(WithBeamSize(0)); !errors.Is(err, ErrOption) {
		t.Errorf("beam: %v", err)
	}
	for _, o := range []Option{WithModules(), WithModules(Exact, Exact), WithModules(Module(7)), WithWordNet(nil)} {
		if _, err := New(o); !errors.Is(err, ErrOption) {
			t.Errorf("option: %v", err)
		}
	}
	if _, err := New(WithModules(Stem), WithoutStem()); !errors.Is(err, ErrOption) {
		t.Errorf("no modules left: %v", err)
	}
}
