// Package mcln implements R2Gen's layer norms: the memory-driven conditional
// layer norm (MCLN) that lets the relational memory steer every decoder
// sublayer, and R2Gen's plain LayerNorm beside the standard one.
//
// Reference: Chen, Song, Chang and Wan, "Generating Radiology Reports via
// Memory-driven Transformer", EMNLP 2020, §2.3, Eqs. 11–15.
//
// R2Gen's LayerNorm departs from torch.nn.LayerNorm in two ways that matter
// for parity: it divides by the unbiased (Bessel, n−1) standard deviation,
// and it adds eps (1e-6) to the standard deviation rather than to the
// variance: y = γ·(x − μ)/(std + eps) + β. Its parameters are named gamma and
// beta. NormStandard gives the usual (biased variance, eps inside the root)
// form for the other models.
package mcln
