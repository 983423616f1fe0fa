package memtrans

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/optim"
)

// TrainConfig holds the choices of training; R2GenIUXrayTraining and
// R2GenMIMICCXRTraining give the published settings.
type TrainConfig struct {
	Epochs      int     `json:"epochs"`
	LRVisual    float64 `json:"lr_ve"`        // visual extractor learning rate (5e-5)
	LR          float64 `json:"lr_ed"`        // everything else (1e-4)
	WeightDecay float64 `json:"weight_decay"` // L2, added to the gradient (5e-5)
	AMSGrad     bool    `json:"amsgrad"`      // true in R2Gen
	ClipValue   float64 `json:"clip_value"`   // clip_grad_value_ (0.1 in R2Gen); 0 disables
	ClipNorm    float64 `json:"clip_norm"`    // clip_grad_norm_; 0 disables
	StepSize    int     `json:"step_size"`    // StepLR period in epochs (50 IU, 1 MIMIC)
	Gamma       float64 `json:"gamma"`        // StepLR factor (0.1 IU, 0.8 MIMIC)
	Seed        uint64  `json:"seed"`         // dropout masks derive from it
	Patience    int     `json:"early_stop"`   // epochs without improvement before stopping (50); 0 = never
	// FreezeExtractor keeps the visual extractor fixed (inference mode) and
	// trains the encoder–decoder on its patch features, computed once per
	// study and kept in memory, and on disk in FeatureCache when that is set.
	// The images must then come from an evaluation transform (no random
	// crop or flip), so that a study's features do not change.
	FreezeExtractor bool   `json:"freeze_extractor"`
	FeatureCache    string `json:"-"`
	// CalibrateBatches, with FreezeExtractor, is a data-dependent
	// initialisation for an extractor that was never trained: before the
	// first epoch it re-estimates the extractor's batch-norm statistics from
	// that many training batches (forwards with batch statistics, momentum
	// 0.1, no gradients), computes the features of every training study
	// into the cache, and folds a per-channel standardisation of them into
	// att_embed's weights. 0 leaves both as loaded.
	CalibrateBatches int `json:"calibrate_batches"`
	// CheckpointDir, when set, receives last.radgen (with the trainer's
	// state, for Resume) after every epoch and best.radgen when the
	// validation monitor improves.
	CheckpointDir string `json:"-"`
}

// R2GenIUXrayTraining returns R2Gen's IU X-Ray settings (run_iu_xray.sh).
func R2GenIUXrayTraining() TrainConfig {
	return TrainConfig{Epochs: 100, LRVisual: 5e-5, LR: 1e-4, WeightDecay: 5e-5, AMSGrad: true, ClipValue: 0.1,
		StepSize: 50, Gamma: 0.1, Seed: 9223, Patience: 50}
}

// R2GenMIMICCXRTraining returns R2Gen's MIMIC-CXR settings (run_mimic_cxr.sh).
func R2GenMIMICCXRTraining() TrainConfig {
	c := R2GenIUXrayTraining()
	c.Epochs, c.StepSize, c.Gamma, c.Seed = 30, 1, 0.8, 456789
	return c
}

// Progress reports the trainer's position after each step.
type Progress struct {
	Epoch  int // epoch, from 0
	Epochs int // epochs of the run
	Step   int // optimiser steps of the run so far, this one included
	// Batch counts the batches done in this epoch, this one included:
	// from 1 to Batches, so Batch == Batches on the epoch's last.
	Batch   int
	Batches int     // batches per epoch
	Loss    float64 // this batch's training loss
	// EpochLoss is the mean loss of the epoch's batches so far; on its
	// last batch, the epoch's loss (EpochResult.Loss).
	EpochLoss float64
	Elapsed   time.Duration // since the epoch began
}

// EpochResult summarises an epoch.
type EpochResult struct {
	Epoch    int
	Loss     float64            // mean training loss
	Monitor  float64            // the validation monitor (NaN without validation)
	Scores   map[string]float64 // everything the validator returned
	Improved bool
}

