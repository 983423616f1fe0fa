package arch_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/memtrans/arch"
	"github.com/radgen/radgen/memtrans/m2"
	"github.com/radgen/radgen/memtrans/metrans"
	"github.com/radgen/radgen/memtrans/r2gen"
)

// features returns b studies of n random patches of width d.
func features(b, n, d int, seed uint64) *radgen.Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := radgen.Zeros(b, n, d)
	data := x.Data()
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	return x
}

// The built-in architectures' decodings equal their teacher forcing under
// beam search with reorders.
func TestTeacherForcingGapBuiltins(t *testing.T) {
	const vocab, width, patches = 30, 16, 12
	for _, c := range []arch.Config{
		r2gen.Tiny(vocab, width),
		m2.Tiny(vocab, width),
		metrans.Tiny(vocab, width, patches),
	} {
		net, err := c.New(7)
		if err != nil {
			t.Fatal(err)
		}
		gap, tokens, err := arch.TeacherForcingGap(context.Background(), net, features(3, patches, width, 1), 3, 12)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		t.Logf("%T: max |Δ log p| = %.2g over %d tokens", c, gap, tokens)
		if tokens < 3*3 || gap > 1e-4 {
			t.Errorf("%T: gap %g over %d tokens", c, gap, tokens)
		}
	}
}

// broken is an architecture whose decoding does not follow beam ancestry:
// its rows are reordered backwards.
type broken struct{ arch.EncoderDecoder }

func (b broken) StartDecoding(feats *radgen.Tensor, opts ...radgen.GraphOption) (decode.Model, error) {
	d, err := b.EncoderDecoder.StartDecoding(feats, opts...)
	return backwards{d}, err
}

type backwards struct{ decode.Model }

func (d backwards) Reorder(src []int) error {
	rev := slices.Clone(src)
	slices.Reverse(rev)
	return d.Model.Reorder(rev)
}

// The check can fail: a decoding that keeps its rows' states in place of
// reordering them differs from teacher forcing.
func TestTeacherForcingGapFindsABrokenDecoding(t *testing.T) {
	const vocab, width, patches = 30, 16, 12
	net, err := r2gen.Tiny(vocab, width).New(7)
	if err != nil {
		t.Fatal(err)
	}
	gap, _, err := arch.TeacherForcingGap(context.Background(), broken{net}, features(2, patches, width, 2), 3, 12)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broken decoding: max |Δ log p| = %.2g", gap)
	if gap < 1e-3 {
		t.Fatalf("a decoding that ignores Reorder passes the check (gap %g)", gap)
	}
}

func TestTeacherForcingGapBadArguments(t *testing.T) {
	net, err := r2gen.Tiny(30, 16).New(7)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"nil features": func() error { _, _, err := arch.TeacherForcingGap(ctx, net, nil, 3, 10); return err },
		"rank 2":       func() error { _, _, err := arch.TeacherForcingGap(ctx, net, radgen.Zeros(4, 16), 3, 10); return err },
		"beam 0":       func() error { _, _, err := arch.TeacherForcingGap(ctx, net, features(1, 4, 16, 3), 0, 10); return err },
		"past the table": func() error {
			_, _, err := arch.TeacherForcingGap(ctx, net, features(1, 4, 16, 3), 3, 1<<20)
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
