package memtrans

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/atomicfile"
	"github.com/radgen/radgen/internal/boundedio"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/vision"
)

// The native checkpoint format:
//
//	magic "RADGENv1" | payload length (u64 LE) | SHA-256 of the payload | zstd(payload)
//
// where the payload is a safetensors file: every parameter and buffer by its
// R2Gen state_dict name (float32), and in "__metadata__" the architecture
// ("radgen.config", JSON), the vocabulary ("radgen.vocab", JSON) and any
// caller metadata (a trainer's position). Files are written atomically
// (temporary file, fsync, rename), and the checksum is verified on load, so
// a reader never sees a half-written or corrupted checkpoint as valid.
const checkpointMagic = "RADGENv1"

// Metadata keys of the native format.
const (
	metaConfig = "radgen.config"
	metaVocab  = "radgen.vocab"
)

// ErrCheckpoint is wrapped by every error about a malformed checkpoint.
var ErrCheckpoint = errors.New("memtrans: bad checkpoint")

// defaultMaxCheckpointBytes bounds the decompressed size of a checkpoint
// the loaders accept (Budget.MaxCheckpointBytes).
const defaultMaxCheckpointBytes = 8 << 30

// checkpoint is the decoded payload of a native file.
type checkpoint struct {
	file     *radgen.Weights
	metadata map[string]string
}

// writeCheckpoint writes m's weights (radgen.SaveWeights) and metadata in
// the native format.
func writeCheckpoint(w io.Writer, m radgen.Module, metadata map[string]string) error {
	var payload bytes.Buffer
	if err := radgen.SaveWeights(&payload, m, metadata); err != nil {
		return err
	}
	return sealCheckpoint(w, payload.Bytes())
}

// sealCheckpoint writes a safetensors payload in the native format:
// magic, length, checksum and the zstd stream.
func sealCheckpoint(w io.Writer, payload []byte) error {
	sum := sha256.Sum256(payload)
	hdr := make([]byte, 0, len(checkpointMagic)+8+len(sum))
	hdr = append(hdr, checkpointMagic...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(payload)))
	hdr = append(hdr, sum[:]...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if _, err := enc.Write(payload); err != nil {
		enc.Close()
		return err
	}
	return enc.Close()
}

// maxZstdWindow bounds the window a checkpoint's zstd frames may ask the
// decoder for (the writer uses 8 MiB).
const maxZstdWindow = 64 << 20

