package m2_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/mesh"
)

// m2Strategies are the decodings the module path is compared on: greedy
// and M²'s beam search of width 3, both recording attention.
func m2Strategies(c m2.Config, maxLen int) map[string]decode.Strategy {
	return map[string]decode.Strategy{
		"greedy": decode.Greedy{MaxLen: maxLen, BOS: c.BOS, EOS: c.EOS, Attention: true},
		"beam3": decode.BeamSearch{Size: 3, N: 3, MaxLen: maxLen, BOS: c.BOS, EOS: c.EOS, Semantics: decode.M2,
			Attention: true},
	}
}

// compareHypotheses fails unless got has want's studies and hypotheses,
// token for token, and returns the largest |Δ| of their log-probabilities
// and of their attention weights.
func compareHypotheses(t *testing.T, got, want [][]decode.Hypothesis) (lp, att float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d studies decoded, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("study %d: %d hypotheses, want %d", i, len(got[i]), len(want[i]))
		}
		for j, w := range want[i] {
			h := got[i][j]
			if fmt.Sprint(h.Tokens) != fmt.Sprint(w.Tokens) {
				t.Fatalf("study %d hypothesis %d:\n got %v\nwant %v", i, j, h.Tokens, w.Tokens)
			}
			if len(h.Attention) != len(w.Attention) {
				t.Fatalf("study %d hypothesis %d: %d attention weights, want %d", i, j, len(h.Attention), len(w.Attention))
			}
			for p := range w.LogProbs {
				lp = math.Max(lp, math.Abs(float64(h.LogProbs[p]-w.LogProbs[p])))
			}
			for p := range w.Attention {
				att = math.Max(att, math.Abs(float64(h.Attention[p]-w.Attention[p])))
			}
		}
	}
	return lp, att
}

// The decoding built from the modules' steps, greedy and beam 3, under
// every padding rule and with a routing: on the CPU its log-probabilities
// equal teacher forcing each hypothesis (within 1e-5); on a device its
// tokens, log-probabilities and attention maps equal the CPU's (within
// 1e-5).
func TestM2ModuleDecodingMatchesTeacherForcing(t *testing.T) {
	for _, dev := range stepDevices(t) {
		for _, routing := range []mesh.Routing{mesh.RoutingNone, mesh.RoutingGCA} {
			for _, padding := range []m2.PaddingRule{m2.PadAfterNorm, m2.PadZeroRows, m2.PadNone} {
				name := fmt.Sprintf("%v/%v/%v", dev, padding, routing)
				if routing == mesh.RoutingNone {
					name = fmt.Sprintf("%v/%v/meshed", dev, padding)
				}
				t.Run(name, func(t *testing.T) {
					c := tinyM2Config()
					c.Routing, c.Padding = routing, padding
					newModel := func() *m2.Model {
						m, err := m2.New(c, 7)
						if err != nil {
							t.Fatal(err)
						}
						randomizeVectors(m, 8)
						return m
					}
					ref, m := newModel(), newModel()
					feats := m2Feats(rand.New(rand.NewPCG(2, 2)), 3, 6, c.DIn)
					enc, err := ref.Encode(radgen.NoGrad(), feats)
					if err != nil {
						t.Fatal(err)
					}
					if err := radgen.ToDevice(m, dev); err != nil {
						t.Fatal(err)
					}
					start := func() (*m2.Decoding, error) {
						if padding != m2.PadAfterNorm || dev == radgen.CPU {
							return m.NewDecoding(feats)
						}
						// The after-norm rule is decided by the last bits of
						// float32 rounding (see m2.PadAfterNorm): decode
						// the device with the CPU's mask.
						var mask *radgen.Tensor
						if enc.Mask != nil {
							mask = enc.Mask.To(dev)
						}
						e, err := m.EncodeMasked(radgen.NoGrad(), feats.To(dev), mask)
						if err != nil {
							return nil, err
						}
						return m.NewDecodingEncoded(e)
					}
					for sname, st := range m2Strategies(c, 9) {
						want, err := func() ([][]decode.Hypothesis, error) {
							dec, err := ref.NewDecodingEncoded(enc)
							if err != nil {
								return nil, err
							}
							return st.Decode(context.Background(), dec)
						}()
						if err != nil {
							t.Fatal(err)
						}
						worst := m2TeacherForcedDelta(t, ref, enc, want)
						t.Logf("%s: CPU vs teacher forcing, max |Δ log p| = %.3g", sname, worst)
						if worst > 1e-5 {
							t.Errorf("%s: CPU vs teacher forcing, max |Δ log p| = %.3g > 1e-5", sname, worst)
						}
						if dev == radgen.CPU {
							continue
						}
						dec, err := start()
						if err != nil {
							t.Fatal(err)
						}
						got, err := st.Decode(context.Background(), dec)
						if err != nil {
							t.Fatal(err)
						}
						lp, att := compareHypotheses(t, got, want)
						t.Logf("%s: identical tokens; max |Δ log p| = %.3g, |Δ attention| = %.3g", sname, lp, att)
						if lp > 1e-5 || att > 1e-5 {
							t.Errorf("%s: max |Δ log p| = %.3g, |Δ attention| = %.3g > 1e-5", sname, lp, att)
						}
					}
				})
			}
		}
	}
}

