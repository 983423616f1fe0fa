package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
)

// readAnnotationWhole is the reference: the whole input unmarshalled at
// once, then each study parsed (what ReadAnnotation did before it
// streamed).
func readAnnotationWhole(b []byte) (*Annotation, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	splits := map[string][]Study{}
	for k, v := range top {
		var entries []json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			return nil, err
		}
		studies := make([]Study, len(entries))
		for i, e := range entries {
			if err := parseStudy(&studies[i], e); err != nil {
				return nil, err
			}
		}
		if entries == nil {
			studies = nil
		}
		splits[k] = studies
	}
	return NewAnnotation(splits), nil
}

func sameAnnotation(a, b *Annotation) bool {
	an, bn := a.SplitNames(), b.SplitNames()
	slices.Sort(an)
	slices.Sort(bn)
	if !slices.Equal(an, bn) {
		return false
	}
	for _, k := range a.SplitNames() {
		x, _ := a.Split(k)
		y, _ := b.Split(k)
		if len(x) != len(y) || len(x) > 0 && !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// writeAnnotation writes n studies with reports of about 400 bytes.
func writeAnnotation(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"train": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"id": "S%d", "report": "%s", "image_path": ["S%d/0.png", "S%d/1.png"], "split": "train"}`,
			i, strings.Repeat("The heart is normal in size. ", 14), i, i)
	}
	b.WriteString(`], "test": []}`)
	return b.Bytes()
}

// Inputs over the limit are refused after reading the limit, not the
// input; the same input under a larger limit parses.
func TestReadAnnotationLimit(t *testing.T) {
	b := writeAnnotation(100)
	if _, err := ReadAnnotationLimit(bytes.NewReader(b), int64(len(b))-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
	a, err := ReadAnnotationLimit(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if tr, _ := a.Split("train"); len(tr) != 100 {
		t.Errorf("%d studies", len(tr))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "annotation.json")
	os.WriteFile(path, b, 0o644)
	if _, err := OpenAnnotation(path, WithMaxFileBytes(1000)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("file over the limit: %v", err)
	}
	if _, err := OpenAnnotation(path); err != nil {
		t.Error(err)
	}
}

// A FIFO is refused at once instead of blocking; /dev/zero is refused, and
// when allowed it stops at the limit.
func TestOpenAnnotationNonRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ann.json")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFOs:", err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		if _, err := OpenAnnotation(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := OpenAnnotation("/dev/zero", WithNonRegularFiles(), WithMaxFileBytes(1<<20)); err == nil {
			t.Error("/dev/zero parsed")
		}
	}
}

// peakHeap runs f while sampling the heap and returns the largest growth
// seen over the heap before f. The collector runs at GOGC=10 meanwhile, so
// that the sampled heap is the live heap within about 10% rather than
// whatever garbage the default pacing lets pile up (up to another live
// heap's worth).
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// Parsing streams: the live heap grows by about the studies kept (here
// about 1.5× the file's size, the reports and paths as strings and the
// slice of studies with its spare capacity), not by copies of the file.
func TestReadAnnotationPeakHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 20 MB")
	}
	b := writeAnnotation(40000) // about 20 MB
	var a *Annotation
	var err error
	peak := peakHeap(func() { a, err = ReadAnnotation(bytes.NewReader(b)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes of JSON: peak heap growth %d bytes (%.2f×)", len(b), peak, float64(peak)/float64(len(b)))
	if peak > 2*uint64(len(b)) {
		t.Errorf("peak heap growth %d for %d bytes of JSON", peak, len(b))
	}
	runtime.KeepAlive(a)
	var ref *Annotation
	peakRef := peakHeap(func() { ref, _ = readAnnotationWhole(b) })
	t.Logf("whole-input reference: peak heap growth %d bytes (%.2f×), the input already in memory", peakRef, float64(peakRef)/float64(len(b)))
	runtime.KeepAlive(ref)
}

// FuzzReadAnnotationStream requires the streaming reader to agree with the
// whole-input reference: both refuse, or both give the same annotation.
func FuzzReadAnnotationStream(f *testing.F) {
	f.Add([]byte(`{"train": [{"id": "S1", "report": "Fine.", "image_path": ["a.png"], "split": "train"}], "val": null}`))
	f.Add([]byte(`{"test": [], "val": [{"id": 3, "report": "x", "image_path": ["p"]}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"train": []} {}`))
	f.Add([]byte(`{"train": [{"id": "S", "report": "\udc00", "image_path": ["a"]}]}`))
	f.Add(writeAnnotation(3))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ReadAnnotationLimit(bytes.NewReader(b), 1<<20)
		want, werr := readAnnotationWhole(b)
		if len(b) > 1<<20 {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes under a limit of 1 MiB: %v", len(b), err)
			}
			return
		}
		if err != nil && dupTopKeys(b) {
			return // the reference lets the last of duplicate keys win
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("streaming: %v; whole: %v", err, werr)
		}
		if err == nil && !sameAnnotation(got, want) {
			t.Fatalf("streaming and whole readers disagree")
		}
	})
}

// dupTopKeys reports whether b is an object naming a key twice.
func dupTopKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := t.(string)
		if seen[k] {
			return true
		}
		seen[k] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}
