package arch

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/radgen/radgen"
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
