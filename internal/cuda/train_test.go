//go:build cuda

package cuda

import (
	"regexp"
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
