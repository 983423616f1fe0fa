// Package mesh implements the attention modules of the memory-driven
// Transformers: scaled dot-product multi-head attention as R2Gen uses it
// (with an incremental key/value cache for decoding), and the
// Meshed-Memory Transformer's memory-augmented and meshed attention.
//
// References:
//  1. Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (Eq. 1, multi-head attention).
//  2. Chen et al., "Generating Radiology Reports via Memory-driven Transformer", EMNLP 2020 (R2Gen).
//  3. Cornia et al., "Meshed-Memory Transformer for Image Captioning", CVPR 2020 (M²).
//
// Shapes are written (B, T, D): batch, positions, model width. Shape errors
// inside the numeric code are programmer errors and panic with "mesh: ".
package mesh
