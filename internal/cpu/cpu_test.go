package cpu

import (
	"os"
	"strings"
	"testing"
)

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
	if HasAVX2FMA() || HasAVX512() || Path() != PathPureGo {
		t.Fatalf("DisableAVX2FMA left a feature on (path %s)", Path())
	}
	restore()
	if HasAVX2FMA() != had2 || HasAVX512() != had512 {
		t.Fatal("restore did not bring the features back")
	}
	t.Logf("AVX2+FMA %v, AVX-512 %v: %s", had2, had512, Describe())
}

// TestForce sets every RADGEN_CPU value through the function init runs and
// checks the path it gives, or its error where this machine lacks the path.
func TestForce(t *testing.T) {
	defer func() {
		if err := force(os.Getenv(Env)); (err == nil) != (forceErr == nil) {
			t.Errorf("restoring %s=%q: %v", Env, os.Getenv(Env), err)
		}
	}()
	for _, tc := range []struct {
		v, want string
		ok      bool
	}{
		{"", "", true},
		{"auto", "", true},
		{"avx512", PathAVX512, detected512},
		{" AVX2 ", PathAVX2, detected2},
		{"purego", PathPureGo, true},
		{"sse9", "", false},
	} {
		err := force(tc.v)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: error %v, want error %v", Env, tc.v, err, !tc.ok)
			continue
		}
		if err != nil {
			// An unavailable path leaves the detected features and says so.
			if !strings.Contains(err.Error(), Env) || HasAVX2FMA() != detected2 || HasAVX512() != detected512 {
				t.Errorf("%s=%q: %v, features %v/%v", Env, tc.v, err, HasAVX2FMA(), HasAVX512())
			}
			t.Logf("%s=%q: %v", Env, tc.v, err)
			continue
		}
		want := tc.want
		if want == "" {
			want = PathPureGo
			if detected512 {
				want = PathAVX512
			} else if detected2 {
				want = PathAVX2
			}
		}
		if Path() != want {
			t.Errorf("%s=%q: path %s, want %s", Env, tc.v, Path(), want)
		}
		if HasAVX512() && !HasAVX2FMA() {
			t.Errorf("%s=%q: AVX-512 without AVX2", Env, tc.v)
		}
	}
}

// TestEnv checks the setting this process started with: the path it names
// is the one in use, or Err says why not.
func TestEnv(t *testing.T) {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(Env)))
	switch {
	case Err() != nil:
		t.Fatalf("%v", Err())
	case v != "" && v != "auto" && Path() != v:
		t.Fatalf("%s=%s but the kernels run on %s", Env, v, Path())
	}
	t.Logf("kernel path: %s", Describe())
}
