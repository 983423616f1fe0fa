package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Tensor is one entry to write.
type Tensor struct {
	Name  string
	Dtype Dtype
	Shape []int
	// Data holds the little-endian bytes; see F32Bytes and I64Bytes.
	Data []byte
}

// F32Bytes encodes float32 values little-endian.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// I64Bytes encodes int64 values little-endian.
func I64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// Write writes tensors, in the given order, and metadata (may be nil) in
// the safetensors format.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for _, t := range tensors {
		if _, dup := hdr[t.Name]; dup || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: duplicate or reserved tensor name %q", t.Name)
		}
		n := 1
		for _, s := range t.Shape {
			n *= s
		}
		if t.Dtype.Size() == 0 || len(t.Data) != n*t.Dtype.Size() {
			return fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.Dtype)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.Dtype, "shape": shape, "data_offsets": []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: encoding header: %w", err)
	}
	// Pad the header with spaces to a multiple of 8 so the data is aligned.
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(js)))
	if _, err := w.Write(lb[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
