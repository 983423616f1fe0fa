package pth

import (
	"bytes"
	"math"
	"testing"
)

// BenchmarkFloat32 reads a 1024×1024 float32 weight (4 MiB), stored
// contiguously and as a transposed view, and a float16 copy; it reports
// the output rate in MB/s of float32 produced.
func BenchmarkFloat32(b *testing.B) {
	const n = 1024
	raw32 := make([]byte, 4*n*n)
	raw16 := make([]byte, 2*n*n)
	for i := range n * n {
		v := float32(i%977) / 977
		bits := math.Float32bits(v)
		raw32[4*i], raw32[4*i+1], raw32[4*i+2], raw32[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		raw16[2*i], raw16[2*i+1] = 0x00, 0x3c // 1.0
	}
	bl := newBuilder()
	s32 := bl.storage(Float32, raw32)
	s16 := bl.storage(Float16, raw16)
	bl.p.proto()
	bl.stateDict([]builtTensor{
		{name: "contiguous", storage: s32, shape: []int{n, n}, stride: []int64{n, 1}},
		{name: "transposed", storage: s32, shape: []int{n, n}, stride: []int64{1, n}},
		{name: "float16", storage: s16, shape: []int{n, n}, stride: []int64{n, 1}},
	})
	bl.p.op('.')
	var buf bytes.Buffer
	if err := bl.writeZip(&buf, "archive"); err != nil {
		b.Fatal(err)
	}
	f := mustOpen(b, buf.Bytes())
	for _, name := range f.Names() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(4 * n * n)
			for b.Loop() {
				if _, _, err := f.Float32(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen parses the pickle of the R2Gen-shaped fixture.
func BenchmarkOpen(b *testing.B) {
	var ts []Tensor
	for i := range 600 { // about as many entries as R2Gen with a ResNet-101
		ts = append(ts, Tensor{Name: "encoder_decoder.model.layer." + string(rune('a'+i%26)) + ".weight" + string(rune('0'+i/26%10)) + string(rune('0'+i/260)), Shape: []int{2}, Data: []float32{1, 2}})
	}
	var buf bytes.Buffer
	if err := Write(&buf, ts, &Meta{Epoch: 1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Names()) != 600 {
			b.Fatal(len(f.Names()))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/600, "µs/tensor")
}
