package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans/hl7"
)

// TestWatchOnce, radgen watch against Orthanc, is memtrans/pacs's
// TestRadgenWatchOnce: it needs internal/orthanctest, which an example may
// not import.

func TestParseSince(t *testing.T) {
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want string
	}{{"", "0001-01-01"}, {"2024-01-31", "2024-01-31"}, {"20240131", "2024-01-31"}, {"72h", "2024-03-07"}} {
		got, err := parseSince(c.in, now)
		if err != nil || got.Format("2006-01-02") != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"yesterday", "-3h", "2024-13-01"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestGenerateHL7: radgen generate -hl7 writes one ORU^R01 per study of a
// DICOM folder, carrying its report, identifiers and status P.
func TestGenerateHL7(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) covers it")
	}
	dir := t.TempDir()
	model := tinyModel(t, dir)
	in := filepath.Join(dir, "export")
	studies := []string{"1.2.826.0.1.3680043.8.498.81", "1.2.826.0.1.3680043.8.498.82"}
	for i, s := range studies {
		writeFilm(t, filepath.Join(in, "s"+string(rune('a'+i)), "IM0001"), s, s+".1.1", "PA", 80, 72)
		writeFilm(t, filepath.Join(in, "s"+string(rune('a'+i)), "IM0002"), s, s+".1.2", "LL", 72, 80)
	}
	out := filepath.Join(dir, "hl7") + "/"
	reports := filepath.Join(dir, "reports.json")
	if err := generate(context.Background(), []string{"-model", model, "-beam", "1", "-o", reports, "-hl7", out, in}); err != nil {
		t.Fatal(err)
	}
	for _, s := range studies {
		b, err := os.ReadFile(filepath.Join(out, s+".hl7"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := hl7.ParseMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Field("MSH", 9) != "ORU^R01^ORU_R01" || m.Component(m.Field("ZDS", 1), 1) != s || m.Field("OBR", 25) != "P" ||
			m.Field("OBR", 3) != "ACC-"+s[len(s)-1:] || m.Field("OBX", 5) == "" {
			t.Errorf("%s: %q", s, strings.ReplaceAll(string(b), "\r", "\n"))
		}
	}
}

// TestWatchNeedsJournal: -mllp without -hl7-journal is refused before
// anything is loaded: without the journal a crash between the SR and its
// ORU^R01 would lose the message.
func TestWatchNeedsJournal(t *testing.T) {
	err := watch(context.Background(), []string{"-pacs", "http://127.0.0.1:1/dicom-web", "-model", "missing.radgen", "-mllp", "127.0.0.1:2"})
	if err == nil || !strings.Contains(err.Error(), "-hl7-journal") {
		t.Errorf("watch -mllp without -hl7-journal: %v", err)
	}
}
