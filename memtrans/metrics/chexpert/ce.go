package chexpert

import (
	"errors"
	"fmt"
)

// ErrInput is returned (wrapped) for unusable clinical-efficacy input.
var ErrInput = errors.New("chexpert: bad input")

// PRF is precision, recall and F1.
type PRF struct {
	Precision, Recall, F1 float64
}

// Efficacy is the clinical-efficacy evaluation of R2Gen's compute_ce.py:
// the labels of generated and reference reports are made binary (positive =
// 1; negative, uncertain and blank = 0) and compared over the 14
// observations with scikit-learn's precision, recall and F1.
type Efficacy struct {
	// Micro pools true/false positives/negatives over all 14 observations.
	Micro PRF
	// Macro is the unweighted mean of PerObservation over all 14
	// observations, absent ones included (they count as 0).
	Macro PRF
	// PerObservation by Observation; a ratio with a zero denominator is 0
	// (scikit-learn's zero_division default).
	PerObservation [NumObservations]PRF
	// Support[o] is the number of references positive for o.
	Support [NumObservations]int
}

// ClinicalEfficacy compares hyps[i] with refs[i].
func ClinicalEfficacy(refs, hyps []Labels) (Efficacy, error) {
	if len(refs) != len(hyps) {
		return Efficacy{}, fmt.Errorf("%w: %d references, %d hypotheses", ErrInput, len(refs), len(hyps))
	}
	if len(refs) == 0 {
		return Efficacy{}, fmt.Errorf("%w: no samples", ErrInput)
	}
	var tp, fp, fn [NumObservations]int
	for i := range refs {
		for o := 0; o < NumObservations; o++ {
			g, p := refs[i][o] == Positive, hyps[i][o] == Positive
			switch {
			case g && p:
				tp[o]++
			case p:
				fp[o]++
			case g:
				fn[o]++
			}
		}
	}
	var e Efficacy
	var sumTP, sumFP, sumFN int
	for o := 0; o < NumObservations; o++ {
		e.PerObservation[o] = prf(tp[o], fp[o], fn[o])
		e.Support[o] = tp[o] + fn[o]
		e.Macro.Precision += e.PerObservation[o].Precision / NumObservations
		e.Macro.Recall += e.PerObservation[o].Recall / NumObservations
		e.Macro.F1 += e.PerObservation[o].F1 / NumObservations
		sumTP += tp[o]
		sumFP += fp[o]
		sumFN += fn[o]
	}
	e.Micro = prf(sumTP, sumFP, sumFN)
	return e, nil
}

// prf is scikit-learn's binary precision, recall and F1 = 2tp/(2tp+fp+fn),
// each 0 when its denominator is 0.
func prf(tp, fp, fn int) PRF {
	div := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return PRF{
		Precision: div(tp, tp+fp),
		Recall:    div(tp, tp+fn),
		F1:        div(2*tp, 2*tp+fp+fn),
	}
}
