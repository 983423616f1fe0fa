// Package m2 is the Meshed-Memory Transformer (Cornia et al., "Meshed-Memory
// Transformer for Image Captioning", CVPR 2020), whole: its blocks, the
// model, its incremental decoding and its configuration ([Config]),
// mirroring the published code's Transformer (encoder, decoder, bos_idx,
// init_weights) with the modules of its encoders and decoders. Parameter
// names equal the published state_dict's.
//
// To write reports with M², use the facade: memtrans.M2IUXray or
// memtrans.M2Tiny as the configuration of memtrans.New. This package is for
// researchers who reuse its blocks, compare them with the published code or
// load a published checkpoint ([Load]).
//
// The blocks, each usable alone:
//
//   - [MemoryEncoder] (§3.1): the input embedding
//     X = LayerNorm(Dropout(ReLU(fc(input)))) and a stack of [EncoderLayer]s,
//     Z = AddNorm(M_mem(X)), X̃ = AddNorm(F(Z)) (Eq. 5), over
//     mesh's memory-augmented attention (Eq. 3) in an [AttentionLayer] and
//     the feed-forward F of Eq. 4 in a [PositionWiseFeedForward]; every
//     layer's output is a level of the multi-level encoding X̃.
//   - The encoder's padding mask ([PaddingRule]): the published code masks
//     the regions whose layer-normalised embedding sums to exactly zero
//     ([PadAfterNorm]; [AfterNormMask] recomputes that LayerNorm and sum as
//     torch's CPU kernels do, bit for bit), which rounding decides; the
//     zero feature rows ([PadZeroRows], [ZeroRowMask]) or nothing
//     ([PadNone]) are the rules that do not depend on the CPU.
//   - [MeshedDecoder] (§3.2): word and positional embeddings, a stack of
//     [MeshedLayer]s (Eq. 9: masked self-attention, mesh's meshed
//     cross-attention over every encoder level, Eqs. 6–8, and the
//     feed-forward, each in its AddNorm) and the output projection; with a
//     multi-view routing (mesh.Routing) each layer reads one routed level.
//   - [MeshedSteps]: the decoder's incremental decoding, as the published
//     stateful decoder computes it (positional row t+1 at step t, a <pad>
//     masked from its step on and its row's output zeroed), each layer's
//     step being its forward pass with the attentions' steps over a
//     key/value cache and over the levels projected once per study.
//
// [Model] is M² in its own ids ([Load] reads a published state_dict,
// [InferConfig] infers the configuration); its decoding
// ([Model.NewDecoding]) runs the decoder's own steps. [ReportModel] is the
// same model over the report vocabulary's ids, M²'s <bos> and <pad> past
// them ([Config.ForReports]): it implements memtrans/arch's EncoderDecoder
// and is registered as [Name], with beam search following M²'s rules
// (decode.M2).
package m2
