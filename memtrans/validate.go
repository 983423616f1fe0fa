package memtrans

import (
	"context"
	"fmt"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics"
)

// BLEUValidator returns R2Gen's validation monitor: BLEU-4 of the model's
// reports (beam search of width beam) on the studies of split, against the
// references as R2Gen scores them (the tokenizer's round trip of each report:
// cleaned, truncated, rare words as <unk>). The scores map also holds
// BLEU-1..3 and ROUGE-L.
func BLEUValidator(ann *data.Annotation, split, imageDir string, beam int) (Validator, error) {
	studies, err := ann.Split(split)
	if err != nil {
		return nil, err
	}
	if len(studies) == 0 {
		return nil, fmt.Errorf("memtrans: split %q is empty", split)
	}
	return func(ctx context.Context, m *Model, epoch int) (float64, map[string]float64, error) {
		tok := m.Tokenizer()
		var in []Study
		var refs [][]string
		for _, s := range studies {
			st, err := m.StudyFromAnnotation(s, imageDir)
			if err != nil {
				return 0, nil, err
			}
			in = append(in, st)
			refs = append(refs, []string{tok.Reference(s.Report, m.cfg.MaxSeqLen())})
		}
		reps, err := m.Generate(ctx, in, WithBeamSize(beam))
		if err != nil {
			return 0, nil, err
		}
		hyps := make([]string, len(reps))
		for i, r := range reps {
			hyps[i] = r.Text
		}
		b, err := metrics.BLEU(refs, hyps)
		if err != nil {
			return 0, nil, err
		}
		r, err := metrics.ROUGEL(refs, hyps)
		if err != nil {
			return 0, nil, err
		}
		scores := map[string]float64{"BLEU_1": b.Corpus[0], "BLEU_2": b.Corpus[1], "BLEU_3": b.Corpus[2], "BLEU_4": b.Corpus[3], "ROUGE_L": r.Corpus}
		return b.Corpus[3], scores, nil
	}, nil
}
