// Package mesh implements the attention modules of the memory-driven
// Transformers, one family of them, each trainable and usable alone:
//
//   - [MultiHeadAttention]: scaled dot-product multi-head attention as R2Gen
//     uses it (Vaswani et al. Eq. 1);
//   - [ScaledDotProductAttention]: M²'s attention, and with learnable memory
//     slots ([NewMemoryAttention]) its memory-augmented attention (Cornia et
//     al. Eq. 3);
//   - [MeshedCrossAttention]: M²'s meshed cross-attention, one
//     cross-attention over every encoder level weighed by sigmoid gates and
//     divided by √N (Cornia et al. Eqs. 6–8);
//   - [MultiView]: layer-wise multi-view decoding, the GCA, GPA, FGA, FMA and
//     AMA routings of encoder levels to decoder layers, softly integrated
//     with the last level (Liu et al. Eq. 8);
//   - [BilinearAttention]: METransformer's expert bilinear attention.
//
// The first two implement [Attention], and [IncrementalAttention] for
// decoding: a step over a key/value cache reordered by beam ancestry
// indices ([KVCache]) and a step over a source projected once per study
// ([Source]), the same calls whichever of them a layer holds. Beside them
// are the sublayers their layers share: torch's [LayerNorm] and the
// position-wise [FeedForward]. The architectures assembled from these
// modules are in memtrans/r2gen, memtrans/m2 (M²'s memory-augmented
// encoder and meshed decoder) and memtrans/metrans.
//
// Masks follow one convention: zero entries are masked out. A masked
// score is −1e9, not −∞, so that a query whose every key is masked attends
// uniformly instead of giving NaN.
//
// References:
//  1. Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (Eq. 1, multi-head attention).
//  2. Chen et al., "Generating Radiology Reports via Memory-driven Transformer", EMNLP 2020 (R2Gen).
//  3. Cornia et al., "Meshed-Memory Transformer for Image Captioning", CVPR 2020 (M²).
//  4. Liu et al., "Rethinking and Improving Natural Language Generation with Layer-Wise Multi-View Decoding", arXiv 2005.08081 (multi-view decoding).
//  5. Wang et al., "METransformer: Radiology Report Generation by Transformer with Multiple Learnable Expert Tokens", CVPR 2023 (expert bilinear attention).
//
// Shapes are written (B, T, D): batch, positions, model width. Shape errors
// inside the numeric code are programmer errors and panic with "mesh: ".
package mesh
