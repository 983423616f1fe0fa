package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/radgen/radgen/internal/boundedio"
	"github.com/radgen/radgen/memtrans"
)

// A manifest lists studies as JSON Lines: {"id": "<study id>", "images":
// ["<path>", ...]}, one study a line, blank lines ignored. Relative image
// paths are relative to the manifest's folder. The first as many images as
// the model takes views are used, as for an annotation entry.
type manifestEntry struct {
	ID     string   `json:"id"`
	Images []string `json:"images"`
}

// Limits on a manifest line.
const (
	maxManifestLine   = 1 << 20
	maxManifestImages = 64
)

// manifestStudies decodes the studies a manifest lists.
func manifestStudies(path string, views int) ([]memtrans.Study, error) {
	f, err := boundedio.Open(path, false) // a FIFO would block
	if err != nil {
		return nil, err
	}
	defer f.Close()
	base := filepath.Dir(path)
	var out []memtrans.Study
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxManifestLine)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e manifestEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if e.ID == "" || len(e.Images) == 0 || len(e.Images) > maxManifestImages {
			return nil, fmt.Errorf("%s:%d: want an id and 1 to %d images", path, line, maxManifestImages)
		}
		paths := e.Images[:min(len(e.Images), views)]
		for i, p := range paths {
			if !filepath.IsAbs(p) {
				paths[i] = filepath.Join(base, p)
			}
		}
		st, err := memtrans.StudyFromFiles(e.ID, paths...)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no studies")
	}
	return out, nil
}
