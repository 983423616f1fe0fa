package cli

// The report service: radgen serve, and ServerMain for a program that is
// the service alone (examples/server). It runs the memtrans/serve handler
// over a model, on one port, with structured logs and a graceful shutdown
// that cuts the uploads still arriving and lets the generations in flight
// finish.
//
// Without -model it loads the quickstart's tiny model from its cache
// directory, and trains it first on synthetic films when it is not there
// (a few minutes on a laptop), so it runs on a fresh machine. A PACS or a
// router may push studies to http://ADDR/dicomweb/studies by STOW-RS; with
// -pacs the SR of each is stored into the study there.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/serve"
	"github.com/radgen/radgen/memtrans/synth"
)

// serverConfig holds the service's flags.
type serverConfig struct {
	model       string
	addr        string
	token       string
	cache       string
	epochs      int
	queue       int
	concurrency int
	maxBatch    int
	batchWait   time.Duration
	noBatching  bool
	timeout     time.Duration
	maxUpload   int64
	maxPixels   int64
	shutdown    time.Duration
	jsonLogs    bool
	memory      int64
	upload      time.Duration
	pacs        string // DICOMweb root where the SRs of pushed studies are stored
	pacsUser    string // basic auth, password from $RADGEN_PACS_PASSWORD
	pacsToken   bool   // bearer token from $RADGEN_PACS_TOKEN
}

// ServerMain runs radgen's report service alone, as the program's whole
// command: args are its flags (os.Args[1:]; radgen serve takes the same),
// stdout is unused, and the service logs to stderr. It serves until ctx is
// done or the process receives SIGINT or SIGTERM, then shuts down
// gracefully: the uploads still arriving are cut, the generations in
// flight finish. It returns the exit status: 0 after a requested stop (or
// -h), 1 when the service failed (logged), 2 for bad flags. It never exits
// the process.
//
// The model may be of any architecture registered in the program (see
// the package documentation).
func ServerMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand(stdout, stderr)
	sc, log, err := c.serverFlags("server", args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if err := serveUntilStopped(ctx, sc, log); err != nil {
		log.Error("server stopped", "err", explain(err))
		return 1
	}
	return 0
}

// serve is radgen serve: ServerMain's service, its errors returned.
func (c *command) serve(ctx context.Context, args []string) error {
	sc, log, err := c.serverFlags("serve", args)
	if err != nil {
		return err
	}
	return serveUntilStopped(ctx, sc, log)
}

// serverFlags parses the service's flags; a bad flag is reported on the
// command's stderr, with the usage.
func (c *command) serverFlags(name string, args []string) (serverConfig, *slog.Logger, error) {
	var sc serverConfig
	cache, _ := os.UserCacheDir()
	if cache == "" {
		cache = os.TempDir()
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&sc.model, "model", "", "model checkpoint (native .radgen); empty: the quickstart's tiny model, trained on first use")
	fs.StringVar(&sc.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&sc.token, "token", os.Getenv("RADGEN_TOKEN"), "bearer token required on /v1 and /metrics (default $RADGEN_TOKEN; empty: none)")
	fs.StringVar(&sc.cache, "cache", filepath.Join(cache, "radgen", "server"), "where the quickstart model and its synthetic films are kept")
	fs.IntVar(&sc.epochs, "epochs", synth.Defaults.Epochs, "training epochs of the quickstart model (when it is trained)")
	fs.IntVar(&sc.queue, "queue", serve.DefaultQueue, "report requests admitted at once; more get 429")
	fs.IntVar(&sc.concurrency, "concurrency", 1, "Generate calls at once")
	fs.IntVar(&sc.maxBatch, "batch", serve.DefaultMaxBatch, "most studies decoded in one batch")
	fs.DurationVar(&sc.batchWait, "batch-wait", serve.DefaultBatchWait, "longest wait for a batch to fill")
	fs.BoolVar(&sc.noBatching, "no-batching", false, "one Generate call per request")
	fs.DurationVar(&sc.timeout, "timeout", serve.DefaultTimeout, "per-request limit, queueing included")
	fs.Int64Var(&sc.maxUpload, "max-upload", serve.DefaultMaxUploadBytes, "largest request body in bytes")
	fs.Int64Var(&sc.maxPixels, "max-pixels", serve.DefaultMaxPixels, "largest view in pixels")
	fs.DurationVar(&sc.shutdown, "shutdown-grace", 0, "how long a shutdown waits for the generations in flight (default: -timeout + 5s); uploads still arriving are cut at once")
	fs.Int64Var(&sc.memory, "memory-budget", 0, "bytes report requests may hold at once (default: half the machine's memory less the model)")
	fs.DurationVar(&sc.upload, "upload-timeout", serve.DefaultUploadTimeout, "longest time an upload's body may take to arrive")
	fs.StringVar(&sc.pacs, "pacs", "", "DICOMweb root of a PACS (e.g. http://127.0.0.1:8042/dicom-web): the SR of each study pushed by STOW-RS is stored there")
	fs.StringVar(&sc.pacsUser, "pacs-user", "", "basic-auth user of the PACS (password from $RADGEN_PACS_PASSWORD)")
	fs.BoolVar(&sc.pacsToken, "pacs-token", false, "send $RADGEN_PACS_TOKEN to the PACS as a bearer token")
	fs.BoolVar(&sc.jsonLogs, "json-logs", false, "log JSON lines instead of text")
	rest, err := c.parseArgs(fs, args)
	if err != nil {
		return sc, nil, err
	}
	if len(rest) > 0 {
		err := fmt.Errorf("unexpected argument %q (%s takes flags only)", rest[0], name)
		fmt.Fprintln(c.stderr, err)
		return sc, nil, err
	}
	var h slog.Handler = slog.NewTextHandler(c.stderr, nil)
	if sc.jsonLogs {
		h = slog.NewJSONHandler(c.stderr, nil)
	}
	return sc, slog.New(h), nil
}

