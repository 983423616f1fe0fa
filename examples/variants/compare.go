package main

// The comparison: each row trains with memtrans/synth on the same films
// and budget.

import (
	"context"
	"fmt"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/r2gen"
	"github.com/radgen/radgen/memtrans/synth"
	"github.com/radgen/radgen/mesh"
)

// spec is one row of the variant comparison: a configuration of the
// memory-driven Transformer.
type spec struct {
	Name         string
	Architecture string // zero: R2Gen's, configured by Variant and Configure
	Variant      r2gen.Variant
	Configure    func(*r2gen.Config) // nil: the variant as it is
	// ConfigureModel edits the whole model configuration (M², METransformer).
	ConfigureModel func(*memtrans.ModelConfig)
	// ContinueFrom names an earlier spec of the same comparison whose
	// trained model this one continues (continued learning) for
	// ContinueEpochs epochs instead of training from scratch, at a tenth of
	// the learning rate.
	ContinueFrom   string
	ContinueEpochs int
}

// mem2memPenalty is the weight of Mem2Mem's penalty ‖AAᵀ − I‖²_F (Eq. 12)
// in the comparison's Mem2Mem rows.
const mem2memPenalty = 0.1

// specs returns the comparison of issue 9: R2Gen's ablations (Chen et al.
// Table 2), layer-wise multi-view decoding with GCA, trained from scratch
// with the same budget and continued from the trained R2Gen row for a third
// of it more (the paper's recipe), R2Gen with Mem2Mem in place of the
// relational memory, the Meshed-Memory Transformer, meshed and with GCA
// routing in place of the mesh, and METransformer.
// epochs is the budget of a run from scratch.
func specs(epochs int) []spec {
	gca := func(c *r2gen.Config) { c.Routing = mesh.RoutingGCA }
	return []spec{
		{Name: "BASE", Variant: r2gen.VariantBase},
		{Name: "BASE+RM", Variant: r2gen.VariantBaseRM},
		{Name: "BASE+RM+MCLN (R2Gen)", Variant: r2gen.VariantR2Gen},
		{Name: "multi-view GCA", Variant: r2gen.VariantR2Gen, Configure: gca},
		{Name: "multi-view GCA (continued)", Variant: r2gen.VariantR2Gen, Configure: gca,
			ContinueFrom: "BASE+RM+MCLN (R2Gen)", ContinueEpochs: max(1, epochs/3)},
		{Name: "Mem2Mem", Variant: r2gen.VariantR2Gen, Configure: func(c *r2gen.Config) {
			c.Memory, c.Mem2MemPenalty = r2gen.MemoryMem2Mem, mem2memPenalty
		}},
		{Name: "M²", Architecture: memtrans.ArchM2},
		{Name: "M² multi-view GCA", Architecture: memtrans.ArchM2, ConfigureModel: func(c *memtrans.ModelConfig) {
			m2 := c.EncoderDecoder.(m2.Config)
			m2.Routing = mesh.RoutingGCA
			c.EncoderDecoder = m2
		}},
		{Name: "METransformer", Architecture: memtrans.ArchMETransformer},
	}
}

// row is what the comparison measured for one spec.
type row struct {
	Name        string
	Epochs      int // total, counting the run continued from
	Params      int // trainable parameters of the encoder–decoder
	BLEU1       float64
	BLEU4       float64
	ROUGEL      float64
	CEF1        float64 // micro F1 of the labeler's reading vs the films' findings
	FirstLoss   float64 // mean training loss of the first epoch
	LastLoss    float64 // and of the last
	TrainTime   time.Duration
	ContinuedOf string
}

// compare runs every spec on the data set of o.Dir with o's budget and
// settings (o.Variant, o.Configure and o.Init are set per spec) and returns
// one row per spec, in order. report, when set, receives each row as soon
// as it is measured.
func compare(ctx context.Context, o synth.Options, specs []spec, report func(row)) ([]row, error) {
	// A continued row runs at a tenth of the rate: set the defaults here.
	if o.Epochs == 0 {
		o.Epochs = synth.Defaults.Epochs
	}
	if o.LR == 0 {
		o.LR = synth.Defaults.LR
	}
	trained := map[string]*synth.Result{}
	epochs := map[string]int{}
	defer func() {
		for _, r := range trained {
			r.Model.Close()
		}
	}()
	var rows []row
	for _, s := range specs {
		run := o
		run.Architecture, run.Variant, run.Configure, run.ConfigureModel, run.Init = s.Architecture, s.Variant, s.Configure, s.ConfigureModel, nil
		total := o.Epochs
		if s.ContinueFrom != "" {
			prev, ok := trained[s.ContinueFrom]
			if !ok {
				return rows, fmt.Errorf("%s continues %q, which has not run before it", s.Name, s.ContinueFrom)
			}
			// Fine-tuning resumes at the rate the single-view run ended
			// with: its step schedule multiplied o.LR by 0.1 after two
			// thirds of its epochs. At the full rate a fresh optimiser
			// throws the trained model off (on the small test budget its
			// beam reports collapse to three words).
			run.Init, run.Epochs, run.LR = prev.Model, max(1, s.ContinueEpochs), o.LR*0.1
			total = epochs[s.ContinueFrom] + run.Epochs
		}
		res, err := synth.Run(ctx, run)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", s.Name, err)
		}
		if old, ok := trained[s.Name]; ok {
			old.Model.Close()
		}
		trained[s.Name], epochs[s.Name] = res, total
		r := row{Name: s.Name, Epochs: total, Params: res.Params, BLEU1: res.Scores.BLEU[0], BLEU4: res.Scores.BLEU[3], ROUGEL: res.Scores.ROUGEL,
			CEF1: res.Efficacy.Micro.F1, TrainTime: res.TrainTime, ContinuedOf: s.ContinueFrom}
		if h := res.History; len(h) > 0 {
			r.FirstLoss, r.LastLoss = h[0].Loss, h[len(h)-1].Loss
		}
		rows = append(rows, r)
		if report != nil {
			report(r)
		}
	}
	return rows, nil
}
