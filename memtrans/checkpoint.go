package memtrans

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/data"
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

// DefaultMaxCheckpointBytes bounds the decompressed size of a checkpoint
// that Load accepts (see WithMaxCheckpointBytes).
const DefaultMaxCheckpointBytes = 8 << 30

// checkpoint is the decoded payload of a native file.
type checkpoint struct {
	file     *safetensors.File
	metadata map[string]string
}

// writeCheckpoint writes tensors and metadata in the native format.
func writeCheckpoint(w io.Writer, tensors []safetensors.Tensor, metadata map[string]string) error {
	var payload bytes.Buffer
	if err := safetensors.Write(&payload, tensors, metadata); err != nil {
		return err
	}
	sum := sha256.Sum256(payload.Bytes())
	hdr := make([]byte, 0, len(checkpointMagic)+8+len(sum))
	hdr = append(hdr, checkpointMagic...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(payload.Len()))
	hdr = append(hdr, sum[:]...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if _, err := enc.Write(payload.Bytes()); err != nil {
		enc.Close()
		return err
	}
	return enc.Close()
}

// readCheckpoint reads and verifies a native file of the given size.
func readCheckpoint(r io.Reader, maxBytes int64) (*checkpoint, error) {
	hdr := make([]byte, len(checkpointMagic)+8+sha256.Size)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCheckpoint, err)
	}
	if string(hdr[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: not a radgen checkpoint (magic %q)", ErrCheckpoint, hdr[:len(checkpointMagic)])
	}
	n := binary.LittleEndian.Uint64(hdr[len(checkpointMagic):])
	if n > uint64(maxBytes) {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds the limit of %d", ErrCheckpoint, n, maxBytes)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderMaxMemory(uint64(maxBytes)), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	// Grow with the data read, never trusting the header's length for the
	// allocation up front beyond a modest cap.
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<20)))
	got, err := io.Copy(&buf, io.LimitReader(dec, int64(n)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: decompressing: %v", ErrCheckpoint, err)
	}
	if uint64(got) != n {
		return nil, fmt.Errorf("%w: payload is %d bytes, header says %d (truncated or corrupt)", ErrCheckpoint, got, n)
	}
	sum := sha256.Sum256(buf.Bytes())
	if !bytes.Equal(sum[:], hdr[len(checkpointMagic)+8:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpoint)
	}
	f, err := safetensors.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return &checkpoint{file: f, metadata: f.Metadata()}, nil
}

// moduleTensors lists m's tensors as float32 safetensors entries.
func moduleTensors(m radgen.Module) []safetensors.Tensor {
	var out []safetensors.Tensor
	m.VisitParams(func(name string, t *radgen.Tensor) {
		v := t
		if v.Is64() {
			v = v.To32()
		}
		out = append(out, safetensors.Tensor{Name: name, Dtype: safetensors.F32, Shape: append([]int{}, t.Shape()...), Data: safetensors.F32Bytes(v.Data())})
	})
	return out
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

func (m *Model) save(w io.Writer, extra []safetensors.Tensor, meta map[string]string) error {
	cfg, err := json.Marshal(m.cfg)
	if err != nil {
		return err
	}
	vocab, err := json.Marshal(m.tokenizer)
	if err != nil {
		return err
	}
	md := map[string]string{"format": "pt", metaConfig: string(cfg), metaVocab: string(vocab)}
	for k, v := range meta {
		md[k] = v
	}
	return writeCheckpoint(w, append(moduleTensors(m), extra...), md)
}

// SaveFile writes the model to path atomically: a temporary file in the same
// directory, fsync, then rename.
func (m *Model) SaveFile(path string) error {
	return writeFileAtomic(path, m.Save)
}

func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // persist the rename
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadOption configures Load.
type LoadOption func(*loadOptions) error

type loadOptions struct {
	maxBytes int64
	model    []Option
}

// WithMaxCheckpointBytes bounds the decompressed size of a checkpoint
// (default DefaultMaxCheckpointBytes).
func WithMaxCheckpointBytes(n int64) LoadOption {
	return func(o *loadOptions) error {
		if n <= 0 {
			return fmt.Errorf("memtrans: checkpoint limit %d", n)
		}
		o.maxBytes = n
		return nil
	}
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

// LoadFile reads a model from a native checkpoint file.
func LoadFile(path string, opts ...LoadOption) (*Model, error) {
	f, err := os.Open(path)
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
	o := loadOptions{maxBytes: DefaultMaxCheckpointBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, nil, err
		}
	}
	ck, err := readCheckpoint(r, o.maxBytes)
	if err != nil {
		return nil, nil, err
	}
	var cfg ModelConfig
	if err := json.Unmarshal([]byte(ck.metadata[metaConfig]), &cfg); err != nil {
		return nil, nil, fmt.Errorf("%w: config: %v", ErrCheckpoint, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	var tok data.Tokenizer
	if err := json.Unmarshal([]byte(ck.metadata[metaVocab]), &tok); err != nil {
		return nil, nil, fmt.Errorf("%w: vocabulary: %v", ErrCheckpoint, err)
	}
	if cfg.vocab() != tok.Len()+1 {
		return nil, nil, fmt.Errorf("%w: vocabulary of %d tokens for an output of %d", ErrCheckpoint, tok.Len(), cfg.vocab())
	}
	m, err := New(cfg, &tok, 0, o.model...)
	if err != nil {
		return nil, nil, err
	}
	if err := radgen.LoadParams(m, ck.file, ""); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	m.extractor.ResNet.Refold()
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
	b, err := budgetOf(opts)
	if err != nil {
		return nil, err
	}
	shapes := map[string][]int{}
	for _, n := range src.Names() {
		if rest, ok := cutPrefix(n, "encoder_decoder."); ok {
			shape, err := weightShape(src, n)
			if err != nil {
				return nil, err
			}
			shapes[rest] = shape
		}
	}
	tcfg, err := inferConfig(shapes, heads, memoryHeads, tok.Corpus().MaxSeqLen(), b)
	if err != nil {
		return nil, err
	}
	vcfg, _, err := vision.InferResNet(src.Names(), "visual_extractor.model.")
	if err != nil {
		return nil, fmt.Errorf("memtrans: visual extractor: %w", err)
	}
	cfg := ModelConfig{Transformer: tcfg, Vision: vcfg, Corpus: tok.Corpus(), Views: views, ImageSize: 224, ResizeTo: 256}
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

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
