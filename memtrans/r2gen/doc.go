// Package r2gen is R2Gen's encoder–decoder (Chen et al., "Generating
// Radiology Reports via Memory-driven Transformer", EMNLP 2020) as blocks a
// researcher composes and as a whole architecture registered with the
// facade (memtrans) under [Name]. To write reports with R2Gen, use the
// facade's configurations (memtrans.R2GenIUXray, R2GenMIMICCXR, R2GenTiny)
// with memtrans.New; this package is for the variants and checks built on
// its layers.
//
// The blocks are the paper's, in the published code's parameter names:
//
//   - [Encoder] and [EncoderLayer]: the pre-norm Transformer encoder over
//     the embedded visual patches (Eqs. 2–3), with mesh.FeedForward as its
//     position-wise map; ForwardLevels gives every layer's output for
//     layer-wise multi-view routing (package mesh, MultiView).
//   - [DecoderLayer] and [Decoder]: pre-norm decoder layers whose three
//     norms are MCLN conditioned on the relational memory (Eqs. 11–15,
//     package mcln) in the full model, or R2Gen's LayerNorm in the BASE
//     ablation; each layer's Forward (teacher forcing) and Step (one
//     position, self-attention keys and values cached) share its body.
//   - [Embeddings]: the scaled token embedding plus the [Sinusoid]
//     positional table (Eq. 4's inputs).
//   - The relational memory (Eqs. 6–10) is package relmem's, Mem2Mem's
//     memory bank likewise; [Model] composes them.
//
// [Model] is the whole encoder–decoder: att_embed, the encoder, the memory
// variant ([Config.Memory]), the decoder and the logit layer, with
// [Model.TeacherForce] exposing every intermediate for parity checks and
// [Model.NewDecoding] the incremental decoding the facade's beam search
// drives ([Decoding]). [Config.Variant] selects the ablations of the
// paper's Table 2 (BASE, BASE+RM, BASE+RM+MCLN); Routing selects
// layer-wise multi-view decoding (Liu et al.) and Memory selects Mem2Mem
// (seed 002). [InferConfig] reads a Config from a published state_dict's
// shapes.
//
// The architecture lives here, beside the facade rather than inside it, so
// that "R2Gen plus X" starts from R2Gen's own layers: a variant imports
// this package, reuses DecoderLayer or Encoder, and registers itself with
// memtrans/arch as R2Gen does.
package r2gen
