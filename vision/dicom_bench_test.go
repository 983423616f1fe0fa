package vision

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecodeDICOM renders the 1760×2140 chest CR (7.5 MB) from
// memory and reports megapixels per second.
func BenchmarkDecodeDICOM(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(dicomTestdata(b), "4.dcm"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var px int
	for b.Loop() {
		p, err := DecodeDICOM(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		px = p.W * p.H
	}
	b.ReportMetric(float64(px)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpixel/s")
}
