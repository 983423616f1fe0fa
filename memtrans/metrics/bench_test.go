package metrics

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// benchSentences are R2Gen-cleaned IU X-Ray style sentences (lower case,
// " ." between sentences) that synthetic reports are drawn from.
var benchSentences = []string{
	"the heart is normal in size", "the heart size is normal", "mild cardiomegaly",
	"the cardiomediastinal silhouette is within normal limits", "stable cardiomediastinal silhouette",
	"the mediastinum is unremarkable", "the lungs are clear", "the lungs are hyperexpanded",
	"no pneumothorax or pleural effusion", "there is no focal airspace consolidation",
	"no focal consolidation pleural effusion or pneumothorax", "small left pleural effusion",
	"bibasilar opacities may represent atelectasis", "there is left basilar atelectasis",
	"no acute bony abnormality", "degenerative changes of the thoracic spine",
	"calcified granuloma in the right upper lobe", "mild pulmonary edema",
	"no evidence of pneumonia", "right lower lobe pneumonia cannot be excluded",
	"the xxxx are unremarkable", "there are xxxx opacities in the lung bases",
	"the pulmonary vascularity is within normal limits", "healed right rib fractures",
	"right picc line in place", "no acute cardiopulmonary abnormality",
	"interval resolution of the left pleural effusion", "stable appearance of the chest",
}

// benchReports returns n synthetic reference/hypothesis pairs of 4–7
// sentences each, the same for every run.
func benchReports(n int) ([][]string, []string) {
	rng := rand.New(rand.NewPCG(1, 1))
	report := func() string {
		k := 4 + rng.IntN(4)
		parts := make([]string, k)
		for i := range parts {
			parts[i] = benchSentences[rng.IntN(len(benchSentences))]
		}
		return strings.Join(parts, " . ") + " ."
	}
	refs := make([][]string, n)
	hyps := make([]string, n)
	for i := range refs {
		refs[i] = []string{report()}
		hyps[i] = report()
	}
	return refs, hyps
}

// BenchmarkEvaluate scores 3,000 reports (IU X-Ray's test split ×5) and
// reports the throughput in reports/s, with every metric and per group.
func BenchmarkEvaluate(b *testing.B) {
	const n = 3000
	refs, hyps := benchReports(n)
	cases := []struct {
		name string
		opts []Option
	}{
		{"all", nil},
		{"coco", []Option{WithoutMETEOR(), WithoutClinicalEfficacy()}},
		{"coco+meteor", []Option{WithoutClinicalEfficacy()}},
		{"coco+ce", []Option{WithoutMETEOR()}},
		{"all/1-worker", []Option{WithConcurrency(1)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ev, err := NewEvaluator(c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ev.Evaluate(b.Context(), refs, hyps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}