// A <pad> fed to some rows is masked as a key from then on and zeroes its
// row's output, through reorders that repeat and drop rows: every step's
// log-probabilities equal teacher forcing the row's tokens so far, whose
// <pad> positions the full pass masks alike, and a <pad> row's are uniform.
func TestM2ModuleDecodingPadTokens(t *testing.T) {
	for _, dev := range stepDevices(t) {
		t.Run(dev.String(), func(t *testing.T) {
			ref := tinyM2(t)
			m := tinyM2(t)
			c := ref.Config
			c.Padding = m2.PadZeroRows
			ref.Config, m.Config = c, c
			ref.Encoder.Padding, m.Encoder.Padding = c.Padding, c.Padding
			if err := radgen.ToDevice(m, dev); err != nil {
				t.Fatal(err)
			}
			feats := m2Feats(rand.New(rand.NewPCG(3, 3)), 2, 6, c.DIn)
			enc, err := ref.Encode(radgen.NoGrad(), feats)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := m.NewDecoding(feats)
			if err != nil {
				t.Fatal(err)
			}
			V := c.Vocab
			steps := [][]int{{c.BOS, c.BOS}, {5, c.Pad}, {c.Pad, 7}, {4, 4, 9, 6}, {c.Pad, 8, 8, 11}, {3, 3, 3, 3}}
			reorders := map[int][]int{3: {0, 0, 1, 1}, 5: {3, 1, 1, 0}}
			study, history := []int{0, 1}, [][]int{nil, nil} // per row
			var worst float64
			for s, tok := range steps {
				if src, ok := reorders[s]; ok {
					if err := dec.Reorder(src); err != nil {
						t.Fatal(err)
					}
					st, h := make([]int, len(src)), make([][]int, len(src))
					for i, r := range src {
						st[i], h[i] = study[r], history[r]
					}
					study, history = st, h
				}
				got := make([]float32, len(tok)*V)
				if err := dec.Step(context.Background(), tok, got); err != nil {
					t.Fatal(err)
				}
				for r, tk := range tok {
					history[r] = append(slices.Clone(history[r]), tk)
					one := &m2.Encoded{Levels: sliceStudy(enc.Levels, study[r]), Mask: sliceStudy(enc.Mask, study[r])}
					n := len(history[r])
					lp, err := ref.TeacherForce(radgen.NoGrad(), one, history[r], 1, n)
					if err != nil {
						t.Fatal(err)
					}
					want := lp.Data()[(n-1)*V : n*V]
					for v := range V {
						worst = math.Max(worst, math.Abs(float64(got[r*V+v]-want[v])))
					}
					if tk == c.Pad && math.Abs(float64(got[r*V])+math.Log(float64(V))) > 1e-5 {
						t.Fatalf("step %d row %d (<pad>): log p = %g, want the uniform %g", s, r, got[r*V], -math.Log(float64(V)))
					}
				}
			}
			t.Logf("max |Δ log p| against teacher forcing = %.3g over %d steps", worst, len(steps))
			if worst > 1e-5 {
				t.Fatalf("max |Δ log p| = %.3g > 1e-5", worst)
			}
		})
	}
}

