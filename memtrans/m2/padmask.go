package m2

// M²'s encoder padding mask, bit for bit.
//
// MultiLevelEncoder.forward (encoders.py) masks the regions whose
// embedding sums to zero: (torch.sum(input, -1) == 0). MemoryAugmentedEncoder
// has already passed that input through fc → ReLU → Dropout → LayerNorm, and
// the entries of a layer-normalised row sum to zero up to rounding, so the
// mask is decided by the last bits of torch's float32 arithmetic. To give
// the same mask, AfterNormMask recomputes the LayerNorm and the sum exactly
// as torch's vectorised CPU kernels do with 8-lane (AVX2) vectors:
//
//   - aten/src/ATen/native/cpu/moments_utils.h RowwiseMoments: a Welford
//     update per vector lane over chunks of 16 vectors, merged by a cascade
//     and then lane by lane (plain multiplies and adds, no fused ones);
//   - aten/src/ATen/native/cpu/layer_norm_kernel.cpp: rstd = 1/sqrt(var +
//     eps), y = (x·rstd + (−rstd·mean))·γ + β, each multiply-add fused;
//   - aten/src/ATen/native/cpu/SumKernel.cpp: vectorized_inner_sum with
//     row_sum (4 vector accumulators, multi_row_sum's 4-level cascade),
//     then the torchLanes added in order after any scalar tail.
//
// Given the LayerNorm input that the reference computed, this reproduces
// the mask of the M² golden (3 regions of 60, none of them a zero-padded
// one). That input, ReLU(fc(x)), is rounded by whichever GEMM computes it:
// the reference's sgemm accumulated each output in k order with fused
// multiply-adds and added the bias last; radgen's AVX2 kernels do the same
// at the golden's size (k = 256, one block), its AVX-512 kernels sum k in
// blocks of 192 and its pure-Go kernels (on amd64) round every product,
// so they mask other regions: which rows are masked depends on the CPU
// (see PadAfterNorm).

import (
	"math"
	"math/bits"

	"github.com/radgen/radgen"
	"github.com/radgen/radgen/internal/kernels"
	"github.com/radgen/radgen/mesh"
)

const (
	torchVec   = 8  // floats per AVX2 vector
	torchChunk = 16 // moments_utils.h kChunkSize
	torchILP   = 4  // SumKernel.cpp row_sum ilp_factor
	torchLevel = 4  // SumKernel.cpp multi_row_sum num_levels
)

// AfterNormMask returns M²'s encoder mask (B, 1, 1, N), 0 = masked, for
// the input pre (B, N, D) of the encoder's input LayerNorm ln: the regions
// where torch.sum(ln(pre), -1) is exactly 0 in torch's float32 CPU
// arithmetic (see the file comment). pre may be float64; it is rounded to
// float32 first. The result is the same on every CPU for the same pre; pre
// itself, when a model computes it, is not (see PadAfterNorm).
func AfterNormMask(pre *radgen.Tensor, ln *mesh.LayerNorm) *radgen.Tensor {
	if pre.Rank() != 3 || pre.Dim(2) != ln.Weight.Dim(0) {
		panic("m2: AfterNormMask wants (B, N, D) input to a mesh.LayerNorm of width D")
	}
	b, n, d := pre.Dim(0), pre.Dim(1), pre.Dim(2)
	x := pre
	if x.Is64() {
		x = x.To32()
	}
	w, bias := ln.Weight.Float64s(), ln.Bias.Float64s()
	w32, b32 := make([]float32, d), make([]float32, d)
	for i := range d {
		w32[i], b32[i] = float32(w[i]), float32(bias[i])
	}
	mask := radgen.Zeros(b, 1, 1, n)
	md, xd := mask.Data(), x.Data()
	y := make([]float32, d)
	for r := range b * n {
		torchLayerNorm(y, xd[r*d:(r+1)*d], w32, b32, float32(ln.Eps))
		if torchSum(y) != 0 {
			md[r] = 1
		}
	}
	return mask
}

// ZeroRowMask returns the mask (B, 1, 1, N), 0 = masked, of the regions
// whose raw features (B, N, d_in) are all zero.
func ZeroRowMask(input *radgen.Tensor) *radgen.Tensor {
	b, n, w := input.Dim(0), input.Dim(1), input.Dim(2)
	mask := radgen.Zeros(b, 1, 1, n)
	md, v := mask.Data(), input.Float64s()
	for r := range b * n {
		zero := true
		for _, x := range v[r*w : (r+1)*w] {
			zero = zero && x == 0
		}
		if !zero {
			md[r] = 1
		}
	}
	return mask
}

// torchLayerNorm writes torch's float32 layer_norm of x into y.
func torchLayerNorm(y, x, w, b []float32, eps float32) {
	mean, variance := torchMoments(x)
	rstd := 1 / float32(math.Sqrt(float64(max(variance, 0)+eps)))
	shift := float32(-rstd * mean)
	for i, v := range x {
		y[i] = kernels.FMA32(kernels.FMA32(v, rstd, shift), w[i], b[i]) // _mm256_fmadd_ps twice
	}
}

// torchLanes is one AVX2 vector of float32.
type torchLanes [torchVec]float32

// torchMomentsAcc is a Welford accumulator: count, per-lane mean and M2.
type torchMomentsAcc struct {
	n      int
	m1, m2 torchLanes
}

