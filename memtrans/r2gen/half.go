package r2gen

import (
	"github.com/radgen/radgen"
	"github.com/radgen/radgen/mesh"
)

// attnStepMatrices returns the matrices of a attention's step that read the
// new positions: all four for self-attention, the query and output
// projections for source attention, whose keys and values are projected once
// per study.
func attnStepMatrices(a *mesh.MultiHeadAttention, self bool) []*radgen.Tensor {
	if self {
		return []*radgen.Tensor{a.Linears[0].Weight, a.Linears[1].Weight, a.Linears[2].Weight, a.Linears[3].Weight}
	}
	return []*radgen.Tensor{a.Linears[0].Weight, a.Linears[3].Weight}
}

// StepWeights implements arch.StepWeighted: the decoder layers' matrices (the
// relational memory's and Mem2Mem's stay out: they are recurrences) and the
// logit layer's.
func (m *Model) StepWeights() []*radgen.Tensor {
	ws := []*radgen.Tensor{m.Logit.Weight}
	for _, l := range m.Decoder.Layers {
		ws = append(ws, attnStepMatrices(l.SelfAttn, true)...)
		ws = append(ws, attnStepMatrices(l.SrcAttn, false)...)
		ws = append(ws, l.FeedForward.W1.Weight, l.FeedForward.W2.Weight)
		for _, n := range l.Norms {
			if c := n.Conditional; c != nil {
				ws = append(ws, c.MLPGamma.L0.Weight, c.MLPGamma.L2.Weight, c.MLPBeta.L0.Weight, c.MLPBeta.L2.Weight)
			}
		}
	}
	return ws
}
