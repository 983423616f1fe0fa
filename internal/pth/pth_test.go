package pth

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
)

func openBytes(t testing.TB, b []byte, opts ...Option) (*File, error) {
	t.Helper()
	return Open(bytes.NewReader(b), int64(len(b)), opts...)
}

func mustOpen(t testing.TB, b []byte, opts ...Option) *File {
	t.Helper()
	f, err := openBytes(t, b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func wantTensor(t *testing.T, f *File, name string, shape []int, want []float32) {
	t.Helper()
	got, gs, err := f.Float32(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !slices.Equal(gs, shape) {
		t.Fatalf("%s: shape %v, want %v", name, gs, shape)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", name, got, want)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var ts []Tensor
	for i, shape := range [][]int{{3, 4}, {5}, {}, {2, 0, 3}, {2, 3, 4, 1}} {
		n := 1
		for _, s := range shape {
			n *= s
		}
		d := make([]float32, n)
		for j := range d {
			d[j] = float32(rng.NormFloat64())
		}
		ts = append(ts, Tensor{Name: "layer." + string(rune('a'+i)), Shape: shape, Data: d})
	}
	for _, meta := range []*Meta{nil, {Epoch: 1 << 40, MonitorBest: math.Inf(-1)}} {
		var buf bytes.Buffer
		if err := Write(&buf, ts, meta); err != nil {
			t.Fatal(err)
		}
		f := mustOpen(t, buf.Bytes())
		names := f.Names()
		if len(names) != len(ts) {
			t.Fatalf("names %v", names)
		}
		for i, tt := range ts {
			if names[i] != tt.Name {
				t.Fatalf("name %d: %q, want %q", i, names[i], tt.Name)
			}
			wantTensor(t, f, tt.Name, tt.Shape, tt.Data)
		}
		e, okE := f.Epoch()
		b, okB := f.MonitorBest()
		if meta == nil {
			if okE || okB || len(f.Keys()) != 0 {
				t.Errorf("bare state_dict has metadata: %v %v %v", okE, okB, f.Keys())
			}
		} else if !okE || e != meta.Epoch || !okB || b != meta.MonitorBest {
			t.Errorf("metadata: epoch %d %v, best %v %v", e, okE, b, okB)
		}
	}
	if err := Write(&bytes.Buffer{}, []Tensor{{Name: "x", Shape: []int{2}, Data: []float32{1}}}, nil); err == nil {
		t.Error("Write accepted 1 value for shape [2]")
	}
}

// TestPythonFixtures reads checkpoints written by Python's own pickle with
// the globals torch.save uses (testdata/gen_fixtures.py): an R2Gen-shaped
// checkpoint with an optimizer, a numpy monitor_best, an argparse.Namespace,
// a transposed view, a slice sharing its storage, and float16, bfloat16,
// float64 and int64 tensors; once in the zip format, once legacy.
func TestPythonFixtures(t *testing.T) {
	for _, name := range []string{"r2gen_like.pth", "r2gen_like_legacy.pth"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			f := mustOpen(t, b)
			wantNames := []string{"encoder_decoder.w", "encoder_decoder.wt", "encoder_decoder.slice",
				"encoder_decoder.half", "encoder_decoder.double", "encoder_decoder.bf16",
				"visual_extractor.model.1.num_batches_tracked"}
			if !slices.Equal(f.Names(), wantNames) {
				t.Fatalf("names %v", f.Names())
			}
			if !slices.Equal(f.Keys(), []string{"epoch", "state_dict", "optimizer", "monitor_best", "args"}) {
				t.Errorf("keys %v", f.Keys())
			}
			if e, ok := f.Epoch(); !ok || e != 12 {
				t.Errorf("epoch %d %v", e, ok)
			}
			if b, ok := f.MonitorBest(); !ok || b != 0.1875 {
				t.Errorf("monitor_best %v %v", b, ok)
			}
			wantTensor(t, f, "encoder_decoder.w", []int{2, 3}, []float32{0, 0.25, 0.5, 0.75, 1, 1.25})
			// Storage 0..5 seen as 2×3; the view is its transpose.
			wantTensor(t, f, "encoder_decoder.wt", []int{3, 2}, []float32{0, 3, 1, 4, 2, 5})
			wantTensor(t, f, "encoder_decoder.slice", []int{3}, []float32{2, 3, 4})
			wantTensor(t, f, "encoder_decoder.half", []int{4}, []float32{0.5, -2, 65504, 0x1p-24})
			wantTensor(t, f, "encoder_decoder.double", []int{2}, []float32{0.1, -3.5})
			wantTensor(t, f, "encoder_decoder.bf16", []int{2}, []float32{1, -3})
			wantTensor(t, f, "visual_extractor.model.1.num_batches_tracked", []int{}, []float32{7})
			info, ok := f.Info("encoder_decoder.wt")
			if !ok || info.Dtype != Float32 || info.Contiguous() || !slices.Equal(info.Stride, []int64{1, 3}) {
				t.Errorf("info %+v", info)
			}
			if info, _ := f.Info("encoder_decoder.half"); info.Dtype != Float16 || info.Dtype.String() != "float16" {
				t.Errorf("half info %+v", info)
			}
			if _, _, err := f.Float32("optimizer.state"); !errors.Is(err, radgen.ErrMissingTensor) {
				t.Errorf("missing tensor: %v", err)
			}
		})
	}
}

// TestStrided gathers views a checkpoint can hold: offsets, permuted and
// zero strides, gaps, over every dtype.
func TestStrided(t *testing.T) {
	type view struct {
		off    int64
		shape  []int
		stride []int64
	}
	views := []view{
		{0, []int{24}, []int64{1}},
		{0, []int{2, 3, 4}, []int64{12, 4, 1}},
		{0, []int{4, 3, 2}, []int64{1, 4, 12}}, // full permutation
		{5, []int{3, 2}, []int64{6, 2}},        // gaps
		{7, []int{3, 4}, []int64{0, 1}},        // expand: stride 0
		{23, []int{}, []int64{}},               // scalar at the end
		{3, []int{2, 0, 5}, []int64{100, 1, 1}},
	}
	for _, dt := range []Dtype{Float32, Float16, BFloat16, Float64, Int64, Int32, Int16, Int8, Uint8} {
		// Storage values 0..23, exact in every dtype.
		es := dt.Size()
		raw := make([]byte, 24*es)
		for i := range 24 {
			v := float64(i)
			switch dt {
			case Float32:
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
			case Float64:
				binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
			case Float16:
				binary.LittleEndian.PutUint16(raw[2*i:], f16(float32(v)))
			case BFloat16:
				binary.LittleEndian.PutUint16(raw[2*i:], uint16(math.Float32bits(float32(v))>>16))
			case Int64:
				binary.LittleEndian.PutUint64(raw[8*i:], uint64(i))
			case Int32:
				binary.LittleEndian.PutUint32(raw[4*i:], uint32(i))
			case Int16:
				binary.LittleEndian.PutUint16(raw[2*i:], uint16(i))
			default:
				raw[i] = byte(i)
			}
		}
		b := newBuilder()
		st := b.storage(dt, raw)
		var ts []builtTensor
		for i, v := range views {
			ts = append(ts, builtTensor{name: string(rune('a' + i)), storage: st, offset: v.off, shape: v.shape, stride: v.stride})
		}
		b.p.proto()
		b.stateDict(ts)
		b.p.op('.')
		var buf bytes.Buffer
		if err := b.writeZip(&buf, "x"); err != nil {
			t.Fatal(err)
		}
		f := mustOpen(t, buf.Bytes())
		for i, v := range views {
			want := gatherRef(v.off, v.shape, v.stride)
			got, shape, err := f.Float32(string(rune('a' + i)))
			if err != nil {
				t.Fatalf("%v view %d: %v", dt, i, err)
			}
			if !slices.Equal(shape, v.shape) || !slices.Equal(got, want) {
				t.Fatalf("%v view %d: %v %v, want %v", dt, i, shape, got, want)
			}
		}
	}
}

// gatherRef is the obvious recursive gather over storage values 0..n.
func gatherRef(off int64, shape []int, stride []int64) []float32 {
	if len(shape) == 0 {
		return []float32{float32(off)}
	}
	out := []float32{}
	for i := range shape[0] {
		out = append(out, gatherRef(off+int64(i)*stride[0], shape[1:], stride[1:])...)
	}
	return out
}

// f16 converts small integers to binary16.
func f16(v float32) uint16 {
	if v == 0 {
		return 0
	}
	bits := math.Float32bits(v)
	exp := int(bits>>23&0xff) - 127 + 15
	return uint16(exp)<<10 | uint16(bits>>13&0x3ff)
}

func TestHalf(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 0x1p-24}, {0x8001, -0x1p-24}, {0x03ff, 0x3ffp-24},
		{0x0400, 0x1p-14}, {0x8000, float32(math.Copysign(0, -1))}, {0x7c00, float32(math.Inf(1))}} {
		if got := halfToFloat32(c.h); got != c.want || math.Signbit(float64(got)) != math.Signbit(float64(c.want)) {
			t.Errorf("half %#04x: %v, want %v", c.h, got, c.want)
		}
	}
	if v := halfToFloat32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("NaN became %v", v)
	}
}

