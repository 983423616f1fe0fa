package vision_test

import (
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// TestKernelPath names the kernel path in the test log and fails when
// RADGEN_CPU asks for one this machine cannot run.
func TestKernelPath(t *testing.T) { testutil.KernelPath(t) }
