// Package relmem implements memory modules that carry what a report
// generator remembers from step to step of decoding: R2Gen's relational
// memory ([Relational], made by [New]), which learns patterns shared across
// reports, and [Mem2Mem] ([NewMem2Mem]), an encoder memory bank of r slots
// built by structured self-attention, transferred as the decoder's initial
// memory, read by attention and rewritten through gates, with the penalty
// that keeps its slots apart ([BankPenalty]).
//
// A relational memory starts from [Relational.InitMemory]; a training pass
// runs it over every position at once ([Relational.Forward]) and a decoding
// advances it one token at a time ([Relational.Step]). The states condition
// the decoder through package mcln's conditional layer norm; the decoder
// itself, and the configurations that choose a memory, are memtrans/r2gen's.
//
// Reference: Chen, Song, Chang and Wan, "Generating Radiology Reports via
// Memory-driven Transformer", EMNLP 2020, §2.2, Eqs. 6–10.
//
// The code follows the published R2Gen modules exactly where they differ
// from the paper's prose: the initial memory is the identity padded with
// zeros, the MLP ends in a ReLU, and the forget gate multiplies the previous
// memory M_{t−1} itself (not tanh of it).
package relmem
