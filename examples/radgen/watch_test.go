package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
)

// TestWatchOnce: cli watch -once reports on the two-view study Orthanc
// holds, stores its SR there, sends the ORU^R01 to an MLLP listener, and
// dead-letters a study without a lateral view into its file.
func TestWatchOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full run (go test ./...) covers it")
	}
	pacs := orthanctest.Start(t)
	c, err := dicomweb.New(pacs.URL, dicomweb.WithBasicAuth(orthanctest.User, orthanctest.Password))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const good, bad = "1.2.826.0.1.3680043.8.498.901", "1.2.826.0.1.3680043.8.498.902"
	for _, f := range []orthanctest.Film{
		{Study: good, Series: good + ".1", SOP: good + ".1.1", ViewPosition: "PA"},
		{Study: good, Series: good + ".2", SOP: good + ".2.1", ViewPosition: "LL"},
		{Study: bad, Series: bad + ".1", SOP: bad + ".1.1", ViewPosition: "PA"},
	} {
		if _, err := c.Store(ctx, "", f.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 4)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			msg, err := hl7.ReadFrame(bufio.NewReader(conn), 1<<20)
			if err == nil {
				got <- msg
				ack, _ := hl7.NewACK(msg, "AA", "", time.Now())
				hl7.WriteFrame(conn, ack)
			}
			conn.Close()
		}
	}()
	dir := t.TempDir()
	model := tinyModel(t, dir)
	dead := filepath.Join(dir, "dead.jsonl")
	t.Setenv("RADGEN_PACS_PASSWORD", orthanctest.Password)
	err = watch(ctx, []string{"-pacs", pacs.URL, "-user", orthanctest.User, "-model", model, "-once", "-immediate", "-beam", "1",
		"-mllp", ln.Addr().String(), "-hl7-receiver", "RIS^GENERAL", "-dead-letter", dead, "-model-version", "test-1", "-tmp", dir})
	if err != nil {
		t.Fatal(err)
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
	select {
	case msg := <-got:
		m, err := hl7.ParseMessage(msg)
		if err != nil || m.Field("MSH", 5) != "RIS" || m.Field("MSH", 6) != "GENERAL" || m.Component(m.Field("ZDS", 1), 1) != good {
			t.Errorf("HL7 message %v %q", err, strings.ReplaceAll(string(msg), "\r", "\n"))
		}
	default:
		t.Error("no HL7 message reached the listener")
	}
	b, err := os.ReadFile(dead)
	if err != nil || !strings.Contains(string(b), bad) || !strings.Contains(string(b), "no usable lateral view") {
		t.Errorf("dead letters %v: %s", err, b)
	}
}

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

// TestGenerateHL7: cli generate -hl7 writes one ORU^R01 per study of a
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
