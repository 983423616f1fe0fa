// Package testutil finds the shared reference material (papers, goldens, data)
// that lives beside the repository in ../shared, and skips tests cleanly when it
// is absent (a user's clone has no ../shared; CI always does).
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot returns the directory holding go.mod, walking up from the
// working directory of the test. It returns "" if none is found.
func ModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// SharedPath returns ../shared/<rel> relative to the module root.
func SharedPath(rel string) string {
	root := ModuleRoot()
	if root == "" {
		return ""
	}
	return filepath.Join(root, "..", "shared", filepath.FromSlash(rel))
}

// Dir returns the directory named by the environment variable env, or
// ../shared/<def> when env is unset. The test is skipped, with a message
// naming both, when the directory does not exist.
func Dir(t testing.TB, env, def string) string {
	t.Helper()
	return path(t, env, def, true)
}

// File is Dir for a single file (for example RADGEN_GOLDEN_METRICS).
func File(t testing.TB, env, def string) string {
	t.Helper()
	return path(t, env, def, false)
}

func path(t testing.TB, env, def string, wantDir bool) string {
	t.Helper()
	p := os.Getenv(env)
	src := "$" + env
	if p == "" {
		p = SharedPath(def)
		src = "../shared/" + def + " (set $" + env + " to override)"
	}
	st, err := os.Stat(p)
	if err != nil || st.IsDir() != wantDir {
		t.Skipf("reference data not available at %s: %v; these tests need the shared goldens", src, err)
	}
	return p
}
