package cpu

import "testing"

func TestDisable(t *testing.T) {
	had2, had512 := HasAVX2FMA(), HasAVX512()
	if had512 && !had2 {
		t.Fatal("AVX-512 without AVX2/FMA")
	}
	restore := DisableAVX512()
	if HasAVX512() {
		t.Fatal("DisableAVX512 left AVX-512 on")
	}
	restore()
	if HasAVX512() != had512 {
		t.Fatal("restore did not bring AVX-512 back")
	}
	restore = DisableAVX2FMA()
	if HasAVX2FMA() || HasAVX512() {
		t.Fatal("DisableAVX2FMA left a feature on")
	}
	restore()
	if HasAVX2FMA() != had2 || HasAVX512() != had512 {
		t.Fatal("restore did not bring the features back")
	}
	t.Logf("AVX2+FMA %v, AVX-512 %v", had2, had512)
}
