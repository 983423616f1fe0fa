package chexpert

import (
	"errors"
	"math"
	"testing"
)

// fromValues builds Labels from the CheXpert encoding (1, 0, -1, NaN).
func fromValues(v [NumObservations]float64) Labels {
	var l Labels
	for o, x := range v {
		switch {
		case math.IsNaN(x):
			l[o] = Blank
		case x == 1:
			l[o] = Positive
		case x == 0:
			l[o] = Negative
		default:
			l[o] = Uncertain
		}
	}
	return l
}

func TestClinicalEfficacy(t *testing.T) {
	n := math.NaN()
	gts := []Labels{
		fromValues([NumObservations]float64{1, 0, n, n, 1, n, n, n, -1, 0, 1, n, n, 1}),
		fromValues([NumObservations]float64{n, 1, 1, n, n, n, n, n, 1, n, 1, n, n, n}),
		fromValues([NumObservations]float64{1, n, 0, n, n, n, n, n, n, 0, 0, n, n, 1}),
		fromValues([NumObservations]float64{n, n, 1, n, 1, 1, n, n, 1, n, -1, n, n, n}),
	}
	res := []Labels{
		fromValues([NumObservations]float64{1, n, 0, n, 1, n, n, n, 1, 0, 1, n, n, n}),
		fromValues([NumObservations]float64{n, 1, -1, n, 1, n, n, n, 1, n, 1, n, n, n}),
		fromValues([NumObservations]float64{n, n, 1, n, n, n, n, n, n, 0, n, n, n, 1}),
		fromValues([NumObservations]float64{1, n, 1, n, n, 1, n, n, n, n, 1, n, n, n}),
	}
	e, err := ClinicalEfficacy(gts, res)
	if err != nil {
		t.Fatal(err)
	}
	// Binary (positive = 1): 9 true positives, 5 false positives, 5 false
	// negatives in all, so micro P = R = F1 = 9/14. Macro values are the
	// means over 14 columns, 8 of which have no positives at all (0). The
	// expected numbers were also obtained with scikit-learn 1.2.1 on the
	// same arrays after R2Gen's fillna(0) and -1 → 0.
	want := Efficacy{
		Micro: PRF{9.0 / 14, 9.0 / 14, 9.0 / 14},
		Macro: PRF{0.40476190476190477, 0.39285714285714285, 0.3904761904761905},
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"micro P", e.Micro.Precision, want.Micro.Precision},
		{"micro R", e.Micro.Recall, want.Micro.Recall},
		{"micro F1", e.Micro.F1, want.Micro.F1},
		{"macro P", e.Macro.Precision, want.Macro.Precision},
		{"macro R", e.Macro.Recall, want.Macro.Recall},
		{"macro F1", e.Macro.F1, want.Macro.F1},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %.17g, want %.17g", c.name, c.got, c.want)
		}
	}
	// Cardiomegaly: gts positive in samples 1 and 3, res positive in 2 and 3:
	// tp 1, fp 1, fn 1.
	if got := e.PerObservation[Cardiomegaly]; got != (PRF{0.5, 0.5, 0.5}) {
		t.Errorf("Cardiomegaly %+v", got)
	}
	if e.Support[Cardiomegaly] != 2 {
		t.Errorf("support %d", e.Support[Cardiomegaly])
	}
}

func TestClinicalEfficacyErrors(t *testing.T) {
	if _, err := ClinicalEfficacy(nil, nil); !errors.Is(err, ErrInput) {
		t.Error(err)
	}
	if _, err := ClinicalEfficacy(make([]Labels, 2), make([]Labels, 1)); !errors.Is(err, ErrInput) {
		t.Error(err)
	}
}
