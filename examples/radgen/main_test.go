package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/radgen/radgen"
)

// TestMain runs the command itself when the test binary is started again by
// TestVersion.
func TestMain(m *testing.M) {
	if os.Getenv("RADGEN_EXAMPLE_RUN_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestVersion: the command prints radgen's version and exits 0.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "-version"} {
		cmd := exec.Command(os.Args[0], arg)
		cmd.Env = append(os.Environ(), "RADGEN_EXAMPLE_RUN_MAIN=1")
		out, err := cmd.Output()
		if err != nil || string(out) != "radgen "+radgen.Version+"\n" {
			t.Errorf("radgen %s: %q, %v", arg, out, err)
		}
	}
}
