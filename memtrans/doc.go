// Package memtrans is radgen's facade: it assembles memory-driven
// Transformers that write radiology reports, and is what a Go service calls.
//
// # Models
//
// R2Gen's encoder–decoder (Chen et al., EMNLP 2020) is the default
// architecture: the visual patch features are embedded and encoded by a
// pre-norm Transformer; a relational memory (package relmem) follows the
// report tokens; every decoder layer norm is conditioned on the memory
// through MCLN (package mcln). [r2gen.Config.Variant] selects the ablations
// of the paper's Table 2 (BASE, BASE+RM, BASE+RM+MCLN) and the other fields
// the sizes; parameter names equal the published state_dict's, so R2Gen weights
// load as they are ([LoadR2Gen], which infers the configuration from the
// names and shapes). The other seeds are configurations too: the
// Meshed-Memory Transformer ([m2.Config]), METransformer ([metrans.Config]),
// layer-wise multi-view routing and Mem2Mem (r2gen.Config fields), each
// citing its equations. The modules themselves — attention, memories, MCLN, their
// decoding steps — are the packages mesh, relmem and mcln.
//
// [Model] adds the visual extractor (package vision) and the tokenizer
// (package memtrans/data): [New], [Load] / [Model.Save] in the native format
// (zstd-compressed safetensors with the configuration and vocabulary inside,
// written atomically, checksummed), and [Model.Generate], which takes images
// and returns reports with their tokens, log-probability and, on request,
// each word's attention over the image patches ([WriteAttentionPNG]).
// A Model is safe for concurrent use.
//
// A Model's encoder–decoder is any of the three architectures
// ([ModelConfig.Architecture]): R2Gen and the variants its r2gen.Config
// composes; the Meshed-Memory Transformer (an m2.Config, [M2IUXray]), its beam
// search following M²'s rules and, with m2.Config.Routing, layer-wise
// multi-view routing in place of the mesh; METransformer (a metrans.Config,
// [METransIUXray]), whose experts' candidate reports are put to a vote
// (Report.Candidates, Report.Votes). All three are trained by the same
// [Trainer] and saved and loaded in the same format.
//
// # Devices
//
// [WithDevice] places the whole model — extractor, encoder and decoder — on
// a radgen.Device: a GPU (radgen.CUDA, in a build with the cuda tag) or
// radgen.Reference(), which runs the same device code on the CPU and is how
// the tests check it everywhere. Generation, training and the feature cache
// then run there through the modules' own ops and decoding steps, the same
// steps as on the CPU.
//
// # Decoding
//
// Generation is incremental ([Model.Generate]): per-layer
// self-attention keys and values are cached and addressed through an
// ancestry table, so reordering beams moves indices rather than vectors;
// cross-attention keys and values are computed once per study and shared by
// its beams; the relational memory advances one step per token. The
// published code's full-prefix recomputation is kept in the tests, as the
// baseline of the benchmarks and a cross-check. The decoding steps are the
// paper modules' own (mesh.MultiHeadAttention.Step and Attend, mesh.KVCache,
// relmem.Relational.Step, m2.MeshedDecoder.Start, mcln.Conditional.Deltas),
// on any device, written in plain ops: there is no second copy of the
// model for speed, and no hint to the engine; the CPU engine defers and
// batches a step's products itself (radgen's "Deferred products"), so that
// the products that read the step's memory alone are computed beside the
// layers' work. On the CPU a step
// takes its results from a radgen.Arena (no allocation once warm), and
// [WithHalfWeights] stores the matrices a step reads in half precision, a
// storage the backend's Linear reads. Strategies (greedy, beam, sampling)
// are package decode's.
//
// # Training
//
// [Trainer] follows R2Gen's recipe: the masked language-model loss,
// Adam with amsgrad in two parameter groups, clipping by value, StepLR per
// epoch, a validation monitor with early stopping, and checkpoints from which
// a run resumes bit for bit ([ResumeTrainer]). A frozen-extractor mode
// caches patch features; [TrainConfig.CalibrateBatches] initialises an
// untrained extractor from the data.
//
// # Parity
//
// The tests compare against the outputs of the published code (goldens in
// ../shared/golden, located through $RADGEN_GOLDEN_R2GEN and friends):
// intermediate tensors, loss, every parameter's gradient and the decoded
// greedy and beam-search reports. `go test ./memtrans -run Parity -v` prints
// each error.
//
// # Limits
//
// Everything read from outside is bounded before it is allocated. A
// configuration — given, in a checkpoint, or inferred from a state_dict's
// names — must fit a [Budget] ([DefaultBudget]: 2^28 parameters and 2^28
// activation values per study, about four times the
// papers' largest model; [WithBudget]); errors name the field. A native
// checkpoint is streamed: its header, configuration and tensor table are
// checked against the budget and the model before any tensor byte is read,
// and its data never exceeds what the header declared
// (the Budget's MaxCheckpointBytes bounds the declaration). Annotation files
// (data.DefaultMaxAnnotationBytes) and image files
// (vision.DefaultMaxFileBytes, vision.DefaultMaxPixels: 4096², the largest
// radiographs) have size limits, and FIFOs and devices are refused unless
// allowed. Generate runs at most GOMAXPROCS batches at once
// ([WithMaxConcurrency]); queued callers return as soon as their context is
// done.
//
// Peak memory per study: decoding a view costs its pixels in its own bit
// depth (1 byte a pixel for 8-bit gray, 2 for 16-bit gray, 4 for 8-bit
// colour, 8 for 16-bit colour), converted in place; [Model.StudyFromAnnotation]
// and [Model.StudyFromPaths] resize each view to ImageSize as soon as it is
// decoded, so a study holds one film at a time — at most 32 MiB for a 4096²
// 16-bit radiograph, 64 MiB for 8-bit colour — plus ImageSize²·3 bytes a
// view; [StudyFromFiles] keeps each view at full resolution, 8 bits a
// sample.
package memtrans