// Validator scores the model after an epoch; the first result is the
// monitor to maximise (R2Gen: BLEU-4 on the validation split).
type Validator func(ctx context.Context, m *Model, epoch int) (monitor float64, scores map[string]float64, err error)

// Trainer fits a Model to a dataset with R2Gen's recipe: masked NLL,
// Adam with amsgrad and L2 weight decay in two parameter groups, clipping
// by value, StepLR per epoch, a validation monitor with early stopping, and
// atomic checkpoints from which a run resumes bit for bit.
//
// A Trainer holds the model exclusively during each step; Generate calls on
// the same model wait for the step to finish. It keeps the memory of a
// step's results and gradients for the next step (a radgen.StepMemory), so
// that a step of the shapes of an earlier one takes no fresh memory for
// them; that memory is held as long as the Trainer is.
type Trainer struct {
	model    *Model
	cfg      TrainConfig
	loader   *data.Loader
	opt      *optim.Adam
	sched    *optim.StepLR
	validate Validator
	progress func(Progress)
	logger   *slog.Logger
	// ws holds the memory of a step's results and gradients for the next
	// step (radgen.StepMemory): once warm, a step of the same shapes takes
	// no fresh memory for them.
	ws *radgen.StepMemory

	epoch, step int
	best        float64
	notImproved int
	history     []EpochResult
	cache       *featureCache
}

// TrainerOption configures a Trainer.
type TrainerOption func(*Trainer) error

// WithValidator sets the per-epoch validation (without one, every epoch
// counts as an improvement and best.radgen follows last.radgen).
func WithValidator(v Validator) TrainerOption {
	return func(t *Trainer) error { t.validate = v; return nil }
}

// WithProgress calls f after every optimiser step (examples draw progress
// bars with it). f runs on the training goroutine and should be quick.
func WithProgress(f func(Progress)) TrainerOption {
	return func(t *Trainer) error { t.progress = f; return nil }
}

// WithTrainLogger sends the trainer's logs to l.
func WithTrainLogger(l *slog.Logger) TrainerOption {
	return func(t *Trainer) error {
		if l == nil {
			return errors.New("memtrans: nil logger")
		}
		t.logger = l
		return nil
	}
}

