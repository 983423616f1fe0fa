// Package arch is the seam between radgen's facade and an encoder–decoder
// architecture: what an architecture implements ([Config],
// [EncoderDecoder]) and the registry through which checkpoints name it
// ([Register]).
//
// The facade (package memtrans) holds the visual extractor, the tokenizer,
// the training loop, generation, checkpoints and the service; an
// architecture holds what turns visual features into reports. R2Gen, the
// Meshed-Memory Transformer and METransformer are registered through this
// package exactly as a researcher's own variant is (memtrans registers
// them): nothing in the facade knows which architecture it runs.
//
// The interfaces' signatures use only the root package's tensors and
// graphs and package decode's decoding interface, so a package can
// implement them without importing memtrans, and memtrans can build on
// packages that do.
//
// A new architecture needs:
//
//   - a configuration type implementing [Config], JSON-serialisable, with
//     its sizes (Dims), its validation and its cost;
//   - an encoder–decoder implementing [EncoderDecoder]: teacher-forced
//     log-probabilities and loss, and an incremental decoding
//     (decode.Model) whose steps equal teacher forcing;
//   - a call to [Register] in an init function, naming the configuration
//     type: arch.Register[MyConfig]("my-variant").
//
// and it should pass [TeacherForcingGap] in its tests: its incremental
// decoding, under beam search with reorders, within 1e-4 of teacher
// forcing. Its decoding may take a [Workspace] ([TakeWorkspace]) for its
// start's and its steps' arenas and its self-attention caches, as the
// built-ins' do.
//
// What it may add, each an optional interface the facade looks for:
//
//   - [Releaser]: its decoding gives pooled memory (a Workspace) back;
//   - [StepWeighted]: the matrices its steps read, for
//     memtrans.WithHalfWeights (without it, all its float32 matrices are
//     stored in half precision);
//   - [Continuer]: it continues another model's training
//     (memtrans.Model.ContinueFrom);
//   - [VisualEmbedder]: its first map over the features, for a trainer with
//     a frozen extractor;
//   - [StudyDecoder]: it writes a study's report otherwise than by one
//     strategy over one decoding;
//   - [FieldCoster]: its configuration's costs by field, for clearer
//     budget errors.
//
// memtrans.ModelConfig then takes the configuration as its EncoderDecoder,
// and memtrans.New, Trainer, Generate, Save, Load and the service work as
// for the built-in architectures; memtrans/cli builds a radgen command
// that knows it. examples/variant is a whole one.
package arch
