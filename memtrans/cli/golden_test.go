package cli

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/pth"
	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
)

// R2Gen's own weights through the command: the shared golden (the
// published code's modules with d_model 128, trained on the IU X-Ray
// reports with run_iu_xray.sh's threshold and max_seq_length) saved as
// model_best.pth of a DataParallel model. radgen convert reads it with the
// run script's defaults and -vocab the IU X-Ray annotation: the vocabulary
// rebuilt fits the logit layer, the settings logged name d_model and d_ff
// as the only departures from the script, and the converted model writes
// R2Gen's own beam-3 and beam-2 reports token for token, with its
// log-probabilities. Another
// -threshold or -max-seq-length is refused, naming the flag.
func TestGoldenR2GenThroughTheCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: converts the golden R2Gen")
	}
	dir := testutil.Dir(t, "RADGEN_GOLDEN_R2GEN", "golden/r2gen")
	ann := testutil.File(t, "RADGEN_IU_ANNOTATION", "data/iu_xray/annotation.json")
	open := func(name string) *safetensors.File {
		f, err := safetensors.OpenFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	model, ext, cas := open("model.safetensors"), open("extractor.safetensors"), open("case.safetensors")
	var ts []pth.Tensor
	add := func(f *safetensors.File, prefix string, keep func(string) bool) {
		for _, n := range f.Names() {
			if !keep(n) {
				continue
			}
			v, shape, err := f.Float32(n)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, pth.Tensor{Name: "module." + prefix + n, Shape: shape, Data: v})
		}
	}
	add(model, "encoder_decoder.", func(string) bool { return true })
	add(ext, "", func(n string) bool { return strings.HasPrefix(n, "visual_extractor.") })
	var b bytes.Buffer
	if err := pth.Write(&b, ts, &pth.Meta{Epoch: 1, MonitorBest: 0}); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pthPath, out := filepath.Join(tmp, "model_best.pth"), filepath.Join(tmp, "golden.radgen")
	if err := os.WriteFile(pthPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()

	code, stdout, log := run("convert", "-model", pthPath, "-vocab", ann, "-out", out)
	if code != 0 || !strings.Contains(stdout, "r2gen, 2 views, a vocabulary of 760 tokens, reports of up to 60 tokens") {
		t.Fatalf("convert: status %d, %q\n%s", code, stdout, log)
	}
	for _, want := range []string{
		`msg="R2Gen settings" dataset_name=iu_xray d_model=128 d_ff=128 num_layers=3 num_heads=8 rm_num_slots=3 rm_num_heads=8 views=2 threshold=3 max_seq_length=60 vocab=761`,
		`settings="d_model 128 from the weights (run_iu_xray.sh: 512), d_ff 128 from the weights (run_iu_xray.sh: 512)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("convert's log lacks %s:\n%s", want, log)
		}
	}

	m, err := memtrans.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	feats, shape, err := cas.Float32("att_feats")
	if err != nil {
		t.Fatal(err)
	}
	for _, beam := range []int{3, 2} {
		name := map[int]string{3: "beam3", 2: "beam2"}[beam]
		seq, sshape, err := cas.Int64(name + "_seq")
		if err != nil {
			t.Fatal(err)
		}
		wantLP, _, err := cas.Float32(name + "_token_logprob")
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, shape[0])
		reps, err := m.GenerateFeatures(context.Background(), ids, radgen.FromFloat32(feats, shape...), memtrans.WithBeamSize(beam))
		if err != nil {
			t.Fatal(err)
		}
		worst, n := 0.0, sshape[1]
		for i, r := range reps {
			got := make([]int64, n)
			for j, id := range r.Tokens {
				got[j] = int64(id)
			}
			if !slices.Equal(got, seq[i*n:(i+1)*n]) || len(r.Tokens) != len(r.TokenLogProbs) {
				t.Fatalf("%s, study %d:\n got %v\nwant %v", name, i, got, seq[i*n:(i+1)*n])
			}
			for j, lp := range r.TokenLogProbs {
				worst = max(worst, math.Abs(float64(lp-wantLP[i*n+j])))
			}
		}
		t.Logf("%s: %d studies, R2Gen's tokens; max |Δ log p| = %.2g; %q", name, len(reps), worst, reps[0].Text)
		if worst > 1e-4 {
			t.Errorf("%s: token log-probabilities differ from R2Gen's by %g", name, worst)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-threshold", "4"}, "at -threshold 4 and -corpus iu_xray, an output of"},
		{[]string{"-threshold", "4"}, "but the weights' logit layer has 761 (-threshold 3 gives 761)"},
		{[]string{"-max-seq-length", "5001"}, "-max-seq-length 5001: longer than the 5000 rows of the positional table"},
		{[]string{"-heads", "3"}, "-heads 3: R2Gen's num_heads must divide d_model, which is 128"},
	} {
		code, _, log := run(append([]string{"convert", "-model", pthPath, "-vocab", ann, "-out", filepath.Join(tmp, "x.radgen")}, c.args...)...)
		if code != 1 || !strings.Contains(log, c.want) {
			t.Errorf("%v: status %d, the error lacks %q:\n%s", c.args, code, c.want, log)
		}
	}
}
