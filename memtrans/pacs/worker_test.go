package pacs_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/memtrans/pacs"
)

// TestWorker runs a worker with a two-view model against Orthanc holding
// two two-view studies (DX and CR), two hostile studies (a PA whose
// Rows and Columns claim 65535×65535 pixels, with 8 bytes of them; a PA
// whose JPEG frame header claims 65535×65535 against its 64×64; a 64×64
// PA with 8 bytes of pixel data) and a study with no frontal view: each good study gets one SR series in its study, which passes
// dciodvfy and references both views, and one HL7 message; the other two
// are dead-lettered with their errors (naming the instance, not a
// temporary path). A second worker finds the SRs in
// the PACS and the dead letters in their file, and does nothing again.
func TestWorker(t *testing.T) {
	pacsSrv := orthanctest.Start(t)
	c := client(t, pacsSrv.URL)
	model, _ := tinyModel(t, 2)
	good := []string{uid(201), uid(202)}
	hostile, lateralOnly, lyingJPEG, short := uid(203), uid(204), uid(206), uid(207)
	store(t, c, twoView(good[0], "DX")...)
	store(t, c, twoView(good[1], "CR")...)
	store(t, c,
		orthanctest.Film{Study: hostile, Series: hostile + ".1", SOP: hostile + ".1.1", ViewPosition: "PA", Rows: 65535, Columns: 65535, PixelBytes: 8}.Bytes(),
		twoView(hostile, "DX")[1],
		twoView(lateralOnly, "DX")[1],
		orthanctest.Film{Study: lyingJPEG, Series: lyingJPEG + ".1", SOP: lyingJPEG + ".1.1", ViewPosition: "PA", LyingJPEG: true}.Bytes(),
		twoView(lyingJPEG, "DX")[1],
		orthanctest.Film{Study: short, Series: short + ".1", SOP: short + ".1.1", ViewPosition: "PA", PixelBytes: 8}.Bytes(),
		twoView(short, "DX")[1])
	// A study of another modality is not looked at.
	store(t, c, orthanctest.Film{Study: uid(205), Series: uid(205) + ".1", SOP: uid(205) + ".1.1", ViewPosition: "PA", Modality: "CT"}.Bytes())

	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	ris := listenMLLP(t)
	w := newWorker(t, pacs.Config{PACS: c, Model: model, DeadLetterFile: dead, MLLP: &hl7.Sender{Addr: ris.ln.Addr().String(), Timeout: 10 * time.Second}})
	if err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("stats %+v", st)
	if st.Reported != 2 || st.AlreadyReported != 0 || st.DeadLetters != 4 || st.Polls < 2 {
		t.Errorf("stats %+v: want 2 reported, 4 dead letters, at least 2 searches (the studies settle first)", st)
	}
	for _, s := range good {
		series, files := srSeries(t, c, s)
		if len(series) != 1 || len(files) != 1 {
			t.Fatalf("study %s: %d SR series, %d SR instances", s, len(series), len(files))
		}
		checkSR(t, s, files[0], []string{s + ".1.1", s + ".2.1", s + ".1", s + ".2"})
	}
	for _, s := range []string{hostile, lateralOnly, lyingJPEG, short} {
		if series, _ := srSeries(t, c, s); len(series) != 0 {
			t.Errorf("dead-lettered study %s has SR series %v", s, series)
		}
	}
	dl := w.DeadLetters()
	if len(dl) != 4 || dl[0].Study != hostile || dl[1].Study != lateralOnly || dl[2].Study != lyingJPEG || dl[3].Study != short {
		t.Fatalf("dead letters %+v", dl)
	}
	if !strings.Contains(dl[0].Error, "pixels") || !strings.Contains(dl[1].Error, "no usable frontal view") || !strings.Contains(dl[0].Error, hostile+".1_") {
		t.Errorf("dead-letter errors:\n%s\n%s", dl[0].Error, dl[1].Error)
	}
	for _, d := range dl {
		t.Logf("dead letter %s: %s", d.Study, d.Error)
		if strings.Contains(d.Error, os.TempDir()) {
			t.Errorf("dead letter of %s names a temporary path: %s", d.Study, d.Error)
		}
	}
	msgs := ris.messages()
	if len(msgs) != 2 {
		t.Fatalf("the RIS got %d HL7 messages, want 2", len(msgs))
	}
	for _, b := range msgs {
		m, err := hl7.ParseMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		study := m.Component(m.Field("ZDS", 1), 1)
		if !slices.Contains(good, study) || m.Field("OBR", 25) != "P" || m.Field("OBR", 3) != "ACC-"+study[len(study)-6:] {
			t.Errorf("HL7 message %q", strings.ReplaceAll(string(b), "\r", "\n"))
		}
	}

	// A second worker (a restart): nothing is reported again.
	w2 := newWorker(t, pacs.Config{PACS: c, Model: model, DeadLetterFile: dead, Immediate: true})
	if err := w2.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w2.Stats(); st.Reported != 0 || st.AlreadyReported != 2 || st.DeadLetters != 4 {
		t.Errorf("restart: stats %+v, want 2 found reported and 4 dead letters from the file", st)
	}
	for _, s := range good {
		if series, _ := srSeries(t, c, s); len(series) != 1 {
			t.Errorf("study %s: %d SR series after the restart", s, len(series))
		}
	}
	var metrics strings.Builder
	w.WriteMetrics(&metrics)
	for _, want := range []string{`radgen_pacs_studies_total{outcome="reported"} 2`, `radgen_pacs_studies_total{outcome="dead_letter"} 4`, "radgen_pacs_study_seconds_count 2"} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics.String())
		}
	}
}