// readCheckpoint reads and verifies a native file, streaming: the
// safetensors header is decompressed first and, when check is not nil,
// shown to it before any tensor byte is read, so that the configuration and
// the declared tensors can be checked against the budget and the model;
// then the data section, whose buffer grows with the bytes that actually
// arrive and never past what the header declares; last the checksum over
// all of it. A lying or corrupted file thus costs at most what its own
// header declares and check accepted.
func readCheckpoint(r io.Reader, maxBytes int64, check func(*safetensors.File) error) (*checkpoint, error) {
	hdr := make([]byte, len(checkpointMagic)+8+sha256.Size)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCheckpoint, err)
	}
	if string(hdr[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: not a radgen checkpoint (magic %q)", ErrCheckpoint, hdr[:len(checkpointMagic)])
	}
	n := binary.LittleEndian.Uint64(hdr[len(checkpointMagic):])
	if n > uint64(maxBytes) {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds the limit of %d (Budget.MaxCheckpointBytes)", ErrCheckpoint, n, maxBytes)
	}
	if n < 8+2 {
		return nil, fmt.Errorf("%w: payload of %d bytes", ErrCheckpoint, n)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderMaxMemory(min(uint64(maxBytes), n+maxZstdWindow)),
		zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	h := sha256.New()
	payload := io.TeeReader(io.LimitReader(dec, int64(n)), h)
	short := func(what string, err error) error {
		if err == io.EOF || err == io.ErrUnexpectedEOF || err == nil {
			return fmt.Errorf("%w: %s: payload ends early, header says %d bytes (truncated or corrupt)", ErrCheckpoint, what, n)
		}
		return fmt.Errorf("%w: decompressing %s: %v", ErrCheckpoint, what, err)
	}

	// The safetensors header: its length, then the JSON, read as it comes.
	var lb [8]byte
	if _, err := io.ReadFull(payload, lb[:]); err != nil {
		return nil, short("header length", err)
	}
	hl := binary.LittleEndian.Uint64(lb[:])
	if hl < 2 || hl > safetensors.MaxHeaderBytes || hl > n-8 {
		return nil, fmt.Errorf("%w: tensor header of %d bytes in a payload of %d", ErrCheckpoint, hl, n)
	}
	var head bytes.Buffer
	head.Write(lb[:])
	if got, err := io.CopyN(&head, payload, int64(hl)); got != int64(hl) {
		return nil, short("tensor header", err)
	}
	dataSize := int64(n - 8 - hl)
	src := &payloadReader{head: head.Bytes(), dataSize: dataSize}
	f, err := safetensors.Open(src, int64(n))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	// The tensors must tile the data section: a header cannot declare
	// gigabytes of data that no tensor accounts for.
	var used int64
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		used += info.End - info.Begin
	}
	if used != dataSize {
		return nil, fmt.Errorf("%w: the tensors take %d bytes of a data section of %d", ErrCheckpoint, used, dataSize)
	}
	if check != nil {
		if err := check(f); err != nil {
			return nil, err
		}
	}

	// The data section, growing with what arrives.
	var data bytes.Buffer
	data.Grow(int(min(dataSize, 64<<20)))
	if got, err := io.CopyN(&data, payload, dataSize); got != dataSize {
		return nil, short("tensor data", err)
	}
	var extra [1]byte
	if k, _ := io.ReadFull(dec, extra[:]); k != 0 {
		return nil, fmt.Errorf("%w: payload is longer than the %d bytes the header says", ErrCheckpoint, n)
	}
	if !bytes.Equal(h.Sum(nil), hdr[len(checkpointMagic)+8:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpoint)
	}
	src.data = data.Bytes()
	weights, err := radgen.OpenWeights(src, int64(n))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return &checkpoint{file: weights, metadata: f.Metadata()}, nil
}

// payloadReader serves a decompressed payload to safetensors.Open: the
// header bytes, then the data section once it has been read and verified.
type payloadReader struct {
	head     []byte
	data     []byte
	dataSize int64
}

func (p *payloadReader) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("memtrans: negative offset")
	}
	n := 0
	if off < int64(len(p.head)) {
		n = copy(b, p.head[off:])
		off += int64(n)
	}
	if n < len(b) {
		d := off - int64(len(p.head))
		if d >= int64(len(p.data)) {
			return n, io.EOF
		}
		n += copy(b[n:], p.data[d:])
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// checkTensors reports whether a file's header holds every tensor of m with
// its shape, and no more data besides than extra float64 values per
// parameter (a trainer's optimizer moments): the data a lying header can
// make the loader read is bounded by the model it describes.
func checkTensors(f *safetensors.File, m radgen.Module, extra float64) error {
	var params float64
	var err error
	m.VisitParams(func(name string, t *radgen.Tensor) {
		params += float64(t.Len())
		if err != nil {
			return
		}
		info, ok := f.Info(name)
		if !ok {
			err = fmt.Errorf("%w: %w: %q", ErrCheckpoint, radgen.ErrMissingTensor, name)
			return
		}
		if !slices.Equal(info.Shape, t.Shape()) && !(t.Rank() == 0 && info.Len() == 1) {
			err = fmt.Errorf("%w: %w: %q is %v in the file, %v in the model", ErrCheckpoint, radgen.ErrShapeMismatch, name, info.Shape, t.Shape())
		}
	})
	if err != nil {
		return err
	}
	var stored float64
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		stored += float64(info.End - info.Begin)
	}
	if limit := params * (4 + 8*extra); stored > limit+(1<<20) {
		return fmt.Errorf("%w: %.0f bytes of tensors for a model of %.0f parameters", ErrCheckpoint, stored, params)
	}
	return nil
}

