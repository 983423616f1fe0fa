// Package relmem implements memory modules for report generation: R2Gen's
// relational memory (RM), which carries patterns shared across reports from
// step to step of decoding, and Mem2Mem (an encoder memory bank of r slots
// built by structured self-attention, transferred as the decoder's initial
// memory, read by attention and rewritten through gates; see Mem2Mem).
//
// Reference: Chen, Song, Chang and Wan, "Generating Radiology Reports via
// Memory-driven Transformer", EMNLP 2020, §2.2, Eqs. 6–10.
//
// The code follows the published R2Gen modules exactly where they differ
// from the paper's prose: the initial memory is the identity padded with
// zeros, the MLP ends in a ReLU, and the forget gate multiplies the previous
// memory M_{t−1} itself (not tanh of it).
package relmem
