//go:build cuda

package cuda

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The training and optimiser kernels round every float32 operation as the
// host engine does: their PTX holds no contractible float32 add, subtract
// or multiply (one that ptxas may fuse into an FMA; the kernels write
// __fadd_rn and friends, which become add.rn.f32 and are never fused), and
// the only fused multiply-adds are the Adam step's __fmaf_rn.
func TestTrainingKernelsRoundAsTheHost(t *testing.T) {
	bodies := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\n}`).FindAllStringSubmatch(ptxSource, -1) {
		bodies[m[1]] = m[2]
	}
	contractible := regexp.MustCompile(`\s(add|sub|mul|fma\.rn|div\.approx|div\.full|sqrt\.approx)\.f32\s`)
	for k := kFill; k < numKernels; k++ {
		name := kernelNames[k]
		body, ok := bodies[name]
		if !ok {
			t.Errorf("%s: not in the PTX", name)
			continue
		}
		for _, m := range contractible.FindAllStringSubmatch(body, -1) {
			if k == kAdam && m[1] == "fma.rn" {
				continue
			}
			t.Errorf("%s: %s", name, strings.TrimSpace(m[0]))
		}
	}
	if !strings.Contains(bodies["rg_adam_f32"], "fma.rn.f32") {
		t.Error("rg_adam_f32 has no fused multiply-add")
	}
}

// ptxParams returns, by entry point, the byte size of each kernel
// parameter as the PTX declares it.
func ptxParams(t *testing.T) map[string][]int {
	out := map[string][]int{}
	entry := regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\)`)
	param := regexp.MustCompile(`\.param (?:\.align \d+ )?\.(u64|u32|f32|f64|s32|s64|b8) \w+(?:\[(\d+)\])?`)
	for _, m := range entry.FindAllStringSubmatch(ptxSource, -1) {
		var sizes []int
		for _, p := range param.FindAllStringSubmatch(m[2], -1) {
			switch {
			case p[2] != "":
				n, err := strconv.Atoi(p[2])
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, n)
			case strings.HasSuffix(p[1], "64"):
				sizes = append(sizes, 8)
			default:
				sizes = append(sizes, 4)
			}
		}
		out[m[1]] = sizes
	}
	return out
}

