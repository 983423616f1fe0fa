package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"

	"github.com/radgen/radgen/memtrans"
)

// Study is one manifest line: {"id": "<study id>", "images": ["<path or
// URL>", ...]}. Relative paths are relative to the manifest's folder; the
// first as many images as the model takes views are used.
type Study struct {
	ID     string   `json:"id"`
	Images []string `json:"images"`
	// Seq is the study's place among the valid studies of its manifest,
	// set by the reader (a manifest's own value is ignored).
	Seq int `json:"seq,omitempty"`
}

// DeadLetter is a study that could not be processed: its id, the file at
// fault (an image, or the manifest for a malformed line) and the error.
type DeadLetter struct {
	ID    string `json:"id"`
	File  string `json:"file"`
	Error string `json:"error"`
}

func (d DeadLetter) line() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// Limits on untrusted manifest lines.
const (
	maxIDBytes    = 4096
	maxImages     = 64
	maxLineEcho   = 256 // bytes of a malformed line quoted in its dead letter
	maxImageBytes = 512 << 20
)

// parseStudy reads one manifest line.
func parseStudy(line, base string) (Study, error) {
	var s Study
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		var partial struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(line), &partial) == nil {
			s.ID = partial.ID
		}
		return Study{ID: s.ID}, fmt.Errorf("malformed manifest line %q: %w", clip(line), err)
	}
	switch {
	case s.ID == "":
		return s, fmt.Errorf("manifest line %q has no id", clip(line))
	case len(s.ID) > maxIDBytes:
		return Study{ID: s.ID[:64] + "…"}, fmt.Errorf("study id of %d bytes (limit %d)", len(s.ID), maxIDBytes)
	case len(s.Images) == 0 || len(s.Images) > maxImages:
		return s, fmt.Errorf("study %q has %d images (want 1 to %d)", s.ID, len(s.Images), maxImages)
	}
	s.Seq = 0
	for i, p := range s.Images {
		if p == "" {
			return s, fmt.Errorf("study %q: image %d has no path", s.ID, i)
		}
		s.Images[i] = resolve(base, p)
	}
	return s, nil
}

func clip(s string) string {
	if len(s) > maxLineEcho {
		return s[:maxLineEcho] + "…"
	}
	return s
}

// fileError is a study's failure blamed on one of its files.
type fileError struct {
	file string
	err  error
}

func (e *fileError) Error() string { return e.file + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// deadLetter describes err for the study id; the file is the one a
// fileError names, else fallback.
func deadLetter(id, fallback string, err error) DeadLetter {
	d := DeadLetter{ID: id, File: fallback, Error: err.Error()}
	var fe *fileError
	if errors.As(err, &fe) {
		d.File, d.Error = fe.file, fe.err.Error()
	}
	return d
}

// decodeStudy reads and decodes the first views images of s, each through
// memtrans.StudyFromFiles as radgen does (so PNG, JPEG and DICOM decode
// identically); remote images are copied to a temporary file first. A
// decoder panic is turned into an error for that study.
func decodeStudy(ctx context.Context, s Study, views int) (st memtrans.Study, err error) {
	st.ID = s.ID
	for _, p := range s.Images[:min(len(s.Images), views)] {
		img, err := decodeImage(ctx, s.ID, p)
		if err != nil {
			return memtrans.Study{}, &fileError{file: p, err: err}
		}
		st.Views = append(st.Views, img...)
	}
	return st, nil
}

func decodeImage(ctx context.Context, id, p string) (views []image.Image, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	local := p
	if isRemote(p) {
		b, err := readAll(ctx, p, maxImageBytes)
		if err != nil {
			return nil, err
		}
		f, err := os.CreateTemp("", "radgen-image-*"+strings.ToLower(filepath.Ext(p)))
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		local = f.Name()
	} else if st, err := os.Stat(p); err != nil {
		return nil, err
	} else if st.Size() > maxImageBytes {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, int64(maxImageBytes))
	}
	one, err := memtrans.StudyFromFiles(id, local)
	if err != nil {
		// Drop memtrans's "study <id>: decoding <file>:" prefix: the dead
		// letter names both.
		msg := err.Error()
		if i := strings.Index(msg, local+": "); i >= 0 {
			msg = msg[i+len(local)+2:]
		}
		return nil, errors.New(msg)
	}
	return one.Views, nil
}
