package arch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
)

// LanguageModelLoss is R2Gen's language-model criterion: the mean negative
// log-probability of targets (B·T ids) over the positions where mask is
// non-zero, for log-probabilities (B, T, V). It panics when the lengths
// disagree with logProbs (a programmer error).
func LanguageModelLoss(g *radgen.Graph, logProbs *radgen.Tensor, targets []int, mask []float32) *radgen.Tensor {
	b, t := logProbs.Dim(0), logProbs.Dim(1)
	if len(targets) != b*t || len(mask) != b*t {
		panic(fmt.Sprintf("arch: loss over %v with %d targets and %d mask entries", logProbs.Shape(), len(targets), len(mask)))
	}
	var total float64
	for _, v := range mask {
		total += float64(v)
	}
	if total == 0 {
		total = 1
	}
	picked := g.PickLast(logProbs, targets) // (B, T)
	mt := radgen.FromFloat32(append([]float32(nil), mask...), b, t)
	if logProbs.Is64() {
		mt = mt.To64()
	}
	mt = mt.To(logProbs.Device())
	return g.Scale(g.Sum(g.Mul(picked, mt)), -1/total)
}

// CheckBatch reports whether batch is consistent for a model of dims:
// lengths, sizes and every id inside the vocabulary.
func CheckBatch(batch Batch, d Dims) error {
	n := batch.Size * batch.Len
	if batch.Size <= 0 || batch.Len <= 0 || len(batch.In) != n || len(batch.Targets) != n || len(batch.Mask) != n {
		return fmt.Errorf("arch: batch of %d×%d with %d inputs, %d targets and %d mask entries", batch.Size, batch.Len, len(batch.In), len(batch.Targets), len(batch.Mask))
	}
	for i := range n {
		if id := batch.In[i]; id < 0 || id >= d.Words {
			return fmt.Errorf("arch: input id %d at %d outside the vocabulary [0, %d)", id, i, d.Words)
		}
		if id := batch.Targets[i]; id < 0 || id >= d.Words {
			return fmt.Errorf("arch: target id %d at %d outside the vocabulary [0, %d)", id, i, d.Words)
		}
	}
	return nil
}

// strictUnmarshal decodes one JSON value into v, refusing unknown fields
// and trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("arch: trailing data after the configuration")
	}
	return nil
}

// ErrConfig is wrapped by every configuration error of the library's
// architectures (memtrans.ErrConfig is the same error).
var ErrConfig = errors.New("memtrans: invalid config")

// CheckStep validates a decode.Model.Step call of a decoding of rows rows
// over vocab ids at position pos of a positional table of positions rows:
// ctx still live, one token per row, each in [0, vocab), and room for
// rows·vocab outputs. Errors wrap decode.ErrShape or decode.ErrToken.
func CheckStep(ctx context.Context, tokens []int, dst []float32, rows, vocab, pos, positions int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(tokens) != rows || len(dst) < rows*vocab {
		return fmt.Errorf("%w: %d tokens and %d outputs for %d rows", decode.ErrShape, len(tokens), len(dst), rows)
	}
	for _, tok := range tokens {
		if tok < 0 || tok >= vocab {
			return fmt.Errorf("%w: token %d outside [0, %d)", decode.ErrToken, tok, vocab)
		}
	}
	if pos >= positions {
		return fmt.Errorf("arch: position %d beyond the positional table (%d)", pos, positions)
	}
	return nil
}

// CopyLogProbs copies the values of x, on any device and in float32 or
// float64, into dst as float32: a step's log-probabilities into the
// strategy's buffer.
func CopyLogProbs(dst []float32, x *radgen.Tensor) error {
	h := x.To(radgen.CPU)
	if len(dst) < h.Len() {
		return fmt.Errorf("%w: %d values into %d", decode.ErrShape, h.Len(), len(dst))
	}
	if h.Is64() {
		for i, v := range h.Data64() {
			dst[i] = float32(v)
		}
		return nil
	}
	copy(dst, h.Data())
	return nil
}

// FieldCoster is implemented by a configuration whose budget errors name
// the field responsible. FieldCost returns the integer fields of a copy of
// the configuration, each with its value in the papers' models, and the
// cost of that copy over patches, which follows the fields as they change.
type FieldCoster interface {
	FieldCost() ([]Field, func(patches int) Cost)
}

// Field is an integer field of a configuration, by its JSON name.
type Field struct {
	Name      string
	Value     *int
	Reference int // its value in the papers' models
}

// ErrBudget is wrapped, together with ErrConfig, by the error for a
// configuration beyond a size budget (memtrans.ErrBudget is the same
// error).
var ErrBudget = errors.New("memtrans: model exceeds the size budget")