// Each launcher of a training kernel fills the kernel's parameters: one
// 8-byte slot per scalar (a 4-byte one in the low half), and a struct
// parameter, always the last, in as many slots as its bytes take. Row
// kernels get a power-of-two block (block_sum_d's tree). Runs without a GPU:
// the engine records its launches.
func TestTrainingLaunchers(t *testing.T) {
	params := ptxParams(t)
	type launch struct {
		k           kernel
		grid, block dim3
		a           args
	}
	var got []launch
	e := fakeEngine()
	e.launched = func(k kernel, grid, block dim3, a *args) error {
		got = append(got, launch{k, grid, block, *a})
		return nil
	}
	const p = Ptr(1 << 20)
	g := ConvGeom{H: 9, W: 8, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 0, DilH: 1, DilW: 2}
	calls := []error{
		e.Fill(p, 1, 10),
		e.Axpy(p, p, 2, 10),
		e.Clamp(p, 3, 10),
		e.Binary(OpMaskFill, p, p, p, []int{2, 3, 4}, []int{12, 4, 1}, []int{0, 1, 0}, -5),
		e.Permute(p, p, []int{2, 3, 4}, []int{2, 0, 1}),
		e.ReduceSum(p, p, []int{3, 1000}, []int{1, 0}, true),
		e.ReduceSum(p, p, []int{3, 4, 5}, []int{40, 0, 2}, false), // gaps: a Fill first
		e.ActivationBackward(ActSigmoid, p, p, p, 10),
		e.SoftmaxBackward(p, p, p, 3, 700, true),
		e.Normalize(p, p, p, 3, 70, 1e-6, NormR2Gen),
		e.NormalizeBackward(p, p, p, p, 3, 3000, 1e-5, NormStandard),
		e.CopyStrided(p, 40, p, 0, 5, 33, true),
		e.ScatterAdd(p, p, p, 10, 300, 700),
		e.Im2col(p, 100, p, 3, g),
		e.Col2im(p, p, 100, 3, g),
		e.MaxPool(p, p, p, 4, g),
		e.MaxPoolBackward(p, p, p, 4, 72, 40),
		e.AdamStep(p, p, p, p, p, 10, AdamConsts{Beta1: 0.9, AMSGrad: true}),
	}
	for i, err := range calls {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	seen := map[kernel]bool{}
	for _, l := range got {
		name := kernelNames[l.k]
		seen[l.k] = true
		sizes, ok := params[name]
		if !ok {
			t.Errorf("%s: not in the PTX", name)
			continue
		}
		slots := 0
		for i, s := range sizes {
			if s > 8 && i != len(sizes)-1 {
				t.Errorf("%s: struct parameter %d is not the last", name, i)
			}
			if s == 4 && slots < l.a.n && l.a.v[slots]>>32 != 0 {
				t.Errorf("%s: parameter %d is 4 bytes, its slot holds %#x", name, i, uint64(l.a.v[slots]))
			}
			slots += (s + 7) / 8
		}
		if l.a.n != slots {
			t.Errorf("%s: launcher fills %d slots, the kernel's %d parameters take %d", name, l.a.n, len(sizes), slots)
		}
		if l.block.x*l.block.y*l.block.z > 1024 || l.grid.x == 0 || l.grid.y == 0 || l.grid.y > 65535 || l.grid.z == 0 {
			t.Errorf("%s: grid %v block %v", name, l.grid, l.block)
		}
		switch l.k {
		case kSoftmaxBackward, kNormalize, kNormalizeBackward, kReduceBlock:
			if b := l.block.x; b&(b-1) != 0 || l.block.y != 1 {
				t.Errorf("%s: block %v is not a power of two", name, l.block)
			}
		}
	}
	for k := kFill; k < numKernels; k++ {
		if !seen[k] {
			t.Errorf("%s: no launcher called it", kernelNames[k])
		}
	}
	// The rg_dims of the Binary launch, field by field.
	for _, l := range got {
		if l.k != kBinary {
			continue
		}
		var words []int32
		for _, v := range l.a.v[6:l.a.n] {
			words = append(words, int32(uint32(v)), int32(uint32(v>>32)))
		}
		want := []int32{3, 0, 2, 3, 4, 0, 0, 0, 0, 0, 12, 4, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
		if !slices.Equal(words, want) {
			t.Errorf("Binary's rg_dims: %v, want %v", words, want)
		}
	}
}

// offsets lists the offsets along each stride set of every element of
// shape, in row-major order.
func offsets(shape []int, strides [][]int) [][]int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	out := make([][]int, len(strides))
	idx := make([]int, len(shape))
	for range n {
		for k, st := range strides {
			o := 0
			for d, i := range idx {
				o += i * st[d]
			}
			out[k] = append(out[k], o)
		}
		for d := len(shape) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// collapse merges dimensions without changing which elements are visited
// or in which order.
func TestCollapse(t *testing.T) {
	for _, c := range []struct {
		shape   []int
		strides [][]int
		rank    int
	}{
		{[]int{2, 3, 4}, [][]int{{12, 4, 1}, {12, 4, 1}}, 1},
		{[]int{2, 3, 4}, [][]int{{12, 4, 1}, {0, 1, 0}}, 3},
		{[]int{2, 3, 4, 5}, [][]int{{60, 20, 5, 1}, {0, 0, 5, 1}}, 2},
		{[]int{1, 6, 1, 7, 1}, [][]int{{42, 7, 7, 1, 1}, {0, 1, 0, 0, 0}}, 2},
		{[]int{3, 1, 4}, [][]int{{1, 0, 3}}, 2},
		{[]int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, [][]int{{512, 256, 128, 64, 32, 16, 8, 4, 2, 1}}, 1},
		{[]int{1, 1}, [][]int{{1, 1}, {0, 0}}, 0},
	} {
		sh, st := collapse(c.shape, c.strides...)
		if len(sh) != c.rank {
			t.Errorf("collapse(%v, %v) = %v, want rank %d", c.shape, c.strides, sh, c.rank)
		}
		if got, want := offsets(sh, st), offsets(c.shape, c.strides); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("collapse(%v, %v) = %v %v visits %v, want %v", c.shape, c.strides, sh, st, got, want)
		}
	}
}
