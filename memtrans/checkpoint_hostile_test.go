package memtrans

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// seal wraps a payload in the native format: magic, the declared length,
// the payload's checksum and the zstd stream.
func seal(t testing.TB, payload []byte, declared uint64) []byte {
	t.Helper()
	sum := sha256.Sum256(payload)
	var out bytes.Buffer
	out.WriteString(checkpointMagic)
	binary.Write(&out, binary.LittleEndian, declared)
	out.Write(sum[:])
	enc, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(payload)
	enc.Close()
	return out.Bytes()
}

// unseal returns the payload of a native file.
func unseal(t testing.TB, b []byte) []byte {
	t.Helper()
	dec, err := zstd.NewReader(bytes.NewReader(b[len(checkpointMagic)+8+sha256.Size:]))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	p, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tinySaved returns a saved tiny model, its tokenizer and its payload.
func tinySaved(t testing.TB) ([]byte, *data.Tokenizer, []byte) {
	t.Helper()
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(t *r2gen.Config) { t.DModel, t.DFF, t.Layers = 8, 8, 1 })
	editR2(&cfg, func(t *r2gen.Config) { t.Heads, t.MemoryHeads = 2, 2 })
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tok, unseal(t, buf.Bytes())
}

// withConfig rewrites the configuration in a payload's metadata.
func withConfig(t testing.TB, payload []byte, edit func(*ModelConfig)) []byte {
	t.Helper()
	f, err := safetensors.Open(bytes.NewReader(payload), int64(len(payload)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata()
	var cfg ModelConfig
	if err := json.Unmarshal([]byte(md[metaConfig]), &cfg); err != nil {
		t.Fatal(err)
	}
	edit(&cfg)
	b, _ := json.Marshal(cfg)
	md[metaConfig] = string(b)
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, data, err := f.Bytes(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: n, Dtype: info.Dtype, Shape: info.Shape, Data: data})
	}
	var out bytes.Buffer
	if err := safetensors.Write(&out, ts, md); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// rawPayload writes a safetensors payload whose header declares tensors
// that need not be backed by data (dataSize bytes follow, zero).
func rawPayload(header map[string]any, dataSize int) []byte {
	h, _ := json.Marshal(header)
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(make([]byte, dataSize))
	return out.Bytes()
}

// Hostile native checkpoints end in a clear error, no panic, with the heap
// allocation bounded by the file's own model (a few MB here), whatever the
// header claims.
func TestLoadHostileCheckpoints(t *testing.T) {
	skipUnderRace(t)
	good, _, payload := tinySaved(t)
	if _, err := Load(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	bigLayers := withConfig(t, payload, func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.Layers = 1 << 20 }) })
	bigWidth := withConfig(t, payload, func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DModel = 1 << 20 }) })
	bigVocab := withConfig(t, payload, func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DModel, t.PositionLen = 512, 1<<20 }) })

	// A checksummed payload whose header declares a 256 MiB tensor of
	// zeros (a 98 KB-style bomb): refused from the header.
	f, _ := safetensors.Open(bytes.NewReader(payload), int64(len(payload)))
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, b, _ := f.Bytes(n)
		ts = append(ts, safetensors.Tensor{Name: n, Dtype: info.Dtype, Shape: info.Shape, Data: b})
	}
	ts = append(ts, safetensors.Tensor{Name: "junk", Dtype: safetensors.F32, Shape: []int{16 << 20}, Data: make([]byte, 64<<20)})
	var jb bytes.Buffer
	safetensors.Write(&jb, ts, f.Metadata())
	junk := jb.Bytes()
	// A header whose tensors do not account for its data section.
	hdr2 := map[string]any{"__metadata__": f.Metadata(), "x": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int64{0, 4}}}
	gap := rawPayload(hdr2, 64<<20)
	// Zeros all the way: a tensor header of length 0.
	zeros := make([]byte, 64<<20)

	model := uint64(len(payload)) // the model's own size
	corrupt := bytes.Clone(payload)
	corrupt[len(corrupt)-5] ^= 0x40
	cases := []struct {
		name   string
		file   []byte
		want   string
		budget uint64 // bytes the load may allocate
	}{
		{"num_layers 2^20", seal(t, bigLayers, uint64(len(bigLayers))), "num_layers = 1048576", 16 << 20},
		{"d_model 2^20", seal(t, bigWidth, uint64(len(bigWidth))), "d_model = 1048576", 16 << 20},
		{"pe_len 2^20", seal(t, bigVocab, uint64(len(bigVocab))), "pe_len = 1048576", 16 << 20},
		{"undeclared junk tensor", seal(t, junk, uint64(len(junk))), "bytes of tensors", 4 * model},
		{"data no tensor accounts for", seal(t, gap, uint64(len(gap))), "data section", 16 << 20},
		{"zeros bomb", seal(t, zeros, uint64(len(zeros))), "tensor header of 0 bytes", 16 << 20},
		{"payload over the limit", seal(t, payload[:100], 16<<30), "exceeds the limit", 1 << 20},
		{"checksum", seal(t, corrupt, uint64(len(corrupt)))[:0], "", 0},
		{"declared longer", seal(t, payload, uint64(len(payload))+1000), "data section", 16 << 20},
		{"declared shorter", seal(t, payload, uint64(len(payload))-1), "", 16 << 20},
		{"truncated stream", good[:len(good)-100], "", 4 * model},
		{"not a checkpoint", []byte("PK\x03\x04 not ours at all, long enough for a header......"), "not a radgen checkpoint", 1 << 20},
	}
	// The checksum case: the header names the real payload's sum, the data
	// differs.
	sealed := seal(t, payload, uint64(len(payload)))
	bad := seal(t, corrupt, uint64(len(corrupt)))
	copy(bad[len(checkpointMagic)+8:], sealed[len(checkpointMagic)+8:len(checkpointMagic)+8+sha256.Size])
	cases[7].file, cases[7].want, cases[7].budget = bad, "checksum mismatch", 4*model
	for _, c := range cases {
		var err error
		var m *Model
		n := allocated(func() { m, err = Load(bytes.NewReader(c.file)) })
		if err == nil || m != nil || !errors.Is(err, ErrCheckpoint) && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if n > c.budget {
			t.Errorf("%s: allocated %d bytes, bound %d", c.name, n, c.budget)
		}
	}
}