// NewTrainer prepares training of m on the batches of train.
func NewTrainer(m *Model, cfg TrainConfig, train *data.Loader, opts ...TrainerOption) (*Trainer, error) {
	if m == nil || train == nil {
		return nil, errors.New("memtrans: NewTrainer needs a model and a loader")
	}
	if cfg.Epochs <= 0 || cfg.LR < 0 || cfg.LRVisual < 0 || cfg.WeightDecay < 0 || cfg.ClipValue < 0 || cfg.ClipNorm < 0 || cfg.Patience < 0 {
		return nil, fmt.Errorf("%w: training settings %+v", ErrConfig, cfg)
	}
	if cfg.StepSize <= 0 {
		cfg.StepSize, cfg.Gamma = math.MaxInt32, 1
	}
	t := &Trainer{model: m, cfg: cfg, loader: train, logger: m.logger, best: math.Inf(-1), ws: radgen.NewStepMemory()}
	for _, o := range opts {
		if err := o(t); err != nil {
			return nil, err
		}
	}
	params := radgen.Trainable(m)
	if cfg.FreezeExtractor {
		kept := params[:0]
		for _, p := range params {
			if !hasPrefix(p.Name, "visual_extractor.") {
				kept = append(kept, p)
			}
		}
		params = kept
		t.cache = &featureCache{dir: cfg.FeatureCache, mem: map[string]*radgen.Tensor{}}
	}
	groups := optim.R2GenGroups(params, cfg.LRVisual, cfg.LR, cfg.WeightDecay)
	nonEmpty := groups[:0]
	for _, g := range groups {
		if len(g.Params) > 0 {
			nonEmpty = append(nonEmpty, g)
		}
	}
	opt, err := optim.NewAdam(nonEmpty, optim.WithAMSGrad(cfg.AMSGrad))
	if err != nil {
		return nil, err
	}
	t.opt = opt
	if t.sched, err = optim.NewStepLR(opt, cfg.StepSize, cfg.Gamma); err != nil {
		return nil, err
	}
	return t, nil
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Epoch returns the number of completed epochs.
func (t *Trainer) Epoch() int { return t.epoch }

// History returns the results of the completed epochs.
func (t *Trainer) History() []EpochResult { return append([]EpochResult(nil), t.history...) }

// Run trains until cfg.Epochs epochs are done, the monitor has not improved
// for cfg.Patience epochs, or ctx is done (then it returns ctx.Err(); the
// last completed epoch is checkpointed).
func (t *Trainer) Run(ctx context.Context) error {
	if err := t.calibrate(ctx); err != nil {
		return err
	}
	for t.epoch < t.cfg.Epochs {
		res, err := t.RunEpoch(ctx)
		if err != nil {
			return err
		}
		if t.cfg.Patience > 0 && t.notImproved > t.cfg.Patience {
			t.logger.LogAttrs(ctx, slog.LevelInfo, "early stop", slog.Int("epoch", res.Epoch), slog.Float64("best", t.best))
			break
		}
	}
	return nil
}

// RunEpoch trains one epoch, validates, steps the schedule and writes the
// checkpoints.
func (t *Trainer) RunEpoch(ctx context.Context) (EpochResult, error) {
	start := time.Now()
	res := EpochResult{Epoch: t.epoch, Monitor: math.NaN()}
	var total float64
	n, batches := 0, t.loader.Len()
	for batch, err := range t.loader.Epoch(ctx, t.epoch) {
		if err != nil {
			return res, err
		}
		loss, err := t.Step(ctx, batch)
		if err != nil {
			return res, err
		}
		total += loss
		n++
		if t.progress != nil {
			t.progress(Progress{Epoch: t.epoch, Step: t.step, Batch: n, Batches: batches, Epochs: t.cfg.Epochs, Loss: loss, EpochLoss: total / float64(n), Elapsed: time.Since(start)})
		}
	}
	if n > 0 {
		res.Loss = total / float64(n)
	}
	res.Improved = true
	if t.validate != nil {
		mon, scores, err := t.validate(ctx, t.model, t.epoch)
		if err != nil {
			return res, fmt.Errorf("memtrans: validation after epoch %d: %w", t.epoch, err)
		}
		res.Monitor, res.Scores = mon, scores
		res.Improved = mon > t.best
	}
	if res.Improved {
		t.best, t.notImproved = res.Monitor, 0
	} else {
		t.notImproved++
	}
	t.sched.Step()
	t.epoch++
	t.history = append(t.history, res)
	t.logger.LogAttrs(ctx, slog.LevelInfo, "epoch", slog.Int("epoch", res.Epoch), slog.Float64("loss", res.Loss),
		slog.Float64("monitor", res.Monitor), slog.Bool("improved", res.Improved), slog.Duration("took", time.Since(start)))
	if dir := t.cfg.CheckpointDir; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return res, err
		}
		if err := writeFileAtomic(filepath.Join(dir, "last.radgen"), t.SaveState); err != nil {
			return res, fmt.Errorf("memtrans: checkpoint: %w", err)
		}
		if res.Improved {
			if err := t.model.SaveFile(filepath.Join(dir, "best.radgen")); err != nil {
				return res, fmt.Errorf("memtrans: checkpoint: %w", err)
			}
		}
	}
	return res, nil
}

