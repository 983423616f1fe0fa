package serve

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/vision"
)

// TestRealDICOM uploads each real DICOM file of $RADGEN_REAL/dicom (every
// codec the manifest lists) as both views of a study: the report equals
// Generate's on the same files, and the FHIR report names the file's study.
// Files without the "DICM" marker are refused as unsupported, and files
// that StudyFromFiles cannot decode as bad images.
func TestRealDICOM(t *testing.T) {
	dir := filepath.Join(testutil.Dir(t, "RADGEN_REAL", "real"), "dicom")
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []struct {
		File string `json:"file"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	f := tinyFixture(t)
	srv := server(t, newHandler(t))
	for _, e := range manifest {
		t.Run(e.File, func(t *testing.T) {
			path := filepath.Join(dir, e.File)
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			parts := []part{{field: "view", name: e.File, body: file}, {field: "view", name: e.File, body: file}, {field: "fhir", body: []byte("1")}}
			resp, body := post(t, srv.Client(), srv.URL+"/v1/reports?max_length=10", nil, parts...)
			if !vision.IsDICOM(file[:min(len(file), 132)]) {
				if resp.StatusCode != 415 || decodeError(t, body).Error.Code != CodeUnsupportedMedia {
					t.Errorf("a file without the DICM marker: %d %s", resp.StatusCode, body)
				}
				return
			}
			st, err := memtrans.StudyFromFiles("", path, path)
			if err != nil {
				// A file the library cannot decode is refused, not served.
				if resp.StatusCode != 422 || decodeError(t, body).Error.Code != CodeBadImage {
					t.Errorf("StudyFromFiles: %v; the handler: %d %s", err, resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			r := decodeReport(t, body)
			want, err := f.model.Generate(context.Background(), []memtrans.Study{st}, memtrans.WithMaxLength(10))
			if err != nil {
				t.Fatal(err)
			}
			sameReport(t, r, want[0], 0)
			info, err := vision.ReadDICOMInfoFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fh, _ := json.Marshal(r.FHIR)
			if uid := strings.TrimRight(info.StudyInstanceUID, " \x00"); uid == "" || !strings.Contains(string(fh), "urn:oid:"+uid) {
				t.Errorf("FHIR report without the study's UID %q: %.300s", uid, fh)
			}
		})
	}
}