// The module decoding refuses malformed encodings, tokens, reorders,
// cancelled contexts and steps beyond the positional table, with decode's
// errors.
func TestM2ModuleDecodingErrors(t *testing.T) {
	m := tinyM2(t)
	if _, err := m.NewDecoding(radgen.Zeros(2, 6, 5)); err == nil {
		t.Fatal("features of the wrong width accepted")
	}
	if _, err := m.NewDecodingEncoded(&m2.Encoded{}); err == nil {
		t.Fatal("empty encoding accepted")
	}
	dec, err := m.NewDecoding(m2Feats(rand.New(rand.NewPCG(3, 3)), 2, 6, 12))
	if err != nil {
		t.Fatal(err)
	}
	lp := make([]float32, 2*m.Config.Vocab)
	if err := dec.Attention(lp); err == nil {
		t.Fatal("attention before a step")
	}
	if err := dec.Step(context.Background(), []int{2, m.Config.Vocab}, lp); !errors.Is(err, decode.ErrToken) {
		t.Fatalf("token out of range: %v", err)
	}
	if err := dec.Step(context.Background(), []int{2}, lp); !errors.Is(err, decode.ErrShape) {
		t.Fatalf("too few tokens: %v", err)
	}
	if err := dec.Reorder([]int{0, 2}); !errors.Is(err, decode.ErrShape) {
		t.Fatalf("reorder out of range: %v", err)
	}
	if err := dec.Reorder(nil); !errors.Is(err, decode.ErrShape) {
		t.Fatalf("reorder to no rows: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dec.Step(ctx, []int{2, 2}, lp); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled step: %v", err)
	}
	for range m.Decoder.MaxLen() {
		if err := dec.Step(context.Background(), []int{2, 2}, lp); err != nil {
			t.Fatal(err)
		}
	}
	if err := dec.Step(context.Background(), []int{2, 2}, lp); err == nil {
		t.Fatal("step beyond the positional table accepted")
	}
}