func TestCompressedRecords(t *testing.T) {
	// torch.save stores records; a re-zipped checkpoint deflates them.
	var buf bytes.Buffer
	data := []float32{1, 2, 3, 4, 5, 6}
	if err := Write(&buf, []Tensor{{Name: "w", Shape: []int{2, 3}, Data: data}}, &Meta{Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, out.Bytes())
	wantTensor(t, f, "w", []int{2, 3}, data)
}

func TestHostile(t *testing.T) {
	var good bytes.Buffer
	if err := Write(&good, []Tensor{{Name: "w", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}}}, &Meta{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	full := good.Bytes()
	// Every truncation fails cleanly.
	for n := 0; n < len(full); n += 7 {
		if _, err := openBytes(t, full[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: opened", n)
		}
	}
	// The tensor limit.
	if _, err := openBytes(t, full, WithMaxBytes(23)); !errors.Is(err, ErrLimit) {
		t.Errorf("WithMaxBytes(23) on 24 bytes: %v", err)
	}
	if _, err := openBytes(t, full, WithMaxBytes(24)); err != nil {
		t.Errorf("WithMaxBytes(24) on 24 bytes: %v", err)
	}
	if _, err := openBytes(t, full, WithMaxPickleBytes(10)); !errors.Is(err, ErrLimit) {
		t.Errorf("WithMaxPickleBytes(10): %v", err)
	}
	if _, err := openBytes(t, full, WithMaxBytes(0)); err == nil {
		t.Error("WithMaxBytes(0) accepted")
	}

	build := func(t *testing.T, storageLen int, tensors []builtTensor, drop bool) []byte {
		b := newBuilder()
		b.storage(Float32, make([]byte, 4*storageLen))
		b.p.proto()
		b.stateDict(tensors)
		b.p.op('.')
		if drop {
			b.storages = nil
		}
		var buf bytes.Buffer
		if err := b.writeZip(&buf, "archive"); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"past the storage", build(t, 6, []builtTensor{{name: "w", shape: []int{2, 4}, stride: []int64{4, 1}}}, false), ErrFormat},
		{"offset past", build(t, 6, []builtTensor{{name: "w", offset: 6, shape: []int{1}, stride: []int64{1}}}, false), ErrFormat},
		{"huge stride", build(t, 6, []builtTensor{{name: "w", shape: []int{2}, stride: []int64{math.MaxInt64 / 2}}}, false), ErrFormat},
		{"huge shape", build(t, 6, []builtTensor{{name: "w", shape: []int{1 << 20, 1 << 20}, stride: []int64{0, 0}}}, false), ErrLimit},
		{"missing storage", build(t, 6, []builtTensor{{name: "w", shape: []int{6}, stride: []int64{1}}}, true), ErrFormat},
		{"negative stride", build(t, 6, []builtTensor{{name: "w", offset: 5, shape: []int{2}, stride: []int64{-1}}}, false), ErrFormat},
		{"rank mismatch", build(t, 6, []builtTensor{{name: "w", shape: []int{2, 3}, stride: []int64{1}}}, false), ErrFormat},
		{"not a checkpoint", []byte("hello, world"), ErrFormat},
		{"plain pickle", []byte("\x80\x02K\x05."), ErrFormat},
		{"huge BINUNICODE8", []byte("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f"), ErrFormat},
		{"huge frame", []byte("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff"), ErrFormat},
		{"deep marks", append([]byte{0x80, 2}, bytes.Repeat([]byte{'('}, maxMarkDepth+1)...), ErrLimit},
		{"no stop", []byte("\x80\x02]]]]"), ErrFormat},
		{"bad opcode", []byte("\x80\x02\xff."), ErrFormat},
	}
	for _, c := range cases {
		_, err := openBytes(t, c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A pickle inside a zip with hostile content.
	for _, pk := range []string{
		"\x80\x02}q\x00X\x01\x00\x00\x00a]\x85s.",            // dict with an unhashable-ish tuple value
		"\x80\x02c__main__\nEvil\n)R.",                       // unknown class: opaque, then no state_dict
		"\x80\x02]q\x00h\x00a.",                              // a list containing itself
		"\x80\x02ccollections\nOrderedDict\n)RC\x01ab\x88s.", // bytes key in an OrderedDict
		"\x80\x02}X\x01\x00\x00\x00aQ.",                      // BINPERSID of a string
		"\x80\x02ctorch\nFloatStorage\n.",
	} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, _ := zw.Create("archive/data.pkl")
		w.Write([]byte(pk))
		zw.Close()
		if _, err := openBytes(t, buf.Bytes()); !errors.Is(err, ErrFormat) {
			t.Errorf("pickle %q: %v", pk, err)
		}
	}
	// TorchScript.
	var ts bytes.Buffer
	zw := zip.NewWriter(&ts)
	for _, n := range []string{"m/data.pkl", "m/constants.pkl"} {
		w, _ := zw.Create(n)
		w.Write([]byte("\x80\x02N."))
	}
	zw.Close()
	if _, err := openBytes(t, ts.Bytes()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("TorchScript: %v", err)
	}
}

// TestZipBomb: a deflated record declaring gigabytes is never inflated
// beyond what its tensor needs, and a tensor needing more than the limit is
// refused before inflating anything.
func TestZipBomb(t *testing.T) {
	const n = 1 << 23 // elements the storage declares: 32 MiB of float32
	b := newBuilder()
	b.storages = append(b.storages, builtStorage{key: "0", dtype: Float32})
	b.p.proto()
	p := &b.p
	p.orderedDict()
	p.op('(')
	for i, shape := range [][]int{{4}, {n}} {
		p.str(string(rune('a' + i)))
		p.global("torch._utils", "_rebuild_tensor_v2")
		p.op('(')
		p.op('(')
		p.str("storage")
		p.global("torch", "FloatStorage")
		p.str("0")
		p.str("cpu")
		p.int(n)
		p.op('t')
		p.op('Q')
		p.int(0)
		p.op('(')
		p.int(int64(shape[0]))
		p.op('t')
		p.op('(')
		p.int(1)
		p.op('t')
		p.op(0x89)
		p.orderedDict()
		p.op('t')
		p.op('R')
	}
	p.op('u')
	p.op('.')
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("archive/data.pkl")
	w.Write(p.buf.Bytes())
	w, _ = zw.Create("archive/data/0")
	zeros := make([]byte, 1<<20)
	for range 4 * n / len(zeros) {
		w.Write(zeros)
	}
	zw.Close()
	t.Logf("bomb: %d bytes of zip for %d bytes of data", buf.Len(), 4*n)
	if _, err := openBytes(t, buf.Bytes(), WithMaxBytes(1<<20)); !errors.Is(err, ErrLimit) {
		t.Fatalf("bomb under a 1 MiB limit: %v", err)
	}
	f := mustOpen(t, buf.Bytes())
	wantTensor(t, f, "a", []int{4}, []float32{0, 0, 0, 0})
}

func TestLegacyErrors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "r2gen_like_legacy.pth"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n += 5 {
		if _, err := openBytes(t, b[:n]); err == nil {
			t.Fatalf("legacy truncated to %d bytes opened", n)
		}
	}
	bad := append([]byte(nil), b...)
	bad[4] ^= 1 // the magic number
	if _, err := openBytes(t, bad); !errors.Is(err, ErrFormat) {
		t.Errorf("bad magic: %v", err)
	}
}

func FuzzPth(f *testing.F) {
	for _, name := range []string{"r2gen_like.pth", "r2gen_like_legacy.pth"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}}, &Meta{Epoch: 2, MonitorBest: 0.5}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("\x80\x02}q\x00."))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 20
		pf, err := openBytes(t, b, WithMaxBytes(limit), WithMaxPickleBytes(limit))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		total := 0
		for _, name := range pf.Names() {
			info, ok := pf.Info(name)
			if !ok {
				t.Fatalf("%q listed without info", name)
			}
			v, shape, err := pf.Float32(name)
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("%q: unclassified error: %v", name, err)
				}
				continue
			}
			if len(v) != info.Len() || !slices.Equal(shape, info.Shape) {
				t.Fatalf("%q: %d values for shape %v", name, len(v), info.Shape)
			}
			total += 4 * len(v)
		}
		if total > limit {
			t.Fatalf("read %d bytes of tensors under a %d limit", total, limit)
		}
		_ = strings.Join(pf.Keys(), ",")
	})
}

// TestConcurrent reads every tensor from several goroutines at once.
func TestConcurrent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "r2gen_like.pth"))
	if err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, b)
	want := map[string][]float32{}
	for _, n := range f.Names() {
		v, _, err := f.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		want[n] = v
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for _, n := range f.Names() {
				v, _, err := f.Float32(n)
				if err == nil && !slices.Equal(v, want[n]) {
					err = errors.New(n + " differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestUnsupportedTensor: a quantized tensor in the state_dict is refused by
// name rather than dropped.
func TestUnsupportedTensor(t *testing.T) {
	b := newBuilder()
	p := &b.p
	p.proto()
	p.orderedDict()
	p.op('(')
	p.str("q.weight")
	p.global("torch._utils", "_rebuild_qtensor")
	p.op(')')
	p.op('R')
	p.op('u')
	p.op('.')
	var buf bytes.Buffer
	if err := b.writeZip(&buf, "archive"); err != nil {
		t.Fatal(err)
	}
	if _, err := openBytes(t, buf.Bytes()); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "q.weight") {
		t.Errorf("quantized tensor: %v", err)
	}
}
