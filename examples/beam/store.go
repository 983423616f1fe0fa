package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs://
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // plain paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/s3"    // s3://
)

// Files are local paths or URLs of a Beam file system (gs://, s3://);
// models and images may also be http(s) URLs.

// isRemote reports whether p names a file system other than the local one.
func isRemote(p string) bool { return strings.Contains(p, "://") }

// joinPath joins URL or local path elements.
func joinPath(base string, elem ...string) string {
	if isRemote(base) {
		return strings.TrimSuffix(base, "/") + "/" + path.Join(elem...)
	}
	return filepath.Join(append([]string{base}, elem...)...)
}

// dirOf returns the folder of a URL or local path.
func dirOf(p string) string {
	if isRemote(p) {
		return p[:strings.LastIndex(p, "/")+1]
	}
	return filepath.Dir(p)
}

// resolve makes a manifest's relative image path absolute against base.
func resolve(base, p string) string {
	if isRemote(p) || filepath.IsAbs(p) || base == "" {
		return p
	}
	return joinPath(base, p)
}

// errTooLarge is returned for files beyond a size limit.
var errTooLarge = errors.New("file exceeds the size limit")

// readAll reads a whole file of at most limit bytes.
func readAll(ctx context.Context, p string, limit int64) ([]byte, error) {
	var r io.ReadCloser
	switch {
	case strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://"):
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: %s", p, resp.Status)
		}
		r = resp.Body
	case isRemote(p):
		fs, err := filesystem.New(ctx, p)
		if err != nil {
			return nil, err
		}
		defer fs.Close()
		if r, err = fs.OpenRead(ctx, p); err != nil {
			return nil, err
		}
	default:
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		r = f
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w (%d bytes)", p, errTooLarge, limit)
	}
	return b, nil
}

// exists reports whether a file is there.
func exists(ctx context.Context, p string) bool {
	if !isRemote(p) {
		_, err := os.Stat(p)
		return err == nil
	}
	fs, err := filesystem.New(ctx, p)
	if err != nil {
		return false
	}
	defer fs.Close()
	_, err = fs.Size(ctx, p)
	return err == nil
}

// writeAtomic writes a whole file so that it appears complete or not at
// all: a local file through a temporary file renamed into place, an object
// store's object (committed when its writer closes) directly. A worker
// killed mid-write leaves no partial result under the final name.
func writeAtomic(ctx context.Context, p string, data []byte) error {
	if isRemote(p) {
		fs, err := filesystem.New(ctx, p)
		if err != nil {
			return err
		}
		defer fs.Close()
		w, err := fs.OpenWrite(ctx, p)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// studyFile is where a study's result is kept under dir: a folder of 256
// by a hash of the id, then the id itself with every byte outside
// [A-Za-z0-9._-] escaped as %XX (a leading dot too), long ids shortened
// with their SHA-256. Any id, hostile ones included, stays inside dir.
func studyFile(dir, id, ext string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return joinPath(dir, fmt.Sprintf("%02x", h.Sum32()&0xff), escapeID(id)+ext)
}

func escapeID(id string) string {
	const maxName = 160
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if len(s) > maxName {
		sum := sha256.Sum256([]byte(id))
		s = s[:maxName-65] + "~" + hex.EncodeToString(sum[:])
	}
	return s
}

// shardName is the name of shard i of n of an output.
func shardName(prefix string, i, n int, ext string) string {
	return fmt.Sprintf("%s-%05d-of-%05d%s", prefix, i, n, ext)
}
