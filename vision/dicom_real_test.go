package vision

import (
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// TestRealDICOM decodes every file of $RADGEN_REAL_DICOM (default
// ../shared/real/dicom) and compares its stored values with its reference's
// within the manifest's max_abs_diff, with the geometry, bits stored,
// signedness and photometric interpretation equal.
func TestRealDICOM(t *testing.T) {
	checkDICOMManifest(t, testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom"))
}
