// Package pth reads PyTorch checkpoints written by torch.save: the zip
// format (archive/data.pkl describing the objects, archive/data/<key>
// holding each storage's bytes) and the legacy non-tar format of PyTorch
// before 1.6. It opens a checkpoint over an io.ReaderAt, finds the
// state_dict (for R2Gen: the "state_dict" entry of {'epoch', 'state_dict',
// 'optimizer', 'monitor_best'}) and serves its tensors by name as float32,
// which makes a [File] a vision.WeightSource. [Write] produces checkpoints in
// the same zip format, loadable by torch.load.
//
// The pickle is run by github.com/nlpodyssey/gopickle. Classes the package
// does not model (an optimizer's state, numpy dtypes, argparse.Namespace,
// schedulers) become [Opaque] values rather than errors, so they never stop
// the weights from loading; numpy scalars are decoded to numbers.
//
// # Untrusted input
//
// A checkpoint is a program (a pickle) plus data, and Open treats it as
// hostile. Before the pickle runs, a scan of its opcodes refuses length
// prefixes that overrun it, nesting deeper than 4096 MARKs and more than
// 2^21 objects, so the unpickler's memory stays within a small multiple of
// the pickle's size, itself bounded by [WithMaxPickleBytes]. No class named
// by the pickle is ever executed: a GLOBAL resolves to a descriptor or an
// opaque placeholder. Every tensor of the state_dict is checked against its
// storage (offset, shape and strides within the storage; the storage within
// its record) and the float32 size of all of them against [WithMaxBytes]
// before Open returns. Data is then read lazily, only as much as each
// tensor needs, so a zip bomb costs no more than the limit. Malformed input
// yields an error wrapping [ErrFormat], [ErrUnsupported] or [ErrLimit],
// never a panic.
//
// # Layout
//
// Tensors come back row-major in their logical shape, whatever their
// strides and storage offset in the file: a transposed or sliced view is
// gathered element by element. float16, bfloat16 and float64 are converted
// to float32 (float16 and bfloat16 exactly, float64 rounded to nearest);
// integer and boolean tensors (BatchNorm's num_batches_tracked) convert
// exactly up to 2^24.
package pth
