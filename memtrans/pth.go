package memtrans

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"

	"github.com/radgen/radgen/internal/boundedio"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// LoadR2GenFile builds a model from R2Gen weights in a file, as
// [LoadR2Gen] does from an opened source. The file is either a PyTorch
// checkpoint — what R2Gen's trainer saves (model_best.pth, {'epoch',
// 'state_dict', 'optimizer', 'monitor_best'}), a bare state_dict, in the zip
// format of PyTorch ≥ 1.6 or the legacy one — or a safetensors file holding
// the same state_dict names. The format is recognised from the content, not
// the file name. The optimizer state and other entries are skipped without
// being read; float16, bfloat16 and float64 weights are converted to
// float32.
//
// The options apply as for [Load]: the Budget's MaxCheckpointBytes bounds
// the float32 size of a PyTorch state_dict, [WithModelOptions] configures
// the model; a
// logger given with WithLogger receives the checkpoint's epoch and
// monitor_best.
// A malformed file gives an error wrapping [ErrCheckpoint].
func LoadR2GenFile(path string, tok *data.Tokenizer, views, heads, memoryHeads int, opts ...LoadOption) (*Model, error) {
	var o loadOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	b, err := budgetOf(o.model)
	if err != nil {
		return nil, err
	}
	o.maxBytes = b.MaxCheckpointBytes
	f, err := boundedio.Open(path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	src, err := openWeights(f, st.Size(), o.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := LoadR2Gen(src, tok, views, heads, memoryHeads, o.model...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.logger != nil {
		attrs := []slog.Attr{slog.String("path", path), slog.Int("tensors", len(src.Names()))}
		if p, ok := src.(*pth.File); ok {
			// R2Gen's training state: the epoch saved and the best
			// validation score so far.
			if e, ok := p.Epoch(); ok {
				attrs = append(attrs, slog.Int64("epoch", e))
			}
			if b, ok := p.MonitorBest(); ok {
				attrs = append(attrs, slog.Float64("monitor_best", b))
			}
		}
		m.logger.LogAttrs(context.Background(), slog.LevelInfo, "memtrans: loaded R2Gen weights", attrs...)
	}
	return m, nil
}

// Both weight files serve tensors by state_dict name.
var (
	_ vision.WeightSource = (*pth.File)(nil)
	_ vision.WeightSource = (*safetensors.File)(nil)
)

// weightShape returns the shape of the named tensor, from the file's
// header when the source has one (nothing is read or converted), else by

// Weight file formats recognised by openWeights.
const (
	formatUnknown = iota
	formatPth
	formatSafetensors
)

// sniffWeights recognises a weight file by its first bytes: a zip (the
// PyTorch format since 1.6), a pickle's PROTO opcode (legacy PyTorch), or a
// safetensors header (a little-endian length that fits the file, then "{").
func sniffWeights(r io.ReaderAt, size int64) int {
	var head [9]byte
	n, _ := r.ReadAt(head[:], 0)
	switch {
	case n >= 4 && string(head[:4]) == "PK\x03\x04":
		return formatPth
	case n >= 2 && head[0] == 0x80 && head[1] >= 2:
		return formatPth
	case n == len(head) && head[8] == '{':
		if hl := binary.LittleEndian.Uint64(head[:8]); hl >= 2 && hl <= uint64(size-8) {
			return formatSafetensors
		}
	}
	return formatUnknown
}

// openWeights opens r as a PyTorch checkpoint or a safetensors file.
func openWeights(r io.ReaderAt, size, maxBytes int64) (vision.WeightSource, error) {
	switch sniffWeights(r, size) {
	case formatPth:
		f, err := pth.Open(r, size, pth.WithMaxBytes(maxBytes))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		return f, nil
	case formatSafetensors:
		f, err := safetensors.Open(r, size)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: neither a PyTorch checkpoint nor a safetensors file", ErrCheckpoint)
}
