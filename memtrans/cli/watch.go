package cli

// radgen watch: a worker that watches a PACS over DICOMweb and stores a DICOM
// SR into each new CR/DX study (memtrans/pacs), sending an HL7 v2
// ORU^R01 to the RIS over MLLP when -mllp is given. And -hl7 for radgen
// generate: the same message written to a file.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/memtrans/pacs"
)

func (c *command) watch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	pacsURL := fs.String("pacs", "", "DICOMweb root of the PACS, e.g. http://127.0.0.1:8042/dicom-web (required)")
	mf := c.newModelFlags(fs)
	user := fs.String("user", "", "basic-auth user of the PACS (password from $RADGEN_PACS_PASSWORD)")
	token := fs.Bool("token", false, "send $RADGEN_PACS_TOKEN as a bearer token")
	interval := fs.Duration("interval", 30*time.Second, "time between searches when there is nothing to do")
	since := fs.String("since", "", "only studies dated from this day (YYYY-MM-DD) or this long ago (e.g. 72h)")
	modalities := fs.String("modalities", "CR,DX", "modalities of the studies to report on")
	immediate := fs.Bool("immediate", false, "report on a study at once, without waiting for its instance count to hold between two searches")
	once := fs.Bool("once", false, "report on what the PACS holds now, then exit")
	onceTimeout := fs.Duration("once-timeout", time.Hour, "with -once, give up (exit 1) after this long with studies or HL7 messages left")
	deadLetter := fs.String("dead-letter", "", "JSON Lines file of the studies given up on (skipped at the next start)")
	mllp := fs.String("mllp", "", "host:port of an HL7 v2 receiver (MLLP): each report is sent there as an ORU^R01")
	journal := fs.String("hl7-journal", "", "file of the ORU^R01 messages not yet acknowledged, kept across a crash (required with -mllp; it holds reports: mode 0600)")
	hl7App := fs.String("hl7-receiver", "", "receiving application^facility in MSH-5/6")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics")
	beam := fs.Int("beam", 3, "beam size (1 = greedy)")
	device := fs.String("device", "cpu", "where to decode: cpu, cuda:N (a build with -tags cuda) or reference")
	jsonLogs := fs.Bool("json-logs", false, "log JSON lines instead of text")
	tmp := fs.String("tmp", "", "folder for each study's files while it is reported (default the system's)")
	modelName := fs.String("model-name", "", "the model's name in SR and HL7 (default: radgen and the architecture)")
	modelVers := fs.String("model-version", "", "the model's version in SR and HL7")
	lim := limitFlags(fs)
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (watch takes flags only)", rest[0])
	}
	if err := lim.check(); err != nil {
		return err
	}
	if *pacsURL == "" || *mf.path == "" {
		return errors.New("-pacs and -model are required")
	}
	if *mllp != "" && *journal == "" {
		return errors.New("-mllp needs -hl7-journal FILE, where the messages not yet acknowledged are kept across a crash")
	}
	var logger *slog.Logger
	if *jsonLogs {
		logger = slog.New(slog.NewJSONHandler(c.stderr, nil))
	} else {
		logger = slog.New(slog.NewTextHandler(c.stderr, nil))
	}
	copts := []dicomweb.Option{dicomweb.WithLogger(logger)}
	switch {
	case *token && *user != "":
		return errors.New("give -user or -token, not both")
	case *token:
		copts = append(copts, dicomweb.WithBearerToken(os.Getenv("RADGEN_PACS_TOKEN")))
	case *user != "":
		copts = append(copts, dicomweb.WithBasicAuth(*user, os.Getenv("RADGEN_PACS_PASSWORD")))
	}
	client, err := dicomweb.New(*pacsURL, copts...)
	if err != nil {
		return err
	}
	dev, err := parseDevice(*device)
	if err != nil {
		return err
	}
	model, err := mf.load(lim, "", memtrans.WithDevice(dev))
	if err != nil {
		return err
	}
	defer model.Close()
	sum, err := fileSHA256(*mf.path)
	if err != nil {
		return err
	}
	name := *modelName
	if name == "" {
		name = "radgen " + string(model.Config().Architecture())
	}
	cfg := pacs.Config{
		PACS: client, Model: model, ModelInfo: dicomsr.Model{Name: name, Version: *modelVers, Checksum: sum},
		Interval: *interval, Immediate: *immediate, DeadLetterFile: *deadLetter, Decode: lim.imageOptions(),
		TempDir: *tmp, Logger: logger, OnceTimeout: *onceTimeout, JournalFile: *journal,
	}
	for _, m := range strings.Split(*modalities, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Modalities = append(cfg.Modalities, strings.ToUpper(m))
		}
	}
	if cfg.Since, err = parseSince(*since, time.Now()); err != nil {
		return err
	}
	cfg.Generate = []memtrans.GenerateOption{memtrans.WithBeamSize(*beam)}
	if *beam == 1 {
		cfg.Generate = []memtrans.GenerateOption{memtrans.WithGreedy(false)}
	}
	if *mllp != "" {
		cfg.MLLP = &hl7.Sender{Addr: *mllp}
		if *hl7App != "" {
			app, fac, _ := strings.Cut(*hl7App, "^")
			cfg.HL7 = append(cfg.HL7, hl7.WithReceiver(app, fac))
		}
	}
	w, err := pacs.New(cfg)
	if err != nil {
		return err
	}
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", w.MetricsHandler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	// SIGTERM (a service manager's stop) as well as SIGINT stops the
	// worker between studies: the study in hand is finished (for up to
	// 30 s, pacs.Config.Drain), and nothing partial is ever stored.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Info("watching", "pacs", client.URL(), "model", name, "views", model.Config().Views, "modalities", cfg.Modalities, "radgen", radgen.Version)
	if *once {
		err = w.RunOnce(ctx)
	} else {
		err = w.Run(ctx)
	}
	st := w.Stats()
	logger.Info("stopped", "reported", st.Reported, "already_reported", st.AlreadyReported, "dead_letters", st.DeadLetters, "outages", st.Outages)
	if errors.Is(err, context.Canceled) {
		return nil // a requested stop
	}
	return err
}

// parseSince reads -since: a date (YYYY-MM-DD or YYYYMMDD) or a duration
// before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02", "20060102"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("-since %q: a date (2024-01-31) or a duration (72h)", s)
	}
	return now.Add(-d), nil
}

// writeHL7 writes the ORU^R01 of one study's report for radgen generate's
// -hl7 (a file for one study, or a folder of <StudyInstanceUID>.hl7).
func writeHL7(dest string, s memtrans.Study, rep memtrans.Report, m dicomsr.Model, t time.Time, n int) error {
	msg, err := hl7.NewORU(rep, s.DICOM, hl7.Model{Name: m.Name, Version: m.Version, Checksum: m.Checksum, Manufacturer: m.Manufacturer,
		DeviceUID: dicomsr.DeviceUID(m)}, t)
	if err != nil {
		return fmt.Errorf("study %s: %w", s.ID, err)
	}
	return writeOutput(dest, s.ID, ".hl7", n, msg)
}
