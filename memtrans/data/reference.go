package data

import "fmt"

// ReferenceFunc returns the function that turns a report of a into the
// reference that generated text is scored against, for mode:
//   - "as-is": the report unchanged;
//   - "clean": the corpus's report cleaning (Corpus.Clean);
//   - "r2gen": as R2Gen scores, cleaned, encoded with truncation and
//     decoded with the tokenizer it builds from a's train split at the
//     corpus's threshold (Tokenizer.Reference), so that words outside the
//     vocabulary read <unk> and reports are cut at the corpus's maximum
//     length.
func (a *Annotation) ReferenceFunc(mode string, corpus Corpus) (func(string) string, error) {
	switch mode {
	case "as-is":
		return func(r string) string { return r }, nil
	case "clean", "r2gen":
		if corpus != IUXray && corpus != MIMICCXR {
			return nil, fmt.Errorf("data: references of unknown corpus %q", corpus)
		}
	default:
		return nil, fmt.Errorf("data: unknown reference mode %q (want r2gen, clean or as-is)", mode)
	}
	if mode == "clean" {
		return corpus.Clean, nil
	}
	train, err := a.Reports("train")
	if err != nil {
		return nil, fmt.Errorf("data: r2gen references build the vocabulary from the train split: %w", err)
	}
	tok, err := BuildTokenizer(corpus, corpus.Threshold(), train)
	if err != nil {
		return nil, err
	}
	maxLen := corpus.MaxSeqLen()
	return func(r string) string { return tok.Reference(r, maxLen) }, nil
}
