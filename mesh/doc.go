// Package mesh implements the attention modules of the memory-driven
// Transformers: scaled dot-product multi-head attention as R2Gen uses it
// (with an incremental key/value cache for decoding), and the
// Meshed-Memory Transformer's memory-augmented and meshed attention, and
// layer-wise multi-view decoding (MultiView: the GCA, GPA, FGA, FMA and AMA
// routings of encoder levels to decoder layers, softly integrated with the
// last level, Liu et al. Eq. 8).
//
// References:
//  1. Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (Eq. 1, multi-head attention).
//  2. Chen et al., "Generating Radiology Reports via Memory-driven Transformer", EMNLP 2020 (R2Gen).
//  3. Cornia et al., "Meshed-Memory Transformer for Image Captioning", CVPR 2020 (M²).
//  4. Liu et al., "Rethinking and Improving Natural Language Generation with Layer-Wise Multi-View Decoding", arXiv 2005.08081 (multi-view decoding).
//
// Shapes are written (B, T, D): batch, positions, model width. Shape errors
// inside the numeric code are programmer errors and panic with "mesh: ".
package mesh