// calibrate runs the data-dependent initialisation of a fresh
// frozen-extractor run (see TrainConfig.CalibrateBatches): batch-norm
// statistics from CalibrateBatches batches, then the features of every
// training study into the cache, then att_embed standardised over them.
func (t *Trainer) calibrate(ctx context.Context) error {
	if !t.cfg.FreezeExtractor || t.cfg.CalibrateBatches <= 0 || t.epoch != 0 || t.step != 0 {
		return nil
	}
	m := t.model
	// 1. Batch norm: forwards with batch statistics update the running ones.
	err := func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		g := radgen.NoGrad(radgen.Train(t.cfg.Seed))
		n := 0
		for epoch := 0; n < t.cfg.CalibrateBatches; epoch++ {
			seen := 0
			for b, err := range t.loader.Epoch(ctx, -1-epoch) {
				if err != nil {
					return err
				}
				if n == t.cfg.CalibrateBatches {
					break
				}
				if b.Images == nil || b.Views != m.cfg.Views {
					return fmt.Errorf("memtrans: calibration batch has %d views, the model takes %d", b.Views, m.cfg.Views)
				}
				m.extractor.Forward(g, radgen.FromFloat32(b.Images, b.Size(), b.Views, 3, b.Height, b.Width).To(m.device))
				n++
				seen++
			}
			if seen == 0 {
				return errors.New("memtrans: no training batches to calibrate batch norm with")
			}
		}
		m.extractor.ResNet.Refold()
		return nil
	}()
	if err != nil {
		return err
	}
	// 2. Every training study's features, once, into the cache.
	for b, err := range t.loader.Epoch(ctx, 0) {
		if err != nil {
			return err
		}
		if _, err := t.frozenFeatures(ctx, b); err != nil {
			return err
		}
	}
	// 3. Standardise what att_embed sees: fold each channel's mean μ and
	// std σ over the cached features into its weights, W' = W/σ,
	// b' = b − W'μ.
	feat := m.cfg.visualWidth()
	sum := make([]float64, feat)
	sq := make([]float64, feat)
	count := 0
	for _, x := range t.cache.mem {
		d := x.To(radgen.CPU).Data()
		for i := 0; i+feat <= len(d); i += feat {
			for c, v := range d[i : i+feat] {
				sum[c] += float64(v)
				sq[c] += float64(v) * float64(v)
			}
			count++
		}
	}
	if count > 1 {
		m.mu.Lock()
		ve, ok := m.net.(arch.VisualEmbedder)
		if !ok {
			m.mu.Unlock()
			return fmt.Errorf("memtrans: calibration: the %s architecture has no linear visual embedding (arch.VisualEmbedder)", m.cfg.Architecture())
		}
		emb := ve.VisualEmbedding()
		// Read and write the weights on the CPU, wherever they live.
		wt, bt := emb.Weight.To(radgen.CPU).Clone(), emb.Bias.To(radgen.CPU).Clone()
		w, bias := wt.Data(), bt.Data()
		out := emb.Weight.Dim(0)
		for c := 0; c < feat; c++ {
			mu := sum[c] / float64(count)
			sd := math.Sqrt(max(sq[c]/float64(count)-mu*mu, 0)) + 1e-3
			for o := 0; o < out; o++ {
				w[o*feat+c] = float32(float64(w[o*feat+c]) / sd)
				bias[o] -= float32(float64(w[o*feat+c]) * mu)
			}
		}
		err := radgen.LoadParams(emb, radgen.MapSource{"weight": wt, "bias": bt}, "")
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("memtrans: calibration: %w", err)
		}
	}
	t.logger.LogAttrs(ctx, slog.LevelInfo, "calibrated batch norm and att_embed", slog.Int("batches", t.cfg.CalibrateBatches), slog.Int("studies", len(t.cache.mem)))
	return nil
}

// stepSeed derives the dropout seed of a global step, so a resumed run
// draws the same masks as an uninterrupted one.
func (t *Trainer) stepSeed() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "radgen-dropout/%d/%d", t.cfg.Seed, t.step)
	return h.Sum64()
}

