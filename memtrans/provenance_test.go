package memtrans

import (
	"bytes"
	"testing"

	"github.com/radgen/radgen/memtrans/data"
)

// TestProvenanceRoundTrip: what WithProvenance records survives Save and
// Load; a checkpoint without it loads as unknown.
func TestProvenanceRoundTrip(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal . the lungs are clear ."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	cfg.ImageSize, cfg.ResizeTo = 64, 64
	want := Provenance{Data: "synthetic chest films", Synthetic: true}
	for _, p := range []Provenance{want, {}} {
		m, err := New(cfg, tok, 1, WithProvenance(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Provenance(); got != p {
			t.Errorf("New: provenance %+v, want %+v", got, p)
		}
		var b bytes.Buffer
		if err := m.Save(&b); err != nil {
			t.Fatal(err)
		}
		m.Close()
		back, err := Load(&b)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.Provenance(); got != p {
			t.Errorf("Load: provenance %+v, want %+v", got, p)
		}
		back.Close()
	}
	if _, err := New(cfg, tok, 1, WithProvenance(Provenance{Data: "\xff"})); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
	m, _ := New(cfg, tok, 1)
	setProvenanceMeta(m, `{"data": 42}`)
	if got := m.Provenance(); got != (Provenance{}) {
		t.Errorf("malformed metadata read as %+v", got)
	}
	m.Close()
}