// Save writes the model in the native format (see WriteFile for the atomic
// file variant).
func (m *Model) Save(w io.Writer) error {
	if err := m.acquire(); err != nil {
		return err
	}
	defer m.mu.RUnlock()
	return m.save(w, nil, nil)
}

// save writes the model and, when extra is not nil, extra's tensors beside
// its weights (a trainer's optimizer moments).
func (m *Model) save(w io.Writer, extra radgen.Module, meta map[string]string) error {
	cfg, err := json.Marshal(m.cfg)
	if err != nil {
		return err
	}
	vocab, err := json.Marshal(m.tokenizer)
	if err != nil {
		return err
	}
	md := map[string]string{"format": "pt", metaConfig: string(cfg), metaVocab: string(vocab)}
	addProvenance(md, m)
	for k, v := range meta {
		md[k] = v
	}
	var all radgen.Module = m
	if extra != nil {
		all = modules{m, extra}
	}
	return writeCheckpoint(w, all, md)
}

// SaveFile writes the model to path atomically: a temporary file in the same
// directory, fsync, then rename. Temporary files left by killed saves of the
// same path are removed first.
func (m *Model) SaveFile(path string) error {
	return writeFileAtomic(path, m.Save)
}

// writeFileAtomic writes path through a temporary file and a rename; the
// temporary files of killed saves of the same path are removed first (see
// internal/atomicfile).
func writeFileAtomic(path string, write func(io.Writer) error) error {
	return atomicfile.Write(path, 0o644, write)
}

// LoadOption configures Load.
type LoadOption func(*loadOptions) error

type loadOptions struct {
	maxBytes   int64
	nonRegular bool
	model      []Option
}

// WithNonRegularCheckpoint lets LoadFile read a FIFO or device (a pipe from
// another program); by default they are refused, as a FIFO without a writer
// blocks forever. LoadR2GenFile always needs a regular file.
func WithNonRegularCheckpoint() LoadOption {
	return func(o *loadOptions) error { o.nonRegular = true; return nil }
}

// WithModelOptions passes options to the loaded Model.
func WithModelOptions(opts ...Option) LoadOption {
	return func(o *loadOptions) error { o.model = append(o.model, opts...); return nil }
}

// Load reads a model in the native format.
func Load(r io.Reader, opts ...LoadOption) (*Model, error) {
	m, _, err := load(r, opts)
	return m, err
}

// LoadFile reads a model from a native checkpoint file: a regular file
// unless WithNonRegularCheckpoint.
func LoadFile(path string, opts ...LoadOption) (*Model, error) {
	var o loadOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	f, err := boundedio.Open(path, o.nonRegular)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Load(f, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func load(r io.Reader, opts []LoadOption) (*Model, *checkpoint, error) {
	var o loadOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, nil, err
		}
	}
	b, err := budgetOf(o.model)
	if err != nil {
		return nil, nil, err
	}
	o.maxBytes = b.MaxCheckpointBytes
	// The configuration and vocabulary are checked, and the model built,
	// from the header alone, before the tensor data is read.
	var m *Model
	ck, err := readCheckpoint(r, o.maxBytes, func(f *safetensors.File) error {
		md := f.Metadata()
		var cfg ModelConfig
		if err := json.Unmarshal([]byte(md[metaConfig]), &cfg); err != nil {
			return fmt.Errorf("%w: config: %w", ErrCheckpoint, err)
		}
		if err := cfg.validate(b); err != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		var tok data.Tokenizer
		if err := json.Unmarshal([]byte(md[metaVocab]), &tok); err != nil {
			return fmt.Errorf("%w: vocabulary: %v", ErrCheckpoint, err)
		}
		if cfg.vocab() != tok.Len()+1 {
			return fmt.Errorf("%w: vocabulary of %d tokens for an output of %d", ErrCheckpoint, tok.Len(), cfg.vocab())
		}
		var err error
		if m, err = New(cfg, &tok, 0, o.model...); err != nil {
			return err
		}
		// A trainer's checkpoint also holds the optimizer's two moments.
		extra := 0.0
		if _, ok := md[metaTrainer]; ok {
			extra = 2
		}
		return checkTensors(f, m, extra)
	})
	if err != nil {
		if m != nil {
			m.Close()
		}
		return nil, nil, err
	}
	if err := radgen.LoadParams(m, ck.file, ""); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	m.extractor.ResNet.Refold()
	setProvenanceMeta(m, ck.metadata[metaProvenance])
	return m, ck, nil
}

