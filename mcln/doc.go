// Package mcln implements R2Gen's layer norms: the memory-driven conditional
// layer norm ([Conditional], MCLN), through which the relational memory of
// package relmem steers every decoder sublayer, and R2Gen's plain
// [LayerNorm].
//
// [NewConditional] builds an MCLN of a model width conditioned on a memory of
// a given width; [Conditional.Forward] normalises a batch given the memory
// state of each position, and a decoder that reuses one memory state across
// its sublayers computes γ̂ and β̂ once ([Conditional.Deltas]) and applies
// them to each ([Conditional.Apply]). The MLPs that map the memory to Δγ and
// Δβ ([MLP]) are exposed with their weights, named as in R2Gen's
// state_dict. The package holds modules only: the memory itself is
// relmem's, the decoder that uses both is memtrans/r2gen's.
//
// Reference: Chen, Song, Chang and Wan, "Generating Radiology Reports via
// Memory-driven Transformer", EMNLP 2020, §2.3, Eqs. 11–15.
//
// R2Gen's LayerNorm departs from torch.nn.LayerNorm in two ways that matter
// for parity: it divides by the unbiased (Bessel, n−1) standard deviation,
// and it adds eps ([DefaultEps], 1e-6) to the standard deviation rather than
// to the variance: y = γ·(x − μ)/(std + eps) + β. Its parameters are named
// gamma and beta. A LayerNorm whose Kind is radgen.NormStandard is the usual
// form (biased variance, eps inside the root); mesh.LayerNorm is torch's,
// with torch's parameter names, for the other models.
package mcln
