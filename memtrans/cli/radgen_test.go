package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/mesh"
)

// The subcommands as the tests call them, their output discarded.
func train(ctx context.Context, args []string) error    { return quiet().train(ctx, args) }
func generate(ctx context.Context, args []string) error { return quiet().generate(ctx, args) }
func eval(ctx context.Context, args []string) error     { return quiet().eval(ctx, args) }
func convert(args []string) error                       { return quiet().convert(context.Background(), args) }
func watch(ctx context.Context, args []string) error    { return quiet().watch(ctx, args) }

func quiet() *command { return newCommand(io.Discard, io.Discard) }

// TestVersion: radgen version, -version and --version print radgen's
// version to stdout and succeed; an argument after it is a usage error.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), []string{arg}, &stdout, &stderr); code != 0 || stdout.String() != "radgen "+radgen.Version+"\n" || stderr.Len() != 0 {
			t.Errorf("radgen %s: status %d, stdout %q, stderr %q", arg, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"version", "-model"}, &stdout, &stderr); code != 2 || stdout.Len() != 0 || stderr.Len() == 0 {
		t.Errorf("radgen version -model: status %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// Every size, architecture and routing the flags name is a valid model
// configuration; nonsense is refused.
func TestModelConfig(t *testing.T) {
	for _, size := range []string{"tiny", "iu", "mimic"} {
		for _, arch := range []string{memtrans.ArchR2Gen, memtrans.ArchM2, memtrans.ArchMETransformer} {
			for _, r := range []mesh.Routing{mesh.RoutingNone, mesh.RoutingGCA} {
				c := data.IUXray
				if size == "mimic" {
					c = data.MIMICCXR
				}
				cfg, err := modelConfig(size, arch, r, c, 100)
				if arch == memtrans.ArchMETransformer && r != mesh.RoutingNone {
					if err == nil {
						t.Errorf("%s/%s/%s: routing accepted", size, arch, r)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s/%s/%s: %v", size, arch, r, err)
					continue
				}
				if cfg.Architecture() != arch || (size == "mimic") != (cfg.Views == 1) {
					t.Errorf("%s/%s/%s: architecture %s, %d views", size, arch, r, cfg.Architecture(), cfg.Views)
				}
			}
		}
	}
	for _, bad := range [][3]string{{"huge", "r2gen", ""}, {"tiny", "lstm", ""}, {"tiny", "m2", "zigzag"}} {
		if _, err := modelConfig(bad[0], bad[1], mesh.Routing(bad[2]), data.IUXray, 100); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	for _, s := range []string{"gpu", "cuda:x", "cuda:-1"} {
		if _, err := parseDevice(s); err == nil {
			t.Errorf("-device %q accepted", s)
		}
	}
}

// The commands end to end on synthetic films: train an M² with GCA routing
// for one epoch, then generate on the CPU and on the reference device, which
// must agree.
func TestTrainAndGenerateM2(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := data.WriteSynthetic(ctx, dir, data.SynthConfig{Train: 16, Val: 4, Test: 4, Width: 64, Height: 64, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ann, images, out := filepath.Join(dir, "annotation.json"), filepath.Join(dir, "images"), filepath.Join(dir, "run")
	if err := train(ctx, []string{"-ann", ann, "-images", images, "-out", out, "-arch", "m2", "-routing", "gca", "-epochs", "1", "-freeze", "-batch", "8"}); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(out, "best.radgen")
	m, err := memtrans.LoadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if m2, ok := m.Config().EncoderDecoder.(m2.Config); !ok || m2.Routing != mesh.RoutingGCA {
		t.Fatalf("trained %s: %+v", m.Config().Architecture(), m.Config().EncoderDecoder)
	}
	m.Close()
	reports, onDevice := filepath.Join(dir, "reports.json"), filepath.Join(dir, "device.json")
	if err := generate(ctx, []string{"-model", model, "-ann", ann, "-images", images, "-o", reports}); err != nil {
		t.Fatal(err)
	}
	if err := generate(ctx, []string{"-model", model, "-ann", ann, "-images", images, "-device", "reference", "-o", onDevice}); err != nil {
		t.Fatal(err)
	}
	cpu, err := os.ReadFile(reports)
	if err != nil || len(cpu) < 10 {
		t.Fatalf("reports: %d bytes, %v", len(cpu), err)
	}
	var a, b []generated
	dev, _ := os.ReadFile(onDevice)
	if json.Unmarshal(cpu, &a) != nil || json.Unmarshal(dev, &b) != nil || len(a) != len(b) || len(a) == 0 {
		t.Fatalf("reports: %d on the CPU, %d on the device", len(a), len(b))
	}
	for i := range a {
		if a[i].Report != b[i].Report {
			t.Errorf("study %s: CPU %q, reference device %q", a[i].ID, a[i].Report, b[i].Report)
		}
	}
}
