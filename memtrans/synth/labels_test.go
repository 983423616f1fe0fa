package synth

import (
	"testing"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/metrics/chexpert"
)

// The labeler reads every synthetic report, as written and as the model
// sees it (R2Gen's cleaned, lower-case form), as the findings it was
// written from: the clinical-efficacy table measures the model, not the
// labeler. Every combination of findings is tried.
func TestLabelerReadsSyntheticReports(t *testing.T) {
	lab, err := chexpert.New()
	if err != nil {
		t.Fatal(err)
	}
	sides := []data.Side{data.None, data.Left, data.Right, data.Both}
	n := 0
	for _, ctr := range []float64{0.42, 0.6} {
		for _, eff := range sides {
			for _, op := range sides[:3] {
				for _, zone := range []data.Zone{data.Upper, data.Lower} {
					for _, ptx := range sides[:3] {
						for _, dev := range []data.Device{data.NoDevice, data.Pacemaker, data.Catheter} {
							f := data.Findings{CTR: ctr, Effusion: eff, Opacity: op, OpacityZone: zone, Pneumothorax: ptx, Device: dev}
							want := findingLabels(f.Labels())
							for _, text := range []string{f.Report(), data.CleanIUXray(f.Report())} {
								got := lab.Label(text)
								for o := chexpert.Observation(0); o < chexpert.NumObservations; o++ {
									if (got[o] == chexpert.Positive) != (want[o] == chexpert.Positive) {
										t.Errorf("%s: %v read %v, the findings say %v\n  %q", o, f, got[o], want[o], text)
									}
								}
								n++
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d reports labelled as their findings", n)
}
