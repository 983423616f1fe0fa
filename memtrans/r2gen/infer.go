package r2gen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/mesh"
)

// InferConfig derives a Config from the tensor shapes of an R2Gen
// state_dict (names relative to "encoder_decoder."). Head counts cannot be
// read from weights and are given; dropout rates take R2Gen's defaults and
// maxSeqLen is the longest report in tokens. The layers must be numbered
// 0, 1, … without gaps; the result is validated (the facade then checks it
// against its budget before anything is allocated).
func InferConfig(shapes map[string][]int, heads, memoryHeads, maxSeqLen int) (Config, error) {
	get := func(name string, rank int) ([]int, error) {
		s, ok := shapes[name]
		if !ok {
			return nil, fmt.Errorf("%w: weights lack %q", arch.ErrConfig, name)
		}
		if len(s) != rank {
			return nil, fmt.Errorf("%w: %q has shape %v", arch.ErrConfig, name, s)
		}
		return s, nil
	}
	c := Config{Heads: heads, MemoryHeads: memoryHeads, Dropout: 0.1, EmbedDrop: 0.5, MaxSeqLen: maxSeqLen}
	att, err := get("att_embed.0.weight", 2)
	if err != nil {
		return c, err
	}
	c.DModel, c.DVisual = att[0], att[1]
	ff, err := get("model.encoder.layers.0.feed_forward.w_1.weight", 2)
	if err != nil {
		return c, err
	}
	c.DFF = ff[0]
	logit, err := get("logit.weight", 2)
	if err != nil {
		return c, err
	}
	c.Vocab = logit[0]
	pe, err := get("model.tgt_embed.1.pe", 3)
	if err != nil {
		return c, err
	}
	c.PositionLen = pe[1]
	for name := range shapes {
		rest, ok := strings.CutPrefix(name, "model.encoder.layers.")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest[:strings.IndexByte(rest+".", '.')])
		if err == nil && i+1 > c.Layers {
			c.Layers = i + 1
		}
	}
	// Every layer up to the highest index must be there, in the encoder
	// and the decoder.
	if n := countLayers(shapes, "model.encoder.layers.", ".feed_forward.w_1.weight"); n != c.Layers || c.Layers > maxLayers {
		return c, fmt.Errorf("%w: num_layers: the weights name encoder layer %d but hold layers 0 to %d only", arch.ErrConfig, c.Layers-1, n-1)
	}
	if n := countLayers(shapes, "model.decoder.layers.", ".feed_forward.w_1.weight"); n != c.Layers {
		return c, fmt.Errorf("%w: num_layers: %d encoder layers but %d decoder layers", arch.ErrConfig, c.Layers, n)
	}
	switch g, ok := shapes["model.decoder.layers.0.sublayer.0.norm.mlp_gamma.0.weight"]; {
	case ok && len(g) == 2 && c.DModel > 0:
		c.Variant = VariantR2Gen
		c.MemorySlots = g[1] / c.DModel
	case shapes["model.rm.W.weight"] != nil || (shapes["model.m2m.bank.w1.weight"] != nil && logit[1] > c.DModel):
		c.Variant = VariantBaseRM
		if c.DModel > 0 {
			c.MemorySlots = (logit[1] - c.DModel) / c.DModel
		}
	default:
		c.Variant = VariantBase
	}
	// The variants' own tensors (names of Model.VisitParams).
	if w, ok := shapes["model.m2m.bank.w1.weight"]; ok && len(w) == 2 {
		c.Memory, c.MemorySlots, c.Mem2MemHidden = MemoryMem2Mem, w[0], w[1]
		if c.Mem2MemHidden == c.DModel {
			c.Mem2MemHidden = 0
		}
	}
	switch {
	case shapes["model.views.0.mix.0.weight"] != nil:
		c.Routing = mesh.RoutingFMA
	case shapes["model.views.0.score.weight"] != nil:
		c.Routing = mesh.RoutingAMA
	case shapes["model.views.0.norm.gamma"] != nil:
		// GCA, GPA and FGA have the same tensors.
		return c, fmt.Errorf("%w: the routing of multi-view weights (gca, gpa or fga) cannot be read from their shapes", arch.ErrConfig)
	}
	if c.MaxSeqLen <= 0 || c.MaxSeqLen > c.PositionLen {
		c.MaxSeqLen = min(60, c.PositionLen)
	}
	if err := c.validateShape(); err != nil {
		return c, err
	}
	return c, c.validateHard()
}

// countLayers counts the layers prefix+i+suffix that exist, from 0.
func countLayers(shapes map[string][]int, prefix, suffix string) int {
	n := 0
	for shapes[prefix+strconv.Itoa(n)+suffix] != nil {
		n++
	}
	return n
}
