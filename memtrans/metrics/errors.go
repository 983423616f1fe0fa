package metrics

import (
	"errors"
	"fmt"
)

// Errors returned for unusable input. They are wrapped with detail; test
// with errors.Is.
var (
	// ErrEmpty is returned when there is nothing to score.
	ErrEmpty = errors.New("metrics: no samples to score")
	// ErrLengthMismatch is returned when the numbers of references and
	// hypotheses differ.
	ErrLengthMismatch = errors.New("metrics: references and hypotheses differ in number")
	// ErrNoReference is returned when a sample has no reference.
	ErrNoReference = errors.New("metrics: sample without a reference")
)

func checkPairs(refs [][]string, hyps []string) error {
	if len(refs) != len(hyps) {
		return fmt.Errorf("%w: %d references, %d hypotheses", ErrLengthMismatch, len(refs), len(hyps))
	}
	if len(hyps) == 0 {
		return ErrEmpty
	}
	for i, r := range refs {
		if len(r) == 0 {
			return fmt.Errorf("%w: sample %d", ErrNoReference, i)
		}
	}
	return nil
}
