package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testAnnotation = `{
 "train": [
  {"id": "a", "report": "The heart is normal in size. No pleural effusion.", "image_path": ["a/0.png"], "split": "train"},
  {"id": "b", "report": "The heart is normal in size. No pneumothorax.", "image_path": ["b/0.png"], "split": "train"},
  {"id": "c", "report": "The heart is normal in size. No pleural effusion.", "image_path": ["c/0.png"], "split": "train"}
 ],
 "val": [],
 "test": [
  {"id": "t1", "report": "The heart is normal in size. No pleural effusion.", "image_path": ["t1/0.png"], "split": "test"},
  {"id": "t2", "report": "Small left pleural effusion. The heart is normal in size.", "image_path": ["t2/0.png"], "split": "test"}
 ]
}`

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScoreFormats(t *testing.T) {
	ann := write(t, "annotation.json", testAnnotation)
	gens := map[string]string{
		"gen.jsonl": `{"id": "t1", "report": "the heart is normal in size . no pleural effusion ."}
{"id": "t2", "report": "the heart is normal in size . no pleural effusion ."}
`,
		"gen_array.json": `[{"id": "t1", "report": "the heart is normal in size . no pleural effusion ."},
 {"id": "t2", "report": "the heart is normal in size . no pleural effusion ."}]`,
		"gen_map.json": `{"t1": "the heart is normal in size . no pleural effusion .",
 "t2": "the heart is normal in size . no pleural effusion ."}`,
	}
	var first map[string]any
	for name, content := range gens {
		var out, errb bytes.Buffer
		err := run(t.Context(), []string{"-ann", ann, "-gen", write(t, name, content), "-json"}, &out, &errb)
		if err != nil {
			t.Fatalf("%s: %v (%s)", name, err, errb.String())
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got["n"].(float64) != 2 {
			t.Errorf("%s: n = %v", name, got["n"])
		}
		// t1 is reproduced exactly; with R2Gen references ("<unk>" for words
		// seen fewer than 3 times in train) t2's reference is
		// "<unk> <unk> pleural effusion . the heart is normal in size .".
		if b1 := got["BLEU_1"].(float64); b1 <= 0.5 || b1 >= 1 {
			t.Errorf("%s: BLEU_1 = %v", name, b1)
		}
		if got["METEOR_name"] != "METEOR (exact+stem+synonym; no paraphrase)" {
			t.Errorf("METEOR name %v", got["METEOR_name"])
		}
		if first == nil {
			first = got
		} else if got["BLEU_4"] != first["BLEU_4"] || got["CIDEr"] != first["CIDEr"] {
			t.Errorf("%s: formats disagree", name)
		}
	}
}

func TestScoreRefsModes(t *testing.T) {
	ann := write(t, "annotation.json", testAnnotation)
	gen := write(t, "gen.jsonl", `{"id": "t1", "report": "the heart is normal in size . no pleural effusion ."}
{"id": "t2", "report": "small left pleural effusion . the heart is normal in size ."}
`)
	bleu4 := map[string]float64{}
	for _, mode := range []string{"r2gen", "clean", "as-is"} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{"-ann", ann, "-gen", gen, "-refs", mode, "-json", "-no-meteor", "-no-ce"}, &out, &errb); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var got map[string]any
		json.Unmarshal(out.Bytes(), &got)
		bleu4[mode] = got["BLEU_4"].(float64)
	}
	// The cleaned references equal the hypotheses exactly.
	if b := bleu4["clean"]; b < 0.999999 {
		t.Errorf("clean: BLEU-4 %v, want 1", b)
	}
	// R2Gen references replace rare words by <unk>, raw ones keep case and punctuation.
	if bleu4["r2gen"] >= bleu4["clean"] || bleu4["as-is"] >= bleu4["clean"] {
		t.Errorf("BLEU-4 by mode: %v", bleu4)
	}
}

func TestScoreMissing(t *testing.T) {
	ann := write(t, "annotation.json", testAnnotation)
	gen := write(t, "gen.jsonl", `{"id": "t1", "report": "no pleural effusion ."}`)
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"-ann", ann, "-gen", gen}, &out, &errb); err == nil || !strings.Contains(err.Error(), "no generated report") {
		t.Fatalf("want a missing-report error, got %v", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"-ann", ann, "-gen", gen, "-skip-missing"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BLEU-4", "ROUGE-L", "CIDEr-D", "METEOR (exact+stem+synonym; no paraphrase)", "CE micro", "skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// -meteor-modules picks METEOR's modules as the jar's -m does, and the
// output names them.
func TestScoreMeteorModules(t *testing.T) {
	ann := write(t, "annotation.json", testAnnotation)
	gen := write(t, "gen.jsonl", `{"id": "t1", "report": "the heart is normal in size . no pleural effusions ."}
{"id": "t2", "report": "small left pleural effusion . the heart is normal in size ."}
`)
	for mods, want := range map[string]string{
		"exact stem":         "METEOR (exact+stem; no synonym, no paraphrase)",
		"exact":              "METEOR (exact; no stem, no synonym, no paraphrase)",
		"exact stem synonym": "METEOR (exact+stem+synonym; no paraphrase)",
	} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{"-ann", ann, "-gen", gen, "-json", "-no-ce", "-meteor-modules", mods}, &out, &errb); err != nil {
			t.Fatalf("%s: %v", mods, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got["METEOR_name"] != want {
			t.Errorf("-meteor-modules %q: name %v, want %q", mods, got["METEOR_name"], want)
		}
	}
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"-ann", ann, "-gen", gen, "-meteor-modules", "exact paraphrase"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "paraphrase") {
		t.Errorf("paraphrase: want an error, got %v", err)
	}
}
