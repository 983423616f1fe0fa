package memtrans

import (
	"context"
	"errors"
	"image"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans/data"
)

// countingCtx counts the cancellation checks made on it (Err calls) and is
// cancelled by the check numbered cancelAt (0: never).
type countingCtx struct {
	context.Context
	checks    atomic.Int64
	cancelAt  int64
	afterDone atomic.Int64 // checks answered with an error
	once      sync.Once
	done      chan struct{}
}

func newCountingCtx(cancelAt int64) *countingCtx {
	return &countingCtx{Context: context.Background(), cancelAt: cancelAt, done: make(chan struct{})}
}

func (c *countingCtx) Done() <-chan struct{} { return c.done }

func (c *countingCtx) Err() error {
	n := c.checks.Add(1)
	if c.cancelAt > 0 && n >= c.cancelAt {
		c.once.Do(func() { close(c.done) })
	}
	select {
	case <-c.done:
		c.afterDone.Add(1)
		return context.Canceled
	default:
		return nil
	}
}

func grayStudy(id string, views, side int) Study {
	s := Study{ID: id}
	for v := range views {
		g := image.NewGray(image.Rect(0, 0, side, side))
		for i := range g.Pix {
			g.Pix[i] = byte(i*7 + v)
		}
		s.Views = append(s.Views, g)
	}
	return s
}

// Generate checks for cancellation at every extractor stage and decoder
// step, and returns at the first check that finds the context done: the
// number of checks is at least the stages plus the steps, and wherever the
// cancellation falls, no work follows the check that sees it.
func TestGenerateCancelChecks(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal.", "no effusion."})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []ModelConfig{R2GenTiny(tok.Len() + 1), M2Tiny(tok.Len() + 1), METransTiny(tok.Len() + 1)} {
		m, err := New(cfg, tok, 1)
		if err != nil {
			t.Fatal(err)
		}
		studies := []Study{grayStudy("a", cfg.Views, 64), grayStudy("b", cfg.Views, 64)}
		const steps = 12
		full := newCountingCtx(0)
		reps, err := m.Generate(full, studies, WithMaxLength(steps), WithBeamSize(2))
		if err != nil {
			t.Fatal(err)
		}
		total := full.checks.Load()
		decoded := 0
		for _, r := range reps {
			decoded = max(decoded, len(r.Tokens))
		}
		// The ResNet's blocks plus the stem, and each decoder step.
		blocks := 0
		for _, n := range cfg.Vision.Layers {
			blocks += n
		}
		if total < int64(blocks+decoded) {
			t.Errorf("%s: %d cancellation checks for %d extractor blocks and %d steps", cfg.Architecture(), total, blocks, decoded)
		}
		for at := int64(1); at <= total; at += max(1, total/7) {
			c := newCountingCtx(at)
			_, err := m.Generate(c, studies, WithMaxLength(steps), WithBeamSize(2))
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: cancelled at check %d of %d: %v", cfg.Architecture(), at, total, err)
			}
			// The check that sees it, and at most the decoder's error
			// path asking again.
			if n := c.afterDone.Load(); n < 1 || n > 2 {
				t.Errorf("%s: cancelled at check %d: %d checks after the cancellation", cfg.Architecture(), at, n)
			}
		}
	}
}

// Callers queued behind a running batch return as soon as their context is
// done, while that batch still runs.
func TestGenerateQueuedCallersCancel(t *testing.T) {
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{"the heart is normal."})
	if err != nil {
		t.Fatal(err)
	}
	cfg := R2GenTiny(tok.Len() + 1)
	m, err := New(cfg, tok, 1, WithMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	testHookSlot = func() {
		first.Do(func() {
			close(entered)
			<-release
		})
	}
	defer func() { testHookSlot = nil }()
	studies := []Study{grayStudy("a", cfg.Views, 64)}
	holder := make(chan error, 1)
	go func() {
		_, err := m.Generate(context.Background(), studies, WithMaxLength(3))
		holder <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	const waiting = 15
	errs := make(chan error, waiting)
	for range waiting {
		go func() {
			_, err := m.Generate(ctx, studies, WithMaxLength(3))
			errs <- err
		}()
	}
	cancel()
	guard := time.After(time.Minute) // a hang guard, not a latency bound
	for range waiting {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("queued caller: %v", err)
			}
		case <-guard:
			t.Fatal("queued callers did not return while the running batch held its slot")
		}
	}
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
}
