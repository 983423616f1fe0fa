package memtrans

import (
	"bytes"
	"errors"
	"testing"

	"github.com/radgen/radgen"
)

func TestMETransParamCount(t *testing.T) {
	for _, c := range []METransConfig{
		tinyMETransPreset(10, 6, 4),
		{DIn: 3, Patches: 3, Experts: 2, DModel: 4, Heads: 2, DFF: 6, DMid: 3, ViTLayers: 2, BilinearLayers: 3,
			DecoderLayers: 1, Vocab: 7, MaxSeqLen: 5},
	} {
		m, err := newMETransformer(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, p := range radgen.Params(m) {
			n += p.Tensor.Len()
		}
		if got := c.paramCount(); got != float64(n) {
			t.Fatalf("paramCount %v, model has %d", got, n)
		}
	}
}

func TestMETransSaveLoad(t *testing.T) {
	m := tinyMETrans(t, 0)
	var buf bytes.Buffer
	if err := m.save(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := loadMETransformer(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.config != m.config {
		t.Fatalf("config %+v, want %+v", got.config, m.config)
	}
	want := radgen.StateDict(m, "")
	for _, p := range radgen.Params(got) {
		w := want[p.Name].Data()
		for i, v := range p.Tensor.Data() {
			if v != w[i] {
				t.Fatalf("%s[%d] = %v, want %v", p.Name, i, v, w[i])
			}
		}
	}
	// Corruption is caught by the checksum; a truncated file by the length.
	bad := append([]byte(nil), buf.Bytes()...)
	bad[len(bad)/2] ^= 0x40
	if _, err := loadMETransformer(bytes.NewReader(bad)); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("corrupted checkpoint: %v", err)
	}
	if _, err := loadMETransformer(bytes.NewReader(buf.Bytes()[:buf.Len()-9])); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("truncated checkpoint: %v", err)
	}
	// A configuration larger than the stored values is refused before
	// anything is allocated.
	var forged bytes.Buffer
	cfg := `{"d_in":3,"patches":3,"experts":2,"d_model":65536,"heads":1,"d_ff":6,"d_mid":3,"vit_layers":1,` +
		`"bilinear_layers":1,"decoder_layers":2,"vocab":10,"max_seq_length":8}`
	if err := writeCheckpoint(&forged, m, map[string]string{metaMETransConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := loadMETransformer(bytes.NewReader(forged.Bytes())); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("forged configuration: %v", err)
	}
}

func FuzzLoadMETransformer(f *testing.F) {
	c := METransConfig{DIn: 3, Patches: 3, Experts: 2, DModel: 4, Heads: 2, DFF: 6, DMid: 3, ViTLayers: 1,
		BilinearLayers: 1, DecoderLayers: 1, Vocab: 7, MaxSeqLen: 5}
	m, err := newMETransformer(c, 1)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.save(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:60])
	f.Add([]byte(checkpointMagic))
	f.Add(append([]byte(checkpointMagic), make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := loadMETransformer(bytes.NewReader(b), WithModelOptions(WithBudget(Budget{MaxCheckpointBytes: 16 << 20})))
		if err != nil {
			if got != nil {
				t.Fatal("model with an error")
			}
			return
		}
		// Whatever loads saves and loads again to the same parameters.
		var again bytes.Buffer
		if err := got.save(&again); err != nil {
			t.Fatal(err)
		}
		back, err := loadMETransformer(bytes.NewReader(again.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if back.config != got.config {
			t.Fatalf("config changed: %+v vs %+v", back.config, got.config)
		}
	})
}
