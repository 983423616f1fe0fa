package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
)

// maxModelBytes bounds a model file read from a path or URL.
var maxModelBytes = memtrans.DefaultBudget().MaxCheckpointBytes

// loadedModel is a model loaded once per worker process.
type loadedModel struct {
	once  sync.Once
	model *memtrans.Model
	sum   string // hex SHA-256 of the checkpoint's bytes
	err   error
}

// models holds the process's models by source. They are never closed: a
// worker process keeps its model for its lifetime, across bundles, stages
// and DoFn instances (a loaded Model is safe for concurrent use).
var models sync.Map // string → *loadedModel

// modelFor loads the model at src (a local path, gs:// or s3:// object, or
// http(s) URL) on first use in this process and returns it with its
// checksum. Loading happens lazily in the first bundle that needs it, not in
// a DoFn's Setup, so that a runner does not see a slow Setup.
//
// device is where it decodes: "" or "cpu", "cuda:N" (a binary built with
// -tags cuda) or "reference".
func modelFor(ctx context.Context, src, device string) (*memtrans.Model, string, error) {
	v, _ := models.LoadOrStore(src+"\x00"+device, &loadedModel{})
	lm := v.(*loadedModel)
	lm.once.Do(func() {
		b, err := readAll(ctx, src, maxModelBytes)
		if err != nil {
			lm.err = fmt.Errorf("model: %w", err)
			return
		}
		dev, err := parseDevice(device)
		if err != nil {
			lm.err = err
			return
		}
		sum := sha256.Sum256(b)
		lm.sum = hex.EncodeToString(sum[:])
		if lm.model, err = memtrans.Load(bytes.NewReader(b), memtrans.WithModelOptions(memtrans.WithDevice(dev))); err != nil {
			lm.err = fmt.Errorf("model %s: %w", src, err)
		}
	})
	return lm.model, lm.sum, lm.err
}

// parseDevice reads -device: cpu (or empty), reference or cuda:N.
func parseDevice(s string) (radgen.Device, error) {
	if s == "" {
		return radgen.CPU, nil
	}
	d, err := radgen.ParseDevice(s)
	if err != nil {
		return radgen.CPU, fmt.Errorf("-device: %w", err)
	}
	return d, nil
}