// LoadR2Gen builds a model from R2Gen weights by their state_dict names
// (an opened safetensors file or a PyTorch checkpoint's state_dict): the
// encoder–decoder under "encoder_decoder." and, when present, the ResNet
// under "visual_extractor.model.". R2Gen checkpoints carry no vocabulary:
// tok must be the tokenizer rebuilt from the training annotation.json. heads
// and memoryHeads are R2Gen's num_heads and rm_num_heads (8 in the paper).
func LoadR2Gen(src vision.WeightSource, tok *data.Tokenizer, views, heads, memoryHeads int, opts ...Option) (*Model, error) {
	if tok == nil {
		return nil, errors.New("memtrans: nil tokenizer")
	}
	if _, err := budgetOf(opts); err != nil { // the configuration is checked against it in New, before anything is allocated
		return nil, err
	}
	src = withoutDataParallel(src)
	shapes := map[string][]int{}
	for _, n := range src.Names() {
		if rest, ok := cutPrefix(n, "encoder_decoder."); ok {
			shape, err := vision.WeightShape(src, n)
			if err != nil {
				return nil, err
			}
			shapes[rest] = shape
		}
	}
	tcfg, err := r2gen.InferConfig(shapes, heads, memoryHeads, tok.Corpus().MaxSeqLen())
	if err != nil {
		return nil, err
	}
	vcfg, _, err := vision.InferResNet(src.Names(), "visual_extractor.model.")
	if err != nil {
		return nil, fmt.Errorf("memtrans: visual extractor: %w", err)
	}
	cfg := ModelConfig{EncoderDecoder: tcfg, Vision: vcfg, Corpus: tok.Corpus(), Views: views, ImageSize: 224, ResizeTo: 256}
	m, err := New(cfg, tok, 0, opts...)
	if err != nil {
		return nil, err
	}
	if err := radgen.LoadParams(m, src, ""); err != nil {
		return nil, err
	}
	m.extractor.ResNet.Refold()
	return m, nil
}

// modules visits the tensors of several modules in turn.
type modules []radgen.Module

func (ms modules) VisitParams(visit func(string, *radgen.Tensor)) {
	for _, m := range ms {
		m.VisitParams(visit)
	}
}

// withoutDataParallel returns src with the "module." prefix that
// PyTorch's DataParallel and DistributedDataParallel put before every name
// removed, when every name has it; otherwise src itself.
func withoutDataParallel(src vision.WeightSource) vision.WeightSource {
	names := src.Names()
	if len(names) == 0 {
		return src
	}
	out := make([]string, len(names))
	for i, n := range names {
		rest, ok := cutPrefix(n, dataParallelPrefix)
		if !ok {
			return src
		}
		out[i] = rest
	}
	return prefixedSource{src, out}
}

const dataParallelPrefix = "module."

// prefixedSource serves src's tensors without dataParallelPrefix.
type prefixedSource struct {
	src   vision.WeightSource
	names []string
}

func (p prefixedSource) Names() []string { return p.names }

func (p prefixedSource) Float32(name string) ([]float32, []int, error) {
	return p.src.Float32(dataParallelPrefix + name)
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