// serveUntilStopped runs the service until ctx is done or a SIGINT or
// SIGTERM arrives.
func serveUntilStopped(ctx context.Context, sc serverConfig, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runServer(ctx, sc, log, nil)
}

// runServer serves until ctx is done, then shuts down gracefully. When
// ready is not nil it receives the listening address once the model is
// warm.
func runServer(ctx context.Context, c serverConfig, log *slog.Logger, ready chan<- string) error {
	pacs, err := pacsClient(c, log) // before a model is trained for nothing
	if err != nil {
		return err
	}
	model, name, err := loadServerModel(ctx, c, log)
	if err != nil {
		return err
	}
	defer model.Close()

	opts := []serve.Option{serve.WithLogger(log), serve.WithModelName(name), serve.WithQueue(c.queue),
		serve.WithConcurrency(c.concurrency), serve.WithTimeout(c.timeout), serve.WithMaxUploadBytes(c.maxUpload),
		serve.WithMaxPixels(c.maxPixels), serve.WithBatching(c.maxBatch, c.batchWait)}
	if c.memory > 0 {
		opts = append(opts, serve.WithMemoryBudget(c.memory))
	}
	if c.upload > 0 {
		opts = append(opts, serve.WithUploadTimeout(c.upload))
	}
	if c.noBatching {
		opts = append(opts, serve.WithoutBatching())
	}
	if c.token != "" {
		opts = append(opts, serve.WithBearerToken(c.token))
	}
	if pacs != nil {
		opts = append(opts, serve.WithPACS(pacs))
	}
	h, err := serve.New(model, opts...)
	if err != nil {
		return err
	}
	defer h.Close()
	// The Go runtime collects harder as the heap nears the budget plus the
	// model, rather than growing past it (the limit is soft: it never
	// fails an allocation).
	if prev := debug.SetMemoryLimit(-1); prev == math.MaxInt64 {
		debug.SetMemoryLimit(h.Info().MemoryBudget + modelBytes(model) + 256<<20)
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// The handler gives each upload its own read deadline
		// (-upload-timeout); this bounds the other routes' bodies.
		ReadTimeout:    c.upload + 10*time.Second,
		WriteTimeout:   c.timeout + time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown cuts the uploads still arriving at once, then waits for the
	// generations in flight.
	srv.RegisterOnShutdown(h.Drain)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "model", name, "checksum", h.Info().Checksum, "radgen", radgen.Version)

	// Ready once warm: /readyz answers 503 until then, /healthz 200.
	if err := h.WarmUp(ctx); err != nil {
		srv.Close()
		return err
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	grace := c.shutdown
	if grace <= 0 {
		grace = c.timeout + 5*time.Second
	}
	log.Info("shutting down: uploads still arriving are cut, generations in flight finish", "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// pacsClient is the DICOMweb client of -pacs, with its credentials; nil
// without -pacs.
func pacsClient(c serverConfig, log *slog.Logger) (*dicomweb.Client, error) {
	opts := []dicomweb.Option{dicomweb.WithLogger(log)}
	switch {
	case c.pacs == "" && (c.pacsUser != "" || c.pacsToken):
		return nil, errors.New("-pacs-user and -pacs-token need -pacs")
	case c.pacs == "":
		return nil, nil
	case c.pacsToken && c.pacsUser != "":
		return nil, errors.New("give -pacs-user or -pacs-token, not both")
	case c.pacsToken:
		opts = append(opts, dicomweb.WithBearerToken(os.Getenv("RADGEN_PACS_TOKEN")))
	case c.pacsUser != "":
		opts = append(opts, dicomweb.WithBasicAuth(c.pacsUser, os.Getenv("RADGEN_PACS_PASSWORD")))
	}
	client, err := dicomweb.New(c.pacs, opts...)
	if err != nil {
		return nil, fmt.Errorf("-pacs: %w", err)
	}
	return client, nil
}

// loadServerModel loads -model, or the cached quickstart model, training it on
// synthetic films first when the cache has none.
func loadServerModel(ctx context.Context, c serverConfig, log *slog.Logger) (*memtrans.Model, string, error) {
	mopts := memtrans.WithModelOptions(memtrans.WithLogger(log))
	if c.model != "" {
		start := time.Now()
		m, err := memtrans.LoadFile(c.model, mopts)
		if err != nil {
			return nil, "", err
		}
		log.Info("model loaded", "path", c.model, "architecture", m.Config().Architecture(), "took", time.Since(start).Round(time.Millisecond))
		return m, filepath.Base(c.model), nil
	}
	o := synth.Defaults
	o.Epochs = c.epochs
	o.Dir = filepath.Join(c.cache, "films")
	path := filepath.Join(c.cache, fmt.Sprintf("quickstart-seed%d-epochs%d.radgen", o.Seed, o.Epochs))
	name := "quickstart tiny R2Gen"
	// A cached model written before checkpoints recorded their data is the
	// same synthetic-film model: say so.
	sopts := memtrans.WithModelOptions(memtrans.WithLogger(log), memtrans.WithProvenance(synth.Provenance))
	if m, err := memtrans.LoadFile(path, sopts); err == nil {
		log.Info("quickstart model loaded", "path", path)
		logSample(o.Dir, log)
		return m, name, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Warn("cached quickstart model unreadable; training it again", "path", path, "err", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, "", err
	}
	log.Info("no model given: training the quickstart's tiny model on synthetic films", "epochs", o.Epochs, "studies", o.Train, "dir", o.Dir)
	last := time.Now()
	o.Progress = func(p memtrans.Progress) {
		if p.Batch == p.Batches-1 || time.Since(last) > 10*time.Second {
			last = time.Now()
			log.Info("training", "epoch", p.Epoch+1, "of", p.Epochs, "batch", p.Batch+1, "batches", p.Batches, "loss", fmt.Sprintf("%.3f", p.Loss))
		}
	}
	res, err := synth.Run(ctx, o)
	if err != nil {
		return nil, "", err
	}
	log.Info("trained", "took", res.TrainTime.Round(time.Second), "BLEU-4", fmt.Sprintf("%.3f", res.Scores.BLEU[3]), "CIDEr-D", fmt.Sprintf("%.3f", res.Scores.CIDErD))
	if err := res.Model.SaveFile(path); err != nil {
		log.Warn("could not cache the model", "path", path, "err", err)
	} else {
		log.Info("model cached", "path", path)
	}
	logSample(o.Dir, log)
	return res.Model, name, nil
}

// modelBytes counts the bytes of a model's weights.
func modelBytes(m *memtrans.Model) int64 {
	var n int64
	m.VisitParams(func(_ string, t *radgen.Tensor) { n += 4 * int64(len(t.Data())) })
	return n
}

// logSample names a held-out synthetic study to try the page with.
func logSample(dir string, log *slog.Logger) {
	ann, err := data.LoadAnnotation(filepath.Join(dir, "annotation.json"))
	if err != nil {
		return
	}
	test, err := ann.Split("test")
	if err != nil || len(test) == 0 {
		return
	}
	s := test[0]
	var files []string
	for _, p := range s.ImagePath {
		files = append(files, filepath.Join(dir, "images", p))
	}
	log.Info("a held-out synthetic study to try", "files", files, "reference", s.Report)
}
