package main

import (
	"fmt"

	"github.com/radgen/radgen/memtrans/data"
)

// referenceMaker returns the function that turns an annotation report into
// the reference a generated report is scored against, for mode: "as-is"
// (unchanged), "clean" (the corpus's report cleaning) or "r2gen" (cleaned,
// encoded and decoded with the tokenizer R2Gen builds from the train split,
// so out-of-vocabulary words become <unk> and reports are cut at the
// corpus's maximum length: data.Tokenizer.Reference).
func referenceMaker(ann *data.Annotation, mode string, corpus data.Corpus) (func(string) string, error) {
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
		return func(r string) string { return tok.Reference(r, maxLen) }, nil
	}
	return nil, fmt.Errorf("unknown -refs %q (want r2gen, clean or as-is)", mode)
}