// Step runs one optimiser step on a batch and returns its loss.
func (t *Trainer) Step(ctx context.Context, b *data.Batch) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m := t.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	B, T := b.Size(), b.SeqLen
	if B == 0 || T < 2 {
		return 0, fmt.Errorf("memtrans: batch of %d studies with sequence length %d", B, T)
	}
	if b.Images == nil || b.Views != m.cfg.Views {
		return 0, fmt.Errorf("memtrans: batch has %d views per study (images %v), the model takes %d", b.Views, b.Images != nil, m.cfg.Views)
	}
	dev := moduleDevice(m.net)
	// The step's results and gradients take the memory of the step
	// before's, which is done with: its loss was read, its optimiser step
	// taken and its gradients dropped.
	g := radgen.NewGraph(radgen.Train(t.stepSeed()), radgen.InStepMemory(t.ws))
	var feats *radgen.Tensor
	var err error
	if t.cfg.FreezeExtractor {
		feats, err = t.frozenFeatures(ctx, b)
		if err != nil {
			return 0, err
		}
		feats = feats.To(dev)
	} else {
		if ed := moduleDevice(m.extractor); ed != dev {
			return 0, fmt.Errorf("memtrans: training the extractor on %v with the encoder–decoder on %v: move both to one device or freeze the extractor", ed, dev)
		}
		imgs := radgen.FromFloat32(b.Images, B, b.Views, 3, b.Height, b.Width).To(dev)
		feats, _ = m.extractor.Forward(g, imgs)
	}
	in := make([]int, 0, B*(T-1))
	targets := make([]int, 0, B*(T-1))
	mask := make([]float32, 0, B*(T-1))
	for i := 0; i < B; i++ {
		row := b.Targets[i*T : (i+1)*T]
		in = append(in, row[:T-1]...)
		targets = append(targets, row[1:]...)
		mask = append(mask, b.Masks[i*T+1:(i+1)*T]...)
	}
	loss, err := m.net.Loss(g, feats, arch.Batch{In: in, Targets: targets, Mask: mask, Size: B, Len: T - 1})
	if err != nil {
		return 0, err
	}
	lv := float64(loss.To(radgen.CPU).Data()[0])
	if math.IsNaN(lv) || math.IsInf(lv, 0) {
		return 0, fmt.Errorf("memtrans: loss is %v at step %d", lv, t.step)
	}
	if err := g.Backward(loss); err != nil {
		return 0, err
	}
	params := t.opt.Params()
	if t.cfg.ClipValue > 0 {
		optim.ClipGradValue(params, t.cfg.ClipValue)
	}
	if t.cfg.ClipNorm > 0 {
		if _, err := optim.ClipGradNorm(params, t.cfg.ClipNorm, 2); err != nil {
			return 0, err
		}
	}
	t.opt.Step()
	t.opt.ZeroGrad()
	// Gradients of frozen parameters (if any were computed) are dropped too.
	for _, p := range radgen.Trainable(m) {
		p.Tensor.ZeroGrad()
	}
	m.extractor.ResNet.Refold()
	if m.half != nil {
		m.half.markStale()
	}
	t.step++
	return lv, nil
}

// moduleDevice returns the device of m's first tensor (the CPU for a
// module without any).
func moduleDevice(m radgen.Module) radgen.Device {
	dev, seen := radgen.CPU, false
	m.VisitParams(func(_ string, t *radgen.Tensor) {
		if !seen {
			dev, seen = t.Device(), true
		}
	})
	return dev
}

// frozenFeatures returns the patch features of a batch from the frozen
// extractor: from the cache (memory, then disk) when present, the misses
// extracted together in one call.
func (t *Trainer) frozenFeatures(ctx context.Context, b *data.Batch) (*radgen.Tensor, error) {
	m := t.model
	B := b.Size()
	per := b.Views * 3 * b.Height * b.Width
	rows := make([]*radgen.Tensor, B)
	var miss []int
	for i := 0; i < B; i++ {
		if x, ok := t.cache.get(b.Examples[i].ID); ok {
			rows[i] = x.To(m.device) // a cache read from disk is on the CPU
		} else {
			miss = append(miss, i)
		}
	}
	if len(miss) > 0 {
		imgs := radgen.Zeros(len(miss), b.Views, 3, b.Height, b.Width)
		for j, i := range miss {
			copy(imgs.Data()[j*per:(j+1)*per], b.Images[i*per:(i+1)*per])
		}
		x, _, err := m.extractor.Extract(ctx, imgs.To(m.device))
		if err != nil {
			return nil, err
		}
		g := radgen.NoGrad()
		for j, i := range miss {
			rows[i] = g.Slice(x, 0, j, j+1)
			if err := t.cache.put(b.Examples[i].ID, rows[i]); err != nil {
				return nil, err
			}
		}
	}
	return radgen.NoGrad().Concat(0, rows...), nil
}