// TestWorkerOutage: with Orthanc stopped the worker keeps retrying; once
// Orthanc is back it reports on every study. Then a worker stopped in the
// middle of a study finishes it and stops before the next.
func TestWorkerOutage(t *testing.T) {
	pacsSrv := orthanctest.Start(t)
	c := client(t, pacsSrv.URL)
	model, _ := tinyModel(t, 1)
	studies := []string{uid(301), uid(302)}
	for _, s := range studies {
		store(t, c, twoView(s, "DX")...)
	}
	pacsSrv.Stop()
	w := newWorker(t, pacs.Config{PACS: c, Model: model, Immediate: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.RunOnce(ctx) }()
	for w.Stats().Outages < 3 {
		select {
		case err := <-done:
			t.Fatalf("the worker returned with the PACS down: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	pacsSrv.Restart()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("stats %+v", st)
	if st.Reported != 2 || st.DeadLetters != 0 || st.Outages < 3 {
		t.Errorf("stats %+v", st)
	}
	for _, s := range studies {
		series, files := srSeries(t, c, s)
		if len(series) != 1 {
			t.Fatalf("study %s: %d SR series", s, len(series))
		}
		checkSR(t, s, files[0], []string{s + ".1.1"})
	}

	// A stop (the context cancelled) while a study is in hand — its HL7
	// message sent, its SR not yet stored — lets the study finish, and Run
	// returns the context's error before the next study.
	store(t, c, twoView(uid(303), "DX")...)
	store(t, c, twoView(uid(304), "DX")...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received, release := make(chan struct{}), make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		msg, err := hl7.ReadFrame(bufio.NewReader(conn), 1<<20)
		if err != nil {
			return
		}
		close(received)
		<-release
		ack, _ := hl7.NewACK(msg, "AA", "", time.Now())
		hl7.WriteFrame(conn, ack)
	}()
	w = newWorker(t, pacs.Config{PACS: c, Model: model, Immediate: true, Interval: time.Hour, MLLP: &hl7.Sender{Addr: ln.Addr().String()}})
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- w.Run(ctx) }()
	<-received // the worker is inside the first new study
	cancel()
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if st := w.Stats(); st.Reported != 1 || st.AlreadyReported != 2 || st.DeadLetters != 0 {
		t.Errorf("stats %+v: want the study in hand finished and the next one left", st)
	}
	got := 0
	for _, s := range []string{uid(303), uid(304)} {
		series, _ := srSeries(t, c, s)
		got += len(series)
	}
	if got != 1 {
		t.Errorf("%d of the two new studies have an SR, want 1 (the one in hand at the stop)", got)
	}
}

// TestConfig: a worker without its required parts is refused, and so is
// one with an MLLP receiver and no journal; a dead-letter file with lines
// that are not dead letters (not JSON, a line of 2 MB, a study that is no
// UID) is read all the same, those lines logged and skipped.
func TestConfig(t *testing.T) {
	if _, err := pacs.New(pacs.Config{}); !errors.Is(err, pacs.ErrConfig) {
		t.Errorf("empty config: %v", err)
	}
	model, _ := tinyModel(t, 1)
	c := client(t, "http://127.0.0.1:1")
	info := dicomsr.Model{Name: "m"}
	if _, err := pacs.New(pacs.Config{PACS: c, Model: model, ModelInfo: info, MLLP: &hl7.Sender{Addr: "127.0.0.1:1"}}); !errors.Is(err, pacs.ErrConfig) {
		t.Errorf("MLLP without a journal: %v", err)
	}
	if _, err := pacs.New(pacs.Config{PACS: c, Model: model, ModelInfo: info, Modalities: []string{"CR,DX"}}); !errors.Is(err, pacs.ErrConfig) {
		t.Errorf("a modality holding a comma: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "dead.jsonl")
	os.WriteFile(bad, []byte("not json\n"+`{"study":"`+strings.Repeat("1", 2<<20)+`","error":"x"}`+"\n"+
		`{"study":"../../etc","error":"x"}`+"\n"+`{"study":"1.2.3","error":"kept"}`+"\n"), 0o644)
	var logs strings.Builder
	w, err := pacs.New(pacs.Config{PACS: c, Model: model, ModelInfo: info, DeadLetterFile: bad,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if dl := w.DeadLetters(); len(dl) != 1 || dl[0].Study != "1.2.3" || dl[0].Error != "kept" {
		t.Errorf("dead letters %+v", dl)
	}
	if n := strings.Count(logs.String(), "dead-letter line skipped"); n != 3 {
		t.Errorf("%d lines logged as skipped, want 3:\n%s", n, logs.String())
	}
}
