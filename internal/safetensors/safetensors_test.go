package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func sample(t testing.TB) []byte {
	var buf bytes.Buffer
	err := Write(&buf, []Tensor{
		{Name: "w", Dtype: F32, Shape: []int{2, 3}, Data: F32Bytes([]float32{1, 2, 3, 4, 5, 6})},
		{Name: "ids", Dtype: I64, Shape: []int{3}, Data: I64Bytes([]int64{7, -1, 0})},
		{Name: "s", Dtype: F32, Shape: nil, Data: F32Bytes([]float32{2.5})},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := sample(t)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata = %q", got)
	}
	w, shape, err := f.Float32("w")
	if err != nil || len(shape) != 2 || shape[0] != 2 || shape[1] != 3 || w[5] != 6 {
		t.Errorf("w = %v %v %v", w, shape, err)
	}
	ids, _, err := f.Int64("ids")
	if err != nil || ids[0] != 7 || ids[1] != -1 {
		t.Errorf("ids = %v %v", ids, err)
	}
	s, shape, err := f.Float32("s")
	if err != nil || len(shape) != 0 || s[0] != 2.5 {
		t.Errorf("scalar = %v %v %v", s, shape, err)
	}
	if _, _, err := f.Float32("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v", err)
	}
	if _, _, err := f.Int64("w"); err == nil {
		t.Error("Int64 of an F32 tensor succeeded")
	}
}

func TestHostile(t *testing.T) {
	good := sample(t)
	hdrLen := binary.LittleEndian.Uint64(good)
	cases := map[string][]byte{
		"empty":          {},
		"short":          good[:5],
		"truncated data": good[:len(good)-3],
		"huge header":    append(binary.LittleEndian.AppendUint64(nil, 1<<62), good[8:]...),
		"not json":       append(binary.LittleEndian.AppendUint64(nil, 4), []byte("abcd")...),
		"bad offsets":    withHeader(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}}`, 8),
		"size mismatch":  withHeader(`{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8),
		"negative dim":   withHeader(`{"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8),
		"overflow shape": withHeader(`{"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, 8),
		"unknown dtype":  withHeader(`{"x":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}`, 8),
		"bad metadata":   withHeader(`{"__metadata__":{"a":1}}`, 0),
	}
	_ = hdrLen
	for name, b := range cases {
		if _, err := Open(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func withHeader(h string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(b, h...)
	return append(b, make([]byte, data)...)
}

func FuzzOpen(f *testing.F) {
	f.Add(sample(f))
	f.Add(withHeader(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(withHeader(`{"__metadata__":{"a":"b"},"y":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}}`, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			info, _ := file.Info(n)
			v, _, err := file.Float32(n)
			if err != nil {
				t.Fatalf("Float32(%q) after a good Open: %v", n, err)
			}
			if len(v) != info.Len() {
				t.Fatalf("len %d for %v", len(v), info.Shape)
			}
		}
	})
}