// Trainer state in a checkpoint's metadata.
const (
	metaTrainer = "radgen.trainer"
	optimPrefix = "trainer.optim."
)

type trainerState struct {
	Epoch, Step, NotImproved int
	Best                     string // float64 as text: JSON has no -Inf
	Config                   TrainConfig
	History                  []EpochResult
}

// SaveState writes the model and the whole training state (optimizer
// moments and step counts, schedule, position, monitor) in the native
// format; ResumeTrainer continues from it.
func (t *Trainer) SaveState(w io.Writer) error {
	st := &optim.State{Adam: t.opt.State(), Scheduler: t.sched.State()}
	tensors, meta, err := st.Encode(optimPrefix)
	if err != nil {
		return err
	}
	hist := make([]EpochResult, len(t.history))
	for i, h := range t.history {
		hist[i] = h
		if math.IsNaN(h.Monitor) {
			hist[i].Monitor = -1 // JSON has no NaN
		}
	}
	ts, err := json.Marshal(trainerState{Epoch: t.epoch, Step: t.step, NotImproved: t.notImproved,
		Best: strconv.FormatFloat(t.best, 'g', -1, 64), Config: t.cfg, History: hist})
	if err != nil {
		return err
	}
	if meta == nil {
		meta = map[string]string{}
	}
	meta[metaTrainer] = string(ts)
	t.model.mu.RLock()
	defer t.model.mu.RUnlock()
	return t.model.save(w, tensors, meta)
}

// ResumeTrainer loads a checkpoint written by SaveState (last.radgen) and
// returns the model and a trainer positioned after its last epoch: a resumed
// run equals an uninterrupted one bit for bit. cfg may change only what
// does not affect the arithmetic (Epochs, Patience, CheckpointDir,
// FeatureCache); pass the zero TrainConfig to keep the saved one.
func ResumeTrainer(r io.Reader, train *data.Loader, cfg TrainConfig, opts ...TrainerOption) (*Model, *Trainer, error) {
	m, ck, err := load(r, nil)
	if err != nil {
		return nil, nil, err
	}
	raw, ok := ck.metadata[metaTrainer]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no trainer state (a model-only checkpoint?)", ErrCheckpoint)
	}
	var st trainerState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, nil, fmt.Errorf("%w: trainer state: %v", ErrCheckpoint, err)
	}
	saved := st.Config
	if cfg.Epochs != 0 {
		saved.Epochs, saved.Patience, saved.CheckpointDir, saved.FeatureCache = cfg.Epochs, cfg.Patience, cfg.CheckpointDir, cfg.FeatureCache
	}
	t, err := NewTrainer(m, saved, train, opts...)
	if err != nil {
		return nil, nil, err
	}
	ost, err := optim.DecodeState(ck.file, optimPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := t.opt.SetState(ost.Adam); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if ost.Scheduler != nil {
		if err := t.sched.SetState(ost.Scheduler); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
	}
	t.epoch, t.step, t.notImproved, t.history = st.Epoch, st.Step, st.NotImproved, st.History
	if t.best, err = strconv.ParseFloat(st.Best, 64); err != nil {
		return nil, nil, fmt.Errorf("%w: best monitor %q", ErrCheckpoint, st.Best)
	}
	return m, t, nil
}

// featureCache keeps frozen-extractor patch features by study: in memory,
// and on disk (one safetensors file per study) when dir is set.
type featureCache struct {
	dir string
	mem map[string]*radgen.Tensor
}

func (c *featureCache) get(key string) (*radgen.Tensor, bool) {
	if x, ok := c.mem[key]; ok {
		return x, true
	}
	x, ok := data.ReadFeatureCache(c.dir, key)
	if ok {
		c.mem[key] = x
	}
	return x, ok
}

func (c *featureCache) put(key string, x *radgen.Tensor) error {
	c.mem[key] = x
	if c.dir == "" {
		return nil
	}
	return data.WriteFeatureCache(c.dir, key, x)
}