// add merges (n, m1, m2) into a (AddMomentsVec).
func (a *torchMomentsAcc) add(n int, m1, m2 *torchLanes) {
	tot := a.n + n
	var c float32
	if tot != 0 {
		c = float32(n) / float32(tot)
	}
	old := float32(a.n)
	for l := range a.m1 {
		delta := m1[l] - a.m1[l]
		a.m1[l] += float32(delta * c)
		a.m2[l] += m2[l] + float32(float32(float32(delta*delta)*c)*old)
	}
	a.n = tot
}

// torchMoments is RowwiseMoments for float32 with 8-lane vectors: the mean
// and biased variance of x.
func torchMoments(x []float32) (mean, variance float32) {
	N := len(x)
	nv := N / torchVec
	chunks := (nv + torchChunk - 1) / torchChunk
	depth := torchCeilLog2(chunks)
	stk := make([]torchMomentsAcc, max(depth, 1))
	var recip [torchChunk]float32
	for i := range recip {
		recip[i] = 1 / float32(i+1)
	}
	for i := range chunks {
		cnt := min(torchChunk, nv-i*torchChunk)
		var m1, m2 torchLanes
		for j := range cnt {
			v := x[(i*torchChunk+j)*torchVec:]
			for l := range m1 {
				delta := v[l] - m1[l]
				m1[l] += float32(delta * recip[j])
				m2[l] += float32(delta * (v[l] - m1[l]))
			}
		}
		stk[0].add(cnt, &m1, &m2)
		mask := i + 1
		for j := 1; j < depth && mask&1 == 0; j++ {
			stk[j].add(stk[j-1].n, &stk[j-1].m1, &stk[j-1].m2)
			stk[j-1] = torchMomentsAcc{}
			mask >>= 1
		}
	}
	for i := 1; i < depth; i++ {
		stk[0].add(stk[i].n, &stk[i].m1, &stk[i].m2)
	}
	// Scalar tail, then the torchLanes merged one by one (AddMoments).
	m0 := 0
	var m1, m2 float32
	for _, v := range x[nv*torchVec:] {
		delta := v - m1
		m0++
		m1 += delta / float32(m0)
		m2 += float32(delta * (v - m1))
	}
	for l := range torchVec {
		tot := m0 + nv
		var c float32
		if tot != 0 {
			c = float32(nv) / float32(tot)
		}
		delta := stk[0].m1[l] - m1
		m1 += float32(c * delta)
		m2 += stk[0].m2[l] + float32(float32(float32(delta*delta)*c)*float32(m0))
		m0 = tot
	}
	return m1, m2 / float32(N)
}

// torchCeilLog2 is ATen's utils::CeilLog2: 1 for x ≤ 2, else ⌈log₂ x⌉.
func torchCeilLog2(x int) int {
	if x <= 2 {
		return 1
	}
	return bits.Len64(uint64(x - 1))
}

// torchSum is torch.sum of a contiguous float32 row on the CPU
// (vectorized_inner_sum with 8-lane vectors).
func torchSum(x []float32) float32 {
	nv := len(x) / torchVec
	acc := torchRowSum(x, nv)
	var total float32
	for _, v := range x[nv*torchVec:] {
		total += v
	}
	for _, v := range acc {
		total += v
	}
	return total
}

// torchRowSum is SumKernel.cpp's row_sum over nv vectors: multi_row_sum
// with 4 accumulators over the first ⌊nv/4⌋·4 vectors, the rest added to
// accumulator 0, then the accumulators added in order.
func torchRowSum(x []float32, nv int) torchLanes {
	rows := nv / torchILP
	p := torchMultiRowSum(x, rows)
	for i := rows * torchILP; i < nv; i++ {
		torchAddLanes(&p[0], x[i*torchVec:])
	}
	for k := 1; k < torchILP; k++ {
		torchAddLanes(&p[0], p[k][:])
	}
	return p[0]
}

// torchMultiRowSum is multi_row_sum<ilp = 4>: a cascade of 4 levels of
// accumulators that limits rounding error growth on long rows.
func torchMultiRowSum(x []float32, size int) [torchILP]torchLanes {
	power := max(4, torchCeilLog2(size)/torchLevel)
	step := 1 << power
	levelMask := step - 1
	var acc [torchLevel][torchILP]torchLanes
	row := func(i int) {
		for k := range torchILP {
			torchAddLanes(&acc[0][k], x[(i*torchILP+k)*torchVec:])
		}
	}
	i := 0
	for i+step <= size {
		for range step {
			row(i)
			i++
		}
		for j := 1; j < torchLevel; j++ {
			for k := range torchILP {
				torchAddLanes(&acc[j][k], acc[j-1][k][:])
				acc[j-1][k] = torchLanes{}
			}
			if i&(levelMask<<(j*power)) != 0 {
				break
			}
		}
	}
	for ; i < size; i++ {
		row(i)
	}
	for j := 1; j < torchLevel; j++ {
		for k := range torchILP {
			torchAddLanes(&acc[0][k], acc[j][k][:])
		}
	}
	return acc[0]
}

func torchAddLanes(dst *torchLanes, x []float32) {
	for l := range dst {
		dst[l] += x[l]
	}
}
