package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
)

// fixture is a synthetic archive shared by the tests: films written by
// data.WriteSynthetic, a tiny model saved once, manifests, and radgen and
// score commands built from the main module.
type fixture struct {
	dir       string
	ann       string // annotation.json
	model     string // model.radgen
	good      string // manifest of the test split
	all       string // the test split, then three bad studies and a malformed line
	train     string // manifest of the train split
	testIDs   []string
	trainIDs  []string
	bad       map[string]string // study id → its bad file
	cli, scor string            // built commands
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Prism logs every stage at INFO; errors come back from Execute.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1})))
	beam.Init()
	code := m.Run()
	if fix != nil {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

// Sizes of the synthetic archive.
const (
	testStudies  = 44
	trainStudies = 24
)

func getFixture(t testing.TB) *fixture {
	t.Helper()
	fixOnce.Do(func() { fix, fixErr = newFixture(testStudies, trainStudies, 64) })
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// newFixture writes nTest and nTrain studies of size×size films and a tiny
// model that takes them at that size.
func newFixture(nTest, nTrain, size int) (*fixture, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "radgen-beam-test-")
	if err != nil {
		return nil, err
	}
	f := &fixture{dir: dir, ann: filepath.Join(dir, "annotation.json"), model: filepath.Join(dir, "model.radgen"), bad: map[string]string{}}
	ann, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: nTrain, Test: nTest, Width: size, Height: size, Seed: 11})
	if err != nil {
		return nil, err
	}
	train, err := ann.Split("train")
	if err != nil {
		return nil, err
	}
	test, err := ann.Split("test")
	if err != nil {
		return nil, err
	}
	reports, _ := ann.Reports("train")
	tok, err := data.BuildTokenizer(data.IUXray, data.IUXray.Threshold(), reports)
	if err != nil {
		return nil, err
	}
	cfg := memtrans.R2GenTiny(tok.Len() + 1)
	cfg.ImageSize, cfg.ResizeTo = size, size*9/8
	m, err := memtrans.New(cfg, tok, 5)
	if err != nil {
		return nil, err
	}
	if err := m.SaveFile(f.model); err != nil {
		return nil, err
	}
	m.Close()

	lines := func(studies []data.Study) []string {
		var out []string
		for _, s := range studies {
			imgs := make([]string, len(s.ImagePath))
			for i, p := range s.ImagePath {
				imgs[i] = "images/" + p
			}
			b, _ := json.Marshal(Study{ID: s.ID, Images: imgs})
			out = append(out, string(b))
		}
		return out
	}
	good := lines(test)
	for _, s := range test {
		f.testIDs = append(f.testIDs, s.ID)
	}
	for _, s := range train {
		f.trainIDs = append(f.trainIDs, s.ID)
	}
	// Bad studies: a missing file, a truncated PNG, a hostile DICOM.
	first := filepath.Join(dir, "images", test[0].ImagePath[0])
	png, err := os.ReadFile(first)
	if err != nil {
		return nil, err
	}
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bad, "truncated.png"), png[:len(png)/2], 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bad, "hostile.dcm"), hostileDICOM(), 0o644); err != nil {
		return nil, err
	}
	f.bad["bad-missing"] = filepath.Join(dir, "bad/missing.png")
	f.bad["bad-truncated"] = filepath.Join(dir, "bad/truncated.png")
	f.bad["bad-hostile"] = filepath.Join(dir, "bad/hostile.dcm")
	all := append([]string(nil), good...)
	for _, id := range []string{"bad-missing", "bad-truncated", "bad-hostile"} {
		rel, _ := filepath.Rel(dir, f.bad[id])
		b, _ := json.Marshal(Study{ID: id, Images: []string{"images/" + test[1].ImagePath[0], rel}})
		all = append(all, string(b))
	}
	all = append(all, `{"id": "bad-json", "images": [`)
	f.good, f.all, f.train = filepath.Join(dir, "good.jsonl"), filepath.Join(dir, "all.jsonl"), filepath.Join(dir, "train.jsonl")
	for p, l := range map[string][]string{f.good: good, f.all: all, f.train: lines(train)} {
		if err := os.WriteFile(p, []byte(strings.Join(l, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// commands builds examples/radgen and examples/score of the main module.
func (f *fixture) commands(t testing.TB) (cli, score string) {
	t.Helper()
	if f.cli != "" {
		return f.cli, f.scor
	}
	bin := filepath.Join(f.dir, "bin")
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gocmd, "build", "-o", bin+string(filepath.Separator), "github.com/radgen/radgen/examples/radgen", "github.com/radgen/radgen/examples/score")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the commands: %v\n%s", err, out)
	}
	f.cli, f.scor = filepath.Join(bin, "radgen"), filepath.Join(bin, "score")
	return f.cli, f.scor
}

// hostileDICOM is a DICOM file of a few hundred bytes that declares a
// 65535×65535 16-bit image.
func hostileDICOM() []byte {
	var body bytes.Buffer
	el := func(group, elem uint16, vr string, val []byte) {
		binary.Write(&body, binary.LittleEndian, [2]uint16{group, elem})
		if strings.Contains("OB OW", vr) {
			body.WriteString(vr + "\x00\x00")
			binary.Write(&body, binary.LittleEndian, uint32(len(val)))
		} else {
			body.WriteString(vr)
			binary.Write(&body, binary.LittleEndian, uint16(len(val)))
		}
		body.Write(val)
	}
	u16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	el(0x0028, 0x0002, "US", u16(1))
	el(0x0028, 0x0004, "CS", []byte("MONOCHROME2 "))
	el(0x0028, 0x0010, "US", u16(65535))
	el(0x0028, 0x0011, "US", u16(65535))
	el(0x0028, 0x0100, "US", u16(16))
	el(0x0028, 0x0101, "US", u16(16))
	el(0x0028, 0x0102, "US", u16(15))
	el(0x0028, 0x0103, "US", u16(0))
	el(0x7fe0, 0x0010, "OW", []byte{1, 2, 3, 4, 5, 6})
	var meta bytes.Buffer
	ts := []byte("1.2.840.10008.1.2.1\x00")
	binary.Write(&meta, binary.LittleEndian, [2]uint16{0x0002, 0x0010})
	meta.WriteString("UI")
	binary.Write(&meta, binary.LittleEndian, uint16(len(ts)))
	meta.Write(ts)
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	binary.Write(&out, binary.LittleEndian, [2]uint16{0x0002, 0x0000})
	out.WriteString("UL")
	binary.Write(&out, binary.LittleEndian, uint16(4))
	binary.Write(&out, binary.LittleEndian, uint32(meta.Len()))
	out.Write(meta.Bytes())
	out.Write(body.Bytes())
	return out.Bytes()
}

// runPipeline runs a pipeline on Prism and returns its radgen counters,
// summed over transforms.
func runPipeline(t testing.TB, build func(beam.Scope)) map[string]int64 {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	build(s)
	res, err := prism.Execute(context.Background(), p)
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	counts := map[string]int64{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == "radgen" {
			counts[c.Name()] += c.Result()
		}
	}
	return counts
}

// readLines reads the sorted lines of the files matching a glob.
func readLines(t testing.TB, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files %s (%v)", glob, err)
	}
	var out []string
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return out
}

func readReports(t testing.TB, glob string) map[string]Report {
	t.Helper()
	out := map[string]Report{}
	for _, l := range readLines(t, glob) {
		var r Report
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if _, dup := out[r.ID]; dup {
			t.Fatalf("study %s written twice", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

func fileSHA(t testing.TB, p string) string {
	t.Helper()
	_, sum, err := modelFor(context.Background(), p, "")
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

var _ = fmt.Sprint