// The golden studies decoded through the modules' steps with M²'s beam
// search (fixed length and early stop), on the CPU and on a device, with
// the golden's recorded encoder mask: the published best and every beam,
// token for token, log-probabilities within 1e-4.
func TestM2ModuleDecodingParity(t *testing.T) {
	g := loadM2Golden(t)
	bestSeq, bs := g.ints(t, "beam_seq")
	bestLP := g.tensor(t, "beam_logprob").Data()
	allSeq, as := g.ints(t, "beam_all_seq")
	allLP := g.tensor(t, "beam_all_logprob").Data()
	B, k, L := as[0], as[1], as[2]
	if bs[0] != B || bs[1] != L || k != g.meta.BeamSize || L != g.meta.MaxLen {
		t.Fatalf("golden shapes %v %v disagree with meta.json (beam %d, max_len %d)", bs, as, g.meta.BeamSize, g.meta.MaxLen)
	}
	for _, dev := range stepDevices(t) {
		m := g.m2(t)
		if err := radgen.ToDevice(m, dev); err != nil {
			t.Fatal(err)
		}
		enc, err := m.EncodeMasked(radgen.NoGrad(), g.tensor(t, "features").To(dev), g.keepMask(t).To(dev))
		if err != nil {
			t.Fatal(err)
		}
		for _, full := range []bool{true, false} {
			strategy := decode.BeamSearch{Size: k, N: k, MaxLen: L, BOS: m.Config.BOS, EOS: m.Config.EOS,
				Semantics: decode.M2, FullLength: full}
			t.Run(fmt.Sprintf("%v/full=%v", dev, full), func(t *testing.T) {
				dec, err := m.NewDecodingEncoded(enc)
				if err != nil {
					t.Fatal(err)
				}
				hyps, err := strategy.Decode(context.Background(), dec)
				if err != nil {
					t.Fatal(err)
				}
				if len(hyps) != B {
					t.Fatalf("%d studies decoded, want %d", len(hyps), B)
				}
				var worst float64
				for i := range B {
					if len(hyps[i]) != k {
						t.Fatalf("study %d: %d hypotheses, want %d", i, len(hyps[i]), k)
					}
					for j, h := range hyps[i] {
						// M² pads finished beams with word 0 and log-prob 0.
						seq, lp := make([]int, L), make([]float32, L)
						copy(seq, h.Tokens)
						copy(lp, h.LogProbs)
						ws, wl := allSeq[(i*k+j)*L:(i*k+j+1)*L], allLP[(i*k+j)*L:(i*k+j+1)*L]
						if j == 0 {
							ws, wl = bestSeq[i*L:(i+1)*L], bestLP[i*L:(i+1)*L]
						}
						for p := range L {
							if seq[p] != ws[p] {
								t.Fatalf("study %d beam %d: tokens differ at %d:\n got %v\nwant %v", i, j, p, seq, ws)
							}
							worst = math.Max(worst, math.Abs(float64(lp[p]-wl[p])))
						}
					}
				}
				t.Logf("%d studies × %d beams: identical sequences; token log-probs max |Δ| = %.3g", B, k, worst)
				if worst > 1e-4 {
					t.Errorf("beam log-probs: max |Δ| = %.3g > 1e-4", worst)
				}
			})
		}
	}
}

// BenchmarkM2ModuleDecoding decodes 20 steps of M²'s beam search of width
// 3 (every beam runs to MaxLen) through the modules' steps, at batch 1 and
// 16, from one encoding of 50 regions, and reports the time per step.
// "coco" is the paper's configuration (vocabulary 10,201, whose output
// projection dominates a step), "tiny" tinyM2Preset with 200 words (where
// the cost of the steps' many small operations shows); weights are random.
func BenchmarkM2ModuleDecoding(b *testing.B) {
	for _, cfg := range []struct {
		name string
		c    m2.Config
	}{{"coco", m2.COCO(10201)}, {"tiny", m2.Tiny(200, 256)}} {
		c := cfg.c
		c.Padding = m2.PadNone
		m, err := m2.New(c, 1)
		if err != nil {
			b.Fatal(err)
		}
		const steps = 20
		st := decode.BeamSearch{Size: 3, MaxLen: steps, BOS: c.BOS, EOS: c.EOS, Semantics: decode.M2, FullLength: true}
		for _, batch := range []int{1, 16} {
			feats := m2Feats(rand.New(rand.NewPCG(1, 1)), batch, 50, c.DIn)
			enc, err := m.Encode(radgen.NoGrad(), feats)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/batch=%d", cfg.name, batch), func(b *testing.B) {
				decodeEncodedLoop(b, m, enc, st)
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*steps), "ms/step")
			})
		}
	}
}

// decodeEncodedLoop decodes the encoded studies enc with st through m's
// module steps for every iteration of the benchmark, allocations reported.
func decodeEncodedLoop(b *testing.B, m *m2.Model, enc *m2.Encoded, st decode.Strategy) {
	b.ReportAllocs()
	for b.Loop() {
		dec, err := m.NewDecodingEncoded(enc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Decode(context.Background(), dec); err != nil {
			b.Fatal(err)
		}
		dec.Release()
	}
}
