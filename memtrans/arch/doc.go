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
// memtrans.ModelConfig then takes the configuration as its EncoderDecoder,
// and memtrans.New, Trainer, Generate, Save, Load and the service work as
// for the built-in architectures. examples/variant is a whole one.
package arch
