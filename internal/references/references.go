// Package references turns annotation reports into the references generated
// reports are scored against, in the modes the scoring commands share
// (examples/score and examples/beam's score pipeline).
package references

import (
	"fmt"

	"github.com/radgen/radgen/memtrans/data"
)

// Maker returns the function that turns an annotation report into a
// reference for mode: "as-is" (unchanged), "clean" (the corpus's report
// cleaning) or "r2gen" (cleaned, encoded and decoded with the tokenizer R2Gen
// builds from the train split, so out-of-vocabulary words become <unk> and
// reports are cut at the corpus's maximum length).
func Maker(ann *data.Annotation, mode string, corpus data.Corpus) (func(string) string, error) {
	switch mode {
	case "as-is":
		return func(r string) string { return r }, nil
	case "clean":
		if corpus != data.IUXray && corpus != data.MIMICCXR {
			return nil, fmt.Errorf("unknown corpus %q", corpus)
		}
		return corpus.Clean, nil
	case "r2gen":
		train, err := ann.Reports("train")
		if err != nil {
			return nil, fmt.Errorf("-refs r2gen builds the vocabulary from the train split: %w", err)
		}
		tok, err := data.BuildTokenizer(corpus, corpus.Threshold(), train)
		if err != nil {
			return nil, err
		}
		maxLen := corpus.MaxSeqLen()
		return func(r string) string {
			ids := tok.Encode(nil, r, maxLen)
			return tok.Decode(ids[1:])
		}, nil
	}
	return nil, fmt.Errorf("unknown -refs %q (want r2gen, clean or as-is)", mode)
}
