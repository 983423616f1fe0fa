package memtrans

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/radgen/radgen/memtrans/m2"
)

// Every architecture is a configuration of the facade: trained by the
// Trainer, generating through Model.Generate, saved and loaded.
func TestArchitecturesThroughTheFacade(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three tiny models")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		arch      string
		configure func(int) ModelConfig
	}{
		{ArchR2Gen, R2GenTiny},
		{ArchM2, M2Tiny},
		{ArchMETransformer, METransTiny},
	} {
		t.Run(string(tc.arch), func(t *testing.T) {
			m, loader, ann, dir := synthSetupConfig(t, 24, 5, tc.configure)
			defer m.Close()
			if got := m.Config().Architecture(); got != tc.arch {
				t.Fatalf("architecture %q, want %q", got, tc.arch)
			}
			if (m.r2genNet() != nil) != (tc.arch == ArchR2Gen) || (m.m2() != nil) != (tc.arch == ArchM2) ||
				(m.metrans() != nil) != (tc.arch == ArchMETransformer) {
				t.Fatalf("accessors disagree with %q", tc.arch)
			}
			cfg := TrainConfig{Epochs: 4, LR: 2e-3, AMSGrad: true, ClipValue: 0.1, Seed: 3, FreezeExtractor: true, CalibrateBatches: 2}
			tr, err := NewTrainer(m, cfg, loader)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Run(ctx); err != nil {
				t.Fatal(err)
			}
			h := tr.History()
			if len(h) != 4 || !(h[3].Loss < 0.8*h[0].Loss) || math.IsNaN(h[3].Loss) {
				t.Fatalf("loss did not fall: first %.4f, last %.4f", h[0].Loss, h[len(h)-1].Loss)
			}
			t.Logf("loss %.3f → %.3f", h[0].Loss, h[3].Loss)

			test, _ := ann.Split("test")
			var studies []Study
			for _, s := range test[:3] {
				st, err := m.StudyFromAnnotation(s, dir+"/images")
				if err != nil {
					t.Fatal(err)
				}
				studies = append(studies, st)
			}
			reps, err := m.Generate(ctx, studies, WithBeamSize(3), WithMaxLength(20))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range reps {
				if len(r.Tokens) == 0 || len(r.Tokens) > 20 || r.LogProb > 0 || math.IsNaN(r.LogProb) {
					t.Fatalf("report %d: %d tokens, log p %v", i, len(r.Tokens), r.LogProb)
				}
				for _, id := range r.Tokens {
					if id < 0 || id > m.Tokenizer().Len() {
						t.Fatalf("report %d: token %d outside the tokenizer's ids", i, id)
					}
				}
				if tc.arch == ArchMETransformer {
					if n := mtcfg(m.Config()).Experts; len(r.Candidates) != n || len(r.Votes) != n || r.Text != r.Candidates[r.Expert] {
						t.Fatalf("report %d: %d candidates, %d votes, expert %d for %d experts", i, len(r.Candidates), len(r.Votes), r.Expert, n)
					}
				} else if r.Candidates != nil {
					t.Fatalf("report %d has candidates", i)
				}
			}
			t.Logf("%q", reps[0].Text)

			var buf bytes.Buffer
			if err := m.Save(&buf); err != nil {
				t.Fatal(err)
			}
			back, err := Load(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if back.Config().Architecture() != tc.arch {
				t.Fatalf("reloaded as %q", back.Config().Architecture())
			}
			again, err := back.Generate(ctx, studies, WithBeamSize(3), WithMaxLength(20))
			if err != nil {
				t.Fatal(err)
			}
			for i := range reps {
				if again[i].Text != reps[i].Text || again[i].LogProb != reps[i].LogProb {
					t.Fatalf("report %d after reload: %q (%v), before %q (%v)", i, again[i].Text, again[i].LogProb, reps[i].Text, reps[i].LogProb)
				}
			}
		})
	}
}

func TestModelConfigArchitectureErrors(t *testing.T) {
	v := 30
	none := M2Tiny(v)
	none.EncoderDecoder = nil
	ids := M2Tiny(v)
	editM2(&ids, func(c *m2.Config) { c.BOS = 1 })
	patches := METransTiny(v)
	patches.ImageSize = 128 // 2·4² patches, the METransformer still takes 2·2²
	width := M2Tiny(v)
	editM2(&width, func(c *m2.Config) { c.DIn = 7 })
	for name, c := range map[string]ModelConfig{"none": none, "m2 ids": ids, "metrans patches": patches, "m2 width": width} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	for _, c := range []ModelConfig{R2GenTiny(v), M2Tiny(v), METransTiny(v), M2IUXray(v), METransIUXray(v), R2GenIUXray(v)} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Architecture(), err)
		}
	}
	if got := R2GenIUXray(v).PatchesPerStudy(); got != 98 {
		t.Errorf("IU X-Ray patches %d, want 98", got)
	}
}

// The M² facade feeds <bos> first and <pad> for R2Gen's later zeros.
func TestM2FacadeInput(t *testing.T) {
	c := m2.Tiny(10, 8).ForReports(10, 5)
	f := m2.ReportModel{Model: &m2.Model{Config: c}}
	got := f.Inputs([]int{0, 4, 5, 0, 0, 0, 7, 0, 0, 0}, 5)
	want := []int{10, 4, 5, 11, 11, 10, 7, 11, 11, 11}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("m2Input = %v, want %v", got, want)
		}
	}
}
