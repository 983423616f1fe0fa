package main

import (
	"bytes"
	"context"
	"hash/fnv"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// writeShards writes the lines of col (strings) to n files
// prefix-SSSSS-of-NNNNN.jsonl, each sorted and written whole (atomically),
// a line's shard chosen by its hash. Every shard is written, empty ones
// included, so a rerun leaves no shard of an earlier run behind.
func writeShards(s beam.Scope, prefix string, n int, col beam.PCollection) {
	s = s.Scope("WriteShards")
	keyed := beam.ParDo(s, &KeyShardFn{Shards: n}, col)
	empty := beam.ParDo(s, &EmptyShardsFn{Shards: n}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, beam.Flatten(s, keyed, empty))
	beam.ParDo0(s, &WriteShardFn{Prefix: prefix, Shards: n}, grouped)
}

// KeyShardFn keys each line by its shard.
type KeyShardFn struct {
	Shards int
}

// ProcessElement returns the shard of line and the line.
func (f *KeyShardFn) ProcessElement(line string) (int, string) {
	h := fnv.New64a()
	h.Write([]byte(line))
	return int(h.Sum64() % uint64(max(1, f.Shards))), line
}

// EmptyShardsFn emits an empty line for every shard, so that each shard is
// written even when no line falls in it.
type EmptyShardsFn struct {
	Shards int
}

// ProcessElement emits (i, "") for every shard i.
func (f *EmptyShardsFn) ProcessElement(_ []byte, emit func(int, string)) {
	for i := range max(1, f.Shards) {
		emit(i, "")
	}
}

// WriteShardFn writes one shard: its lines sorted, empty ones dropped.
type WriteShardFn struct {
	Prefix string
	Shards int
}

// ProcessElement writes shard i.
func (f *WriteShardFn) ProcessElement(ctx context.Context, i int, lines func(*string) bool) error {
	var all []string
	var l string
	for lines(&l) {
		if l != "" {
			all = append(all, l)
		}
	}
	slices.Sort(all)
	var b bytes.Buffer
	for _, l := range all {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return writeAtomic(ctx, shardName(f.Prefix, i, max(1, f.Shards), ".jsonl"), b.Bytes())
}
