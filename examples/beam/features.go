package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// FeaturesConfig configures the features pipeline.
type FeaturesConfig struct {
	Manifest string
	Model    string
	Device   string
	Out      string // the feature cache folder (TrainConfig.FeatureCache)
	Batch    int
	Shards   int // files of the index
}

// Feature is one line of the features index.
type Feature struct {
	ID    string `json:"id"`
	File  string `json:"file"`  // the cache entry, relative to the cache folder
	Model string `json:"model"` // SHA-256 of the model checkpoint
}

// buildFeatures adds the features pipeline to s: manifest → studies
// keyed by batch → grouped → the frozen extractor's patch features of each
// study, written where a frozen-extractor Trainer with
// TrainConfig.FeatureCache = out reads them (one safetensors file per
// study, data.FeatureCachePath), with a sharded index
// (out/index-*.jsonl) and the dead letters (out/deadletter-*.jsonl).
// Studies whose entry exists are not recomputed (the extractor's features
// of a study do not depend on its batch).
func buildFeatures(s beam.Scope, c FeaturesConfig) {
	studies, bad := readManifest(s, c.Manifest, c.Batch)
	batches := beam.GroupByKey(s, studies)
	index, failed := beam.ParDo2(s, &FeaturesFn{Model: c.Model, Device: c.Device, Out: c.Out}, batches)
	writeShards(s.Scope("Index"), joinPath(c.Out, "index"), c.Shards, index)
	writeShards(s.Scope("DeadLetters"), joinPath(c.Out, "deadletter"), 1, beam.Flatten(s, bad, failed))
}

// FeaturesFn extracts and writes the features of one batch of studies. Its
// fields are its whole configuration; the model comes from the process's
// cache.
type FeaturesFn struct {
	Model  string
	Device string
	Out    string
}

// ProcessElement extracts the batch's studies not yet in the cache.
func (f *FeaturesFn) ProcessElement(ctx context.Context, _ string, studies func(*Study) bool, emit, dead func(string)) error {
	touchCounters(ctx)
	m, sum, err := modelFor(ctx, f.Model, f.Device)
	if err != nil {
		return err
	}
	views := m.Config().Views
	var todo []memtrans.Study
	for _, s := range batchOf(studies) {
		if f.cached(ctx, s.ID) {
			studiesSkipped.Inc(ctx, 1)
			emit(f.indexLine(s.ID, sum))
			continue
		}
		st, err := decodeStudy(ctx, s, views)
		if err == nil && len(st.Views) != views {
			err = fmt.Errorf("%d images, the model takes %d views", len(st.Views), views)
		}
		if err == nil {
			// Bad views fail here, alone, not with their batch.
			_, err = m.Preprocess(st)
		}
		if err != nil {
			studiesFailed.Inc(ctx, 1)
			dead(deadLetter(s.ID, "", err).line())
			continue
		}
		todo = append(todo, st)
	}
	if len(todo) == 0 {
		return nil
	}
	x, err := m.Features(ctx, todo)
	if err != nil {
		return err
	}
	per := x.Len() / len(todo)
	for j, st := range todo {
		row := radgen.FromFloat32(append([]float32(nil), x.Data()[j*per:(j+1)*per]...), 1, x.Dim(1), x.Dim(2))
		if err := f.write(ctx, st.ID, row); err != nil {
			return errors.Join(fmt.Errorf("writing the features of study %q", st.ID), err)
		}
		studiesDone.Inc(ctx, 1)
		emit(f.indexLine(st.ID, sum))
	}
	return nil
}

func entryName(id string) string { return filepath.Base(data.FeatureCachePath("", id)) }

func (f *FeaturesFn) cached(ctx context.Context, id string) bool {
	if isRemote(f.Out) {
		return exists(ctx, joinPath(f.Out, entryName(id)))
	}
	_, ok := data.ReadFeatureCache(f.Out, id)
	return ok
}

func (f *FeaturesFn) indexLine(id, sum string) string {
	b, _ := json.Marshal(Feature{ID: id, File: entryName(id), Model: sum})
	return string(b)
}

// write puts one entry in the cache: directly in a local folder, else
// through a local temporary folder to the object store.
func (f *FeaturesFn) write(ctx context.Context, id string, x *radgen.Tensor) error {
	if !isRemote(f.Out) {
		return data.WriteFeatureCache(f.Out, id, x)
	}
	tmp, err := os.MkdirTemp("", "radgen-features-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := data.WriteFeatureCache(tmp, id, x); err != nil {
		return err
	}
	b, err := os.ReadFile(data.FeatureCachePath(tmp, id))
	if err != nil {
		return err
	}
	return writeAtomic(ctx, joinPath(f.Out, entryName(id)), b)
}