// An R2Gen weight file with one forged tensor name far beyond the real
// layers is refused from the names, without a model of a million layers.
func TestLoadR2GenForgedLayer(t *testing.T) {
	tok, _, ts := tinyR2GenWeights(t)
	var st []safetensors.Tensor
	for _, x := range ts {
		st = append(st, safetensors.Tensor{Name: x.Name, Dtype: safetensors.F32, Shape: x.Shape, Data: safetensors.F32Bytes(x.Data)})
	}
	st = append(st, safetensors.Tensor{Name: "encoder_decoder.model.encoder.layers.999999.x", Dtype: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, st, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "forged.safetensors")
	os.WriteFile(path, buf.Bytes(), 0o644)
	var pbuf bytes.Buffer
	ts = append(ts, pth.Tensor{Name: "encoder_decoder.model.encoder.layers.999999.x", Shape: []int{1}, Data: []float32{1}})
	if err := pth.Write(&pbuf, ts, nil); err != nil {
		t.Fatal(err)
	}
	ppath := filepath.Join(dir, "forged.pth")
	os.WriteFile(ppath, pbuf.Bytes(), 0o644)
	for _, p := range []string{path, ppath} {
		var err error
		n := allocated(func() { _, err = LoadR2GenFile(p, tok, 2, 2, 2) })
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "num_layers") {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
		if n > 32<<20 {
			t.Errorf("%s: allocated %d bytes", filepath.Base(p), n)
		}
	}
}

// FuzzCheckpointPayload fuzzes the decompressed payload — the safetensors
// header, the configuration and vocabulary in its metadata, the tensor
// table — sealed with a valid checksum, so that the fuzzer reaches the
// header and configuration checks instead of stopping at zstd.
func FuzzCheckpointPayload(f *testing.F) {
	_, _, payload := tinySaved(f)
	f.Add(payload)
	f.Add(withConfig(f, payload, func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.Layers = 1 << 20 }) }))
	f.Add(withConfig(f, payload, func(c *ModelConfig) { editR2(c, func(t *r2gen.Config) { t.DModel = 1 << 20 }) }))
	f.Add(withConfig(f, payload, func(c *ModelConfig) { c.Views = 16 }))
	f.Add(payload[:200])
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > 4<<20 {
			return
		}
		b := seal(t, p, uint64(len(p)))
		var m *Model
		var err error
		n := allocated(func() {
			m, err = Load(bytes.NewReader(b), WithModelOptions(WithBudget(Budget{MaxCheckpointBytes: 8 << 20})))
		})
		if err == nil {
			if m == nil {
				t.Fatal("nil model without error")
			}
			m.Close()
			return
		}
		if m != nil {
			t.Fatal("model with an error")
		}
		// What a refused payload may cost: its own size a few times over,
		// plus a model of the default budget's tiny fraction that the
		// header may legitimately describe.
		if n > 64<<20+8*uint64(len(p)) {
			t.Fatalf("refusing %d bytes allocated %d: %v", len(p), n, err)
		}
	})
}

// A killed save leaves its temporary file; the next save of the same
// target removes it (and those of earlier kills).
func TestSaveFileRemovesStaleTemps(t *testing.T) {
	_, tok, _ := tinySaved(t)
	cfg := R2GenTiny(tok.Len() + 1)
	editR2(&cfg, func(t *r2gen.Config) { t.DModel, t.DFF, t.Layers = 8, 8, 1 })
	editR2(&cfg, func(t *r2gen.Config) { t.Heads, t.MemoryHeads = 2, 2 })
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "model.radgen")
	for i := range 30 {
		// What a save killed before its rename leaves.
		f, err := os.CreateTemp(dir, ".model.radgen.tmp*")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Repeat([]byte{byte(i)}, 1000))
		f.Close()
	}
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("stale %s left", e.Name())
		}
	}
	if _, err := LoadFile(path); err != nil {
		t.Fatal(err)
	}
}

// A FIFO given as a checkpoint is refused at once (it would block without
// a writer); so are devices.
func TestLoadFileNonRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.radgen")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFOs:", err)
	}
	tok, _ := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal."})
	for _, p := range []string{fifo, "/dev/zero"} {
		if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadFile(%s): %v", p, err)
		}
		if _, err := LoadR2GenFile(p, tok, 2, 2, 2); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadR2GenFile(%s): %v", p, err)
		}
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		// Allowed, /dev/zero is no checkpoint: the magic is wrong.
		if _, err := LoadFile("/dev/zero", WithNonRegularCheckpoint()); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("LoadFile(/dev/zero) allowed: %v", err)
		}
	}
}
