// Package metrans is METransformer (Wang, Liu, Wang and Zhou, "METransformer:
// Radiology Report Generation by Transformer with Multiple Learnable Expert
// Tokens", CVPR 2023, arXiv 2304.02211) as an encoder–decoder for
// memtrans: a [Config] (its sizes, [Tiny] for tests) whose [New] builds the
// [Model], assembled from vision.ViT (the multi-expert ViT encoder) and
// mesh.BilinearAttention (expert bilinear attention).
//
// To write reports with it, use the facade: memtrans.METransIUXray or
// memtrans.METransTiny as the configuration of memtrans.New, and the
// facade's training, generation and checkpoints. This package is for
// researchers who reuse or change its blocks.
//
// No official code exists (shared/reference, §8); this follows the paper as
// the seed notes (shared/seeds/003) give it. Equation numbers are those of
// the notes, in order of appearance: Eqs. 1–3 the ViT encoder (vision),
// Eqs. 4–8 expert bilinear attention (mesh), Eq. 9 the bilinear encoder
// layer, Eq. 10 the adjust block, Eqs. 11–13 the bilinear decoder layer.
// Where the notes leave a choice open, the choice is stated at the code.
//
// The blocks are exported for variants: [EncoderLayer] (Eq. 9), the adjust
// block inside [Model] (Eq. 10) and [DecoderLayer] (Eqs. 11–13), whose
// Forward and whose incremental step in [Decoding] share one body. [Model]
// implements memtrans/arch's EncoderDecoder and StudyDecoder: each expert
// writes a candidate report and the experts vote (sentence BLEU-4 against
// the other candidates); it registers itself as [Name].
package metrans
