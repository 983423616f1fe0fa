// Package m2 is the Meshed-Memory Transformer (Cornia et al., "Meshed-Memory
// Transformer for Image Captioning", CVPR 2020) assembled from package mesh
// as a whole architecture, mirroring the published code's Transformer
// (encoder, decoder, bos_idx, init_weights) with the modules of its
// encoders and decoders.
//
// [Model] is M² in its own ids (parameter names equal the published
// state_dict, [Load] reads one, [InferConfig] infers the configuration);
// its decoding ([Model.NewDecoding]) runs the mesh decoder's own
// incremental steps. [ReportModel] is the same model over the report
// vocabulary's ids, M²'s <bos> and <pad> past them ([Config.ForReports]):
// it implements memtrans/arch's EncoderDecoder and is registered as [Name],
// with beam search following M²'s rules (decode.M2). The memory-augmented
// encoder, the meshed decoder and layer-wise multi-view routing (GCA, GPA,
// FGA, FMA, AMA in place of the mesh) are package mesh's.
package m2
