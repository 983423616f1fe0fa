package r2gen

import "github.com/radgen/radgen/memtrans/arch"

// cost is a model's size: parameter and activation values (upper
// estimates).
type cost struct{ params, acts float64 }

// cost estimates R2Gen's encoder–decoder over p patches.
func (c Config) cost(p int) cost {
	d, f, l := float64(c.DModel), float64(c.DFF), float64(c.Layers)
	v, s, h := float64(c.Vocab), float64(max(c.MemorySlots, 0)), float64(c.Heads)
	da, t, n := float64(c.mem2memHidden()), float64(c.MaxSeqLen), float64(p)
	params := float64(c.DVisual)*d + d + // att_embed
		l*(12*d*d+4*d*f+40*d+2*f) + // encoder and decoder layers
		v*d*(2+s) + 2*v + float64(c.PositionLen)*d + // embeddings, logits, positional table
		16*d*d + 8*d*da + 4*s*d + // memory
		l*l*4*d*d // multi-view routing
	if c.Variant == VariantR2Gen {
		params += l * 3 * 2 * (s*d*d + d*d + 2*d) // MCLN's MLPs
	}
	// A training step keeps every layer's attention and feed-forward
	// values for the backward pass.
	acts := l*(h*(n*n+t*n+t*t)+(n+t)*(f+12*d)) + t*v*3 + t*s*d*6
	return cost{params, acts}
}

// FieldCost implements arch.FieldCoster: budget errors name the field
// that makes a model too large.
func (c Config) FieldCost() ([]arch.Field, func(patches int) arch.Cost) {
	return []arch.Field{{Name: "d_model", Value: &c.DModel, Reference: 512}, {Name: "d_ff", Value: &c.DFF, Reference: 2048}, {Name: "num_heads", Value: &c.Heads, Reference: 8}, {Name: "num_layers", Value: &c.Layers, Reference: 3},
		{Name: "d_vf", Value: &c.DVisual, Reference: 2048}, {Name: "vocab", Value: &c.Vocab, Reference: 10000}, {Name: "rm_num_slots", Value: &c.MemorySlots, Reference: 40}, {Name: "m2m_hidden", Value: &c.Mem2MemHidden, Reference: 512},
		{Name: "max_seq_length", Value: &c.MaxSeqLen, Reference: 100}, {Name: "pe_len", Value: &c.PositionLen, Reference: 5000}}, func(p int) arch.Cost { return c.Cost(p) }
}
