package pacs_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
)

// TestRadgenWatchOnce runs the command-line front end of the worker,
// examples/radgen's watch, built as a user builds it: radgen watch -once
// reports on the two-view study Orthanc holds, stores its SR there, sends
// the ORU^R01 to an MLLP listener, and dead-letters a study without a
// lateral view into its file. (The test lives here because it starts
// Orthanc through internal/orthanctest, which an example may not import.)
func TestRadgenWatchOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) covers it")
	}
	server := orthanctest.Start(t)
	c := client(t, server.URL)
	ctx := context.Background()
	const good, bad = "1.2.826.0.1.3680043.8.498.901", "1.2.826.0.1.3680043.8.498.902"
	for _, f := range []orthanctest.Film{
		{Study: good, Series: good + ".1", SOP: good + ".1.1", ViewPosition: "PA"},
		{Study: good, Series: good + ".2", SOP: good + ".2.1", ViewPosition: "LL"},
		{Study: bad, Series: bad + ".1", SOP: bad + ".1.1", ViewPosition: "PA"},
	} {
		store(t, c, f.Bytes())
	}
	mllp := listenMLLP(t)
	_, model := tinyModel(t, 2)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin+string(filepath.Separator), "github.com/radgen/radgen/examples/radgen")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/radgen: %v\n%s", err, out)
	}
	dead := filepath.Join(dir, "dead.jsonl")
	cmd := exec.Command(filepath.Join(bin, "radgen"), "watch", "-pacs", server.URL, "-user", orthanctest.User, "-model", model, "-once", "-immediate", "-beam", "1",
		"-mllp", mllp.ln.Addr().String(), "-hl7-journal", filepath.Join(dir, "hl7.jsonl"), "-hl7-receiver", "RIS^GENERAL", "-dead-letter", dead, "-model-version", "test-1", "-tmp", dir)
	cmd.Env = append(os.Environ(), "RADGEN_PACS_PASSWORD="+orthanctest.Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("radgen watch: %v\n%s", err, out)
	}
	series, err := c.SearchSeries(ctx, good, dicomweb.Query{Modalities: []string{"SR"}})
	if err != nil || len(series) != 1 {
		t.Fatalf("SR series of the study: %v %d", err, len(series))
	}
	var sr []byte
	c.Retrieve(ctx, good, series[0].String(dicomweb.TagSeriesInstanceUID), "", func(p dicomweb.Part) error {
		sr, err = io.ReadAll(p.Body)
		return err
	})
	if !strings.Contains(string(sr), good+".1.1") || !strings.Contains(string(sr), good+".2.1") || !strings.Contains(string(sr), "test-1") {
		t.Errorf("the SR does not reference both views or lacks the model version")
	}
	msgs := mllp.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d HL7 messages reached the listener, want 1", len(msgs))
	}
	m, err := hl7.ParseMessage(msgs[0])
	if err != nil || m.Field("MSH", 5) != "RIS" || m.Field("MSH", 6) != "GENERAL" || m.Component(m.Field("ZDS", 1), 1) != good {
		t.Errorf("HL7 message %v %q", err, strings.ReplaceAll(string(msgs[0]), "\r", "\n"))
	}
	b, err := os.ReadFile(dead)
	if err != nil || !strings.Contains(string(b), bad) || !strings.Contains(string(b), "no usable lateral view") {
		t.Errorf("dead letters %v: %s", err, b)
	}
}
